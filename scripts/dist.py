"""`make wheel`: gpuplane's wheel, and its policy pack ready to publish, in `dist/`.

gpuplane is not on PyPI. `dist/gpuplane-<version>-py3-none-any.whl` is what a user's
project installs (`pip install dist/gpuplane-….whl`); `dist/policypack/` is the pack with
that wheel inside and a requirements.txt that installs gpuplane from it, so a pack
published with `pulumi policy publish dist/policypack` installs wherever Pulumi runs it
(Pulumi makes a virtualenv for a downloaded Python pack and installs its requirements.txt
there: installRequiredPolicy, pkg/backend/httpstate/policypack.go at pulumi v3.260.0; pip
runs `-r requirements.txt` in the pack's folder, sdk/python/toolchain/pip.go at v3.260.0,
so `./gpuplane-….whl` names the wheel beside it).

    python scripts/dist.py [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "components" / "gpuplane" / "data" / "policypack"


def build_wheel(out: Path) -> Path:
    """The checkout's wheel, built without fetching anything (the venv's setuptools)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("gpuplane-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)], check=True)
    return next(out.glob("gpuplane-*.whl"))


def publishable_pack(wheel: Path, out: Path, pack: Path = PACK) -> Path:
    """`out/policypack`: the pack, the wheel beside its files, and requirements.txt naming
    the wheel by a path relative to the pack (pip runs there) instead of `gpuplane==X`."""
    dest = out / "policypack"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(pack, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(wheel, dest / wheel.name)
    lines = (pack / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pinned = [line for line in lines if line.split("==")[0].strip() == "gpuplane"]
    if len(pinned) != 1:
        raise SystemExit(f"{pack}/requirements.txt: expected one `gpuplane==…` line")
    (dest / "requirements.txt").write_text("\n".join(
        f"./{wheel.name}" if line in pinned else line for line in lines) + "\n",
        encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    ns = parser.parse_args(argv)
    wheel = build_wheel(ns.out)
    pack = publishable_pack(wheel, ns.out)
    print(f"{wheel}\n{pack}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
