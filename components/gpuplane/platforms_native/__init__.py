"""Platform-native node changes (issue #29): where a managed platform owns node
configuration, gpuplane produces the platform's own input instead of writing node files.

Pure modules, no Pulumi and no I/O: the plan, the stack outputs and `gpuplane plan` wire
them in. Each entry point returns a `PlatformInput` (or raises `PlatformInputError`
naming the stack key and the fix).
"""

from gpuplane.platforms_native.result import PlatformInput, PlatformInputError

__all__ = ["PlatformInput", "PlatformInputError"]
