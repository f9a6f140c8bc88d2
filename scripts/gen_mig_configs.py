#!/usr/bin/env python3
"""Write components/gpuplane/data/mig/configs.json: the named MIG layouts of the GPU
Operator's default mig-parted config at every chart tag gpuplane supports.

The facts come from NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml`
at each tag, read from a local clone of that repository (the first argument): the
layouts (config name -> device filter and MIG devices per GPU), nothing else. Run it
again when a chart is added to gpuplane.toolkit.operator.CHART_TOOLKITS.

    scripts/gen_mig_configs.py ~/src/gpu-operator
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "components"))

from gpuplane.toolkit.operator import CHART_TOOLKITS  # noqa: E402

SOURCE = "assets/state-mig-manager/0400_configmap.yaml"
OUT = ROOT / "components" / "gpuplane" / "data" / "mig" / "configs.json"


def layouts(repo: Path, tag: str) -> dict[str, list[list[object]]]:
    text = subprocess.run(["git", "-C", str(repo), "show", f"{tag}:{SOURCE}"],
                          check=True, capture_output=True, text=True).stdout
    doc = yaml.safe_load(yaml.safe_load(text)["data"]["config.yaml"])
    out: dict[str, list[list[object]]] = {}
    for name, blocks in doc["mig-configs"].items():
        rows: list[list[object]] = []
        for block in blocks:
            flt = block.get("device-filter")
            flt = [flt] if isinstance(flt, str) else flt
            rows.append([sorted(f.upper().replace("X", "x") for f in flt) if flt else None,
                         bool(block.get("mig-enabled")), block.get("mig-devices") or {}])
        out[name] = rows
    return out


def main() -> None:
    repo = Path(sys.argv[1])
    groups: list[dict[str, object]] = []
    for tag in CHART_TOOLKITS:
        found = layouts(repo, tag)
        same = next((g for g in groups if g["configs"] == found), None)
        if same is None:
            groups.append({"tags": [tag], "configs": found})
        else:
            same["tags"].append(tag)  # type: ignore[attr-defined]
    OUT.write_text(json.dumps({"source": f"NVIDIA/gpu-operator {SOURCE}",
                               "versions": groups}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
