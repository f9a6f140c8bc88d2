"""A model of how containerd 1.6, 1.7 and 2.x read their configuration files.

Pure Python: parse (tomlkit), resolve imports, merge per release line, and the effective
CRI view. The differential tests hold every rule here against real containerd builds.
"""

from gpuplane.containerd.effective import EffectiveConfig, RuntimeView, effective_config
from gpuplane.containerd.errors import ConfigError
from gpuplane.containerd.files import FileSource, LocalFiles, MemoryFiles
from gpuplane.containerd.load import LoadedFile, LoadResult, load_config
from gpuplane.containerd.versions import ContainerdVersion

__all__ = [
    "ConfigError",
    "ContainerdVersion",
    "EffectiveConfig",
    "FileSource",
    "LoadResult",
    "LoadedFile",
    "LocalFiles",
    "MemoryFiles",
    "RuntimeView",
    "effective_config",
    "load_config",
]
