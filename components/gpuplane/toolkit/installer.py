"""What each release of the NVIDIA toolkit's installer does with containerd's config: the
facts the toolkit model and the rules branch on, one record per release.

Read at each tag of NVIDIA/nvidia-container-toolkit and held against the real installers
(built from the module at that tag) by tests/real/test_toolkit_differential.py:

- **Where it writes.** 1.18 and later write a drop-in (`RUNTIME_DROP_IN_CONFIG`) and import
  it from the top-level file; earlier ones edit `CONTAINERD_CONFIG` in place
  (`cmd/nvidia-ctk-installer/container/runtime/containerd/containerd.go`@v1.18.0;
  `tools/container/runtime/containerd/containerd.go`@v1.17.8;
  `tools/container/containerd/containerd.go`@v1.16.2).
- **What it starts from.** 1.15/1.16 read the file. 1.17.0 reads only what
  `chroot <host> containerd config dump` prints and fails when that fails; 1.17.3-1.17.8
  try that first and fall back to the file (`toml.LoadFirst`); 1.17.8 runs
  `RUNTIME_EXECUTABLE_PATH` when it is set, earlier ones `containerd` from the container's
  `PATH` (`getRuntimeConfig` at v1.17.0, v1.17.3, v1.17.8). 1.18 and later read what
  `RUNTIME_CONFIG_SOURCE` names (gpuplane always names the file). The dump prints
  containerd's defaults and every imported file merged into one, for the file at
  containerd's default path, whatever the distribution's path is.
- **Which config versions it parses.** Before 1.17.4 a version-3 config is refused
  ("unsupported config version: 3"; CHANGELOG.md@v1.17.4): the dump of any containerd
  2.x is version 3, so on 2.x those releases fail wherever the dump runs.
- **CDI in containerd.** From 1.17.5 it sets `enable_cdi` (`tools/container/runtime/
  runtime.go`@v1.17.5 `enable-cdi-in-runtime`); 1.15-1.17.4 leave containerd's CDI alone.
- **A runtime without `runtime_type`.** From 1.20 the installer fills in `runtime_type`
  (`io.containerd.runc.v2`) when the runtime it copied has none
  (`pkg/config/engine/containerd/config.go`@v1.20.0 `AddRuntime`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

# The toolkit container's PATH: `ENV PATH=/work:$PATH` over the CUDA base image's
# (NVIDIA/nvidia-container-toolkit deployments/container/Dockerfile.ubuntu@v1.17.8). The
# node's own directories on it are the ones a chrooted `containerd` is found in.
CONTAINER_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin",
                  "/bin")
DEFAULT_CONFIG = "/etc/containerd/config.toml"   # what `containerd config dump` reads

Version = tuple[int, int, int]


def parse_version(text: str) -> Version:
    """(1, 17, 8) for "1.17.8", "v1.17.8" or "v1.17.8-ubuntu20.04"."""
    match = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", text.strip())
    if not match:
        raise ValueError(f"not a toolkit version: {text!r}")
    return int(match[1]), int(match[2]), int(match[3])


@dataclass(frozen=True)
class Installer:
    """One toolkit release's installer, as far as containerd's config is concerned."""

    version: Version

    @classmethod
    def of(cls, text: str) -> Installer:
        return cls(parse_version(text))

    @property
    def name(self) -> str:
        return ".".join(str(p) for p in self.version)

    @property
    def writes_dropin(self) -> bool:
        return self.version >= (1, 18, 0)

    @property
    def reads_v3(self) -> bool:
        return self.version >= (1, 17, 4)

    @property
    def asks_dump(self) -> bool:
        """Whether it asks `containerd config dump` before (or instead of) the file."""
        return (1, 17, 0) <= self.version < (1, 18, 0)

    @property
    def dump_only(self) -> bool:
        """1.17.0: no fall-back to the file when the dump fails."""
        return (1, 17, 0) <= self.version < (1, 17, 1)

    @property
    def writes_enable_cdi(self) -> bool:
        """From 1.17.5 the installer sets containerd's `enable_cdi` (RUNTIME_ENABLE_CDI,
        else CDI_ENABLED); before, CDI_ENABLED reached only the toolkit's own config."""
        return self.version >= (1, 17, 5)

    @property
    def keeps_imports(self) -> bool:
        """1.18.0 reads the top-level `imports` as a Go `[]string`, which the TOML library
        never returns: it replaces them with its own entry (`ensureImports`,
        pkg/config/engine/containerd/config_drop_in.go@v1.18.0; fixed @v1.18.1)."""
        return self.version >= (1, 18, 1)

    @property
    def skips_nvidia_default(self) -> bool:
        """From 1.17 a default runtime named `nvidia*` is not copied for a new runtime."""
        return self.version >= (1, 17, 0)

    @property
    def unsets_default(self) -> bool:
        """From 1.18 adding a runtime that is not to be the default removes it as the
        default when it already was."""
        return self.version >= (1, 18, 0)

    @property
    def fills_runtime_type(self) -> bool:
        return self.version >= (1, 20, 0)

    def dump_binary(self, env: Mapping[str, str], node_binaries: tuple[str, ...]) -> str | None:
        """The node path of the containerd the dump runs, or None when it cannot run: 1.17.8
        runs `RUNTIME_EXECUTABLE_PATH` when set; otherwise `containerd` is looked up on the
        container's PATH inside the node's root."""
        if not self.asks_dump:
            return None
        if self.version >= (1, 17, 8) and env.get("RUNTIME_EXECUTABLE_PATH"):
            path = env["RUNTIME_EXECUTABLE_PATH"]
            return path if path in node_binaries else None
        for directory in CONTAINER_PATH:
            for binary in node_binaries:
                if binary == posixpath.join(directory, "containerd"):
                    return binary
        return None


__all__ = ["CONTAINER_PATH", "DEFAULT_CONFIG", "Installer", "parse_version"]
