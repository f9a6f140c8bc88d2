"""containerd release lines and the configuration behaviour that differs between them.

Measured on Debian's builds 1.6.20, 1.7.24 and 2.1.9 (see tests/real/test_differential.py).
Other 2.x releases are modelled like 2.1: same loader, deep merge and v2->v3 migration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CRI_V1 = "cri"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_V3_RUNTIME = "io.containerd.cri.v1.runtime"
RUNC_V2 = "io.containerd.runc.v2"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[~+\-].*)?$")


@dataclass(frozen=True, order=True)
class ContainerdVersion:
    """A containerd release line such as 1.7; patch releases behave alike here."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ContainerdVersion:
        """Parse "1.7", "1.7.24", "v2.1.9" or "1.6.20~ds1"; reject what we cannot model."""
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise ValueError(f"containerd version {text!r} is not X.Y or X.Y.Z")
        version = cls(int(match.group(1)), int(match.group(2)))
        no_such_line = version.major == 1 and version.minor > 7
        if version < cls(1, 6) or version.major > 2 or no_such_line:
            raise ValueError(
                f"containerd {version} is not supported: gpuplane models 1.6, 1.7 and 2.x"
            )
        return version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def deep_merges(self) -> bool:
        """2.x deep-merges imported files; 1.x replaces a whole plugin table per file."""
        return self.major >= 2

    @property
    def max_config_version(self) -> int:
        """The highest `version` containerd accepts (1.6 takes any number, reads it as 2)."""
        return 3 if self.major >= 2 else 2

    @property
    def supports_cdi(self) -> bool:
        return self >= ContainerdVersion(1, 7)

    @property
    def cdi_default(self) -> bool | None:
        """enable_cdi when unset: 1.6 has no such setting, 1.7 off, 2.x on."""
        if not self.supports_cdi:
            return None
        return self.major >= 2

    @property
    def globs_relative_to_parent(self) -> bool:
        """1.6 resolves a relative import with `*` against the daemon's working dir."""
        return self >= ContainerdVersion(1, 7)
