"""gpuplane's Pulumi program: the stack's `gpuplane:*` config becomes one GpuCluster."""

from components.program import run

run()
