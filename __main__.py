"""gpuplane's Pulumi program: the stack's `gpuplane:*` config becomes one GpuCluster."""

from gpuplane.stack.program import main

main()
