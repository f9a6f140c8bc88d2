"""MIG facts: the profiles each GPU model can be cut into, and the named layouts of the
GPU Operator's default mig-parted config at each chart tag.

A MIG profile that the GPU cannot make leaves MIG Manager failing on the node (its state
label `failed`) and the pool advertising nothing; a GPU without MIG cannot take any. The
stack names the pool's `gpuModel`, so a plan can say which profiles fit before anything
is rolled out.

Facts, not code:
- the named layouts (`all-1g.10gb`, `all-balanced`, ...) per chart tag are
  NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml` at v24.3.0 ...
  v26.7.0, kept as data in `data/mig/configs.json` (written by scripts/gen_mig_configs.py);
- the profiles per model (instances per GPU) are the `all-<profile>` layouts grouped by
  the model comments of that file @v25.10.1, and the PCI device ids are its
  `device-filter`s (the `all-balanced` entries, one per model family).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SOURCE = "NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml"


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as a stack names it (`gpuModel`): its MIG profiles, each with the most
    instances one GPU holds (empty: no MIG), and its PCI device ids (mig-parted's
    `device-filter`)."""

    name: str
    profiles: tuple[tuple[str, int], ...]
    pci: tuple[str, ...] = ()

    @property
    def mig(self) -> bool:
        return bool(self.profiles)

    def most(self, profile: str) -> int:
        """Instances of `profile` one GPU holds; 0: the model cannot make it."""
        return dict(self.profiles).get(profile, 0)


def _sizes(*rows: tuple[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(rows)


_A100_80 = _sizes(("1g.10gb", 7), ("1g.10gb+me", 1), ("1g.20gb", 4), ("2g.20gb", 3),
                  ("3g.40gb", 2), ("4g.40gb", 1), ("7g.80gb", 1))
_A100_40 = _sizes(("1g.5gb", 7), ("1g.5gb+me", 1), ("1g.10gb", 4), ("2g.10gb", 3),
                  ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1))
_H100_NVL = _sizes(("1g.12gb", 7), ("1g.12gb+me", 1), ("1g.24gb", 4), ("2g.24gb", 3),
                   ("3g.47gb", 2), ("4g.47gb", 1), ("7g.94gb", 1))
_H100_96 = _sizes(("1g.12gb", 7), ("1g.12gb+me", 1), ("1g.24gb", 4), ("2g.24gb", 3),
                  ("3g.48gb", 2), ("4g.48gb", 1), ("7g.96gb", 1))
_H200 = _sizes(("1g.18gb", 7), ("1g.18gb+me", 1), ("1g.35gb", 4), ("2g.35gb", 3),
               ("3g.71gb", 2), ("4g.71gb", 1), ("7g.141gb", 1))
_B200 = _sizes(("1g.23gb", 7), ("1g.23gb+me", 1), ("1g.45gb", 4), ("2g.45gb", 3),
               ("3g.90gb", 2), ("4g.90gb", 1), ("7g.180gb", 1))
_A30 = _sizes(("1g.6gb", 4), ("1g.6gb+me", 1), ("2g.12gb", 2), ("2g.12gb+me", 1),
              ("4g.24gb", 1))
_RTX_PRO_6000 = _sizes(("1g.24gb", 4), ("2g.48gb", 2), ("4g.96gb", 1))

_H100_80_PCI = ("0x232210DE", "0x232410DE", "0x233010DE", "0x233110DE")
_A100_80_PCI = ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE")
_A100_40_PCI = ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE")

MODELS: dict[str, GpuModel] = {m.name: m for m in [
    GpuModel("A100-40GB", _A100_40, _A100_40_PCI),
    GpuModel("A100-80GB", _A100_80, _A100_80_PCI),
    GpuModel("A30-24GB", _A30, ("0x20B710DE",)),
    GpuModel("H100-80GB", _A100_80, _H100_80_PCI),
    GpuModel("H100-NVL", _H100_NVL, ("0x232110DE", "0x233A10DE")),
    GpuModel("H100-96GB", _H100_96, ("0x233D10DE",)),
    GpuModel("GH200", _H100_96, ("0x234210DE",)),
    GpuModel("H200-141GB", _H200, ("0x233510DE", "0x233B10DE")),
    GpuModel("B200", _B200, ("0x290110DE",)),
    GpuModel("RTX-PRO-6000-96GB", _RTX_PRO_6000, ("0x2BB510DE",)),
    # No MIG: the data-centre GPUs users pool beside MIG ones (NVIDIA's MIG user guide
    # lists A30, A100, H100, H200, B200 and the RTX PRO 6000 as MIG-capable; none of these).
    *(GpuModel(name, ()) for name in ("T4", "L4", "A10", "A10G", "A16", "A2", "A40", "L40",
                                      "L40S", "V100", "RTX-A6000")),
]}


def model(name: str) -> GpuModel | None:
    """The model a stack names, case-insensitively; None for one gpuplane does not know."""
    wanted = name.strip().upper()
    return next((m for m in MODELS.values() if m.name.upper() == wanted), None)


@cache
def _data() -> dict[str, Any]:
    text = resources.files("gpuplane").joinpath("data/mig/configs.json").read_text("utf-8")
    return dict(json.loads(text))


def _tag_key(tag: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", tag))


def named_configs(chart: str | None) -> dict[str, list[list[Any]]]:
    """The default mig-parted config's layouts at chart tag `chart` (the nearest older
    known tag; the newest where the chart is unknown or None): name -> rows of
    [device filter or None, mig-enabled, {profile: instances per GPU}]."""
    versions = _data()["versions"]
    if chart is None:
        return dict(versions[-1]["configs"])
    want = _tag_key(chart) if re.search(r"\d", chart) else (999,)
    best = versions[0]
    for group in versions:
        if min(_tag_key(t) for t in group["tags"]) <= want:
            best = group
    return dict(best["configs"])


def config_layout(config: str, gpu: GpuModel | None, chart: str | None
                  ) -> dict[str, int] | None:
    """The MIG devices per GPU that the named config gives `gpu` (the block whose device
    filter names the GPU, else the unfiltered one); None: the chart's config has no such
    name, or no block for this GPU."""
    rows = named_configs(chart).get(config)
    if rows is None:
        return None
    pci = set(gpu.pci) if gpu is not None else set()
    plain = None
    for flt, enabled, devices in rows:
        layout = {str(k): int(v) for k, v in devices.items()} if enabled else {}
        if flt is None:
            plain = layout
        elif pci & set(flt):
            return layout
    return plain


__all__ = ["MODELS", "SOURCE", "GpuModel", "config_layout", "model", "named_configs"]
