"""The wheel of this checkout, built as pip builds it for a user (no build isolation: the
venv's setuptools), from a copy of the source as a developer has it (byte-compiled)."""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "components" / "gpuplane"


def build(workdir: Path) -> tuple[Path, str]:
    """(the wheel, everything pip and setuptools printed while building it)."""
    src = workdir / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(SOURCE, src / "components" / "gpuplane",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    compileall.compile_dir(src / "components", quiet=1)
    if not list((src / "components" / "gpuplane" / "data").rglob("*.pyc")):
        raise RuntimeError("no bytecode made below data/: the wheel test would prove nothing")
    out = workdir / "wheel"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-w", str(out), str(src)],
                          check=True, capture_output=True, text=True)
    return next(out.glob("gpuplane-*.whl")), done.stdout + done.stderr


def unpack(wheel: Path, site: Path) -> Path:
    """The wheel unpacked as pip installs it into site-packages; returns `site`."""
    zipfile.ZipFile(wheel).extractall(site)
    return site
