"""gpuplane's Pulumi program: the stack's `gpuplane:*` config becomes one GpuCluster."""

from gpuplane.program import main

main()
