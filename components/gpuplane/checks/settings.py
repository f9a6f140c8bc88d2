"""`gpuplane:checks` as a small immutable record the check builders share.

The stack config model (components/gpuplane/config/) validates what users write; this record is
what the checks need, so the component can also be used from Python without a stack file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Sample = Literal["probe", "vectoradd"]
SAMPLES: tuple[str, ...] = ("probe", "vectoradd")


@dataclass(frozen=True)
class ChecksSettings:
    """What the post-deploy checks run, and for how long (`gpuplane:checks.*`)."""

    enabled: bool = True
    image: str = "python:3.12-slim"      # must have python3: the probe runs in it
    sample: Sample = "probe"             # vectoradd: NVIDIA's cuda-sample image instead
    timeout_seconds: int = 600
    hami_gpumem: int = 1024              # MiB per probe pod under HAMi
    hami_gpucores: int = 30              # percent of a GPU's cores under HAMi

    def __post_init__(self) -> None:
        problems = []
        if self.sample not in SAMPLES:
            problems.append(f"gpuplane:checks.sample: {self.sample!r} is not one of "
                            f"{', '.join(SAMPLES)}")
        if not str(self.image).strip():
            problems.append("gpuplane:checks.image: empty; name an image that has python3, "
                            "e.g. python:3.12-slim")
        for key, value, low, high in (
            ("timeoutSeconds", self.timeout_seconds, 1, None),
            ("hamiGpuMem", self.hami_gpumem, 1, None),
            ("hamiGpuCores", self.hami_gpucores, 1, 100),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (
                    high is not None and value > high):
                bound = f"{low}..{high}" if high else f">= {low}"
                problems.append(f"gpuplane:checks.{key}: {value!r} must be an integer {bound}")
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_config(cls, checks: Any) -> ChecksSettings:
        """From the stack model's `checks` section (attributes) or its camelCase mapping."""
        if isinstance(checks, Mapping):
            keys = {"enabled": "enabled", "image": "image", "sample": "sample",
                    "timeoutSeconds": "timeout_seconds", "hamiGpuMem": "hami_gpumem",
                    "hamiGpuCores": "hami_gpucores"}
            unknown = sorted(set(checks) - set(keys))
            if unknown:
                raise ValueError(f"gpuplane:checks: unknown key(s) {unknown}; known: "
                                 f"{', '.join(keys)}")
            return cls(**{keys[k]: v for k, v in checks.items()})
        return cls(
            enabled=checks.enabled,
            image=checks.image,
            sample=checks.sample,
            timeout_seconds=checks.timeout_seconds,
            hami_gpumem=checks.hami_gpu_mem,
            hami_gpucores=checks.hami_gpu_cores,
        )


__all__ = ["SAMPLES", "ChecksSettings", "Sample"]
