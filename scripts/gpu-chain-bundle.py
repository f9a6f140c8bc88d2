#!/usr/bin/env python3
"""Build the offline bundle that runs the whole node chain on a GPU machine without network.

    .venv/bin/python scripts/gpu-chain-bundle.py [OUT.tar.gz] [--lines 1.7,2.1]

Everything travels: containerd/ctr/shim of each line (from $GPUPLANE_CACHE, as the fetch
scripts left them), runc (+ its libseccomp) and busybox-static, the NVIDIA toolkit 1.18.1
oracle binaries, the CRI api.proto and its generated Python stubs, the plain python3 image
tar, a Python to run the harness with (the same Debian python3 tree as the image, started
through its own loader), the Python packages the harness imports (copied from this venv,
no download), gpuplane's source and the harness (tests/support/gpu_chain.py and what it imports).

On the GPU machine, as root::

    tar -xzf gpu-chain-bundle.tar.gz && gpu-chain/run.sh        # auto: gpu if a driver
    gpu-chain/run.sh --mode rehearsal --only kubeadm:1.7          # a quick check

It prints one JSON line per case and a summary line; exit 0 when every case passed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
HARNESS = ("gpu_chain.py", "oracle.py", "toolkit_oracle.py", "operator_env.py", "layouts.py")
OWN_MODULES = {"gpuplane", "support", "gpu_chain", "oracle", "toolkit_oracle", "operator_env",
               "layouts",
               "cri_api_pb2", "cri_api_pb2_grpc", "__main__"}

RUN_SH = """#!/bin/sh
# Run the whole node chain from this bundle, offline (scripts/gpu-chain-bundle.py made it).
#   ./run.sh [--mode auto|gpu|rehearsal] [--matrix quick|full] [--only PROFILE:LINE]...
# One JSON line per case on stdout, then a summary line; exit 0 when every case passed.
set -eu
B=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
  echo "run.sh: containerd and runc need root: run it as root (sudo $0)" >&2
  exit 2
fi
P=$B/python
export GPUPLANE_CACHE="$B/cache" GPUPLANE_CHAIN_IMAGE="$B/image/python3.tar"
export GPUPLANE_RUNC="$B/bin/runc" GPUPLANE_BUSYBOX="$B/bin/busybox" GPUPLANE_BUNDLE="$B"
export LD_LIBRARY_PATH="$B/lib/runc"   # only libseccomp, for the bundled runc
export PYTHONHOME="$P/usr" PYTHONPATH="$B/tests:$B/src:$B/pydeps"
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
exec "$P/@LOADER@" --library-path "@LIBPATH@" "$P/@PYTHON@" -m support.gpu_chain "$@"
"""


class BundleError(Exception):
    """Something the bundle needs is not on this machine: the message says what to do."""


def _copy(src: Path, dst: Path, *, strip: bool = False) -> None:
    """Copy ``src``; ``strip``: drop the symbols and debug sections of a Go program we built (the
    containerd 2.x and toolkit builds keep DWARF: 58 of the bundle's 542 MiB)."""
    if not src.exists():
        raise BundleError(f"{src} is missing; run `make containerd` "
                          "(scripts/fetch-containerd.sh and scripts/build-oracles.sh)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src.resolve(), dst)
    shutil.copymode(src.resolve(), dst)
    tool = shutil.which("strip")
    if strip and tool:
        subprocess.run([tool, str(dst)], check=True, capture_output=True)


def _pydeps(dest: Path) -> list[str]:
    """Copy the installed distributions the harness imports into ``dest``; their names."""
    probe = (
        f"import sys, json; sys.path.insert(0, {str(TESTS)!r}); "
        "from support import gpu_chain, oracle; "
        "oracle.cri_modules(); import grpc; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, env=env)
    if proc.returncode != 0:
        raise BundleError(f"importing the harness failed (is the venv set up? "
                          f"`make venv`):\n{proc.stderr[-2000:]}")
    modules = set(json.loads(proc.stdout)) - set(sys.stdlib_module_names) - OWN_MODULES
    owners = md.packages_distributions()
    dists = sorted({d for m in modules for d in owners.get(m, []) if d != "gpuplane"})
    for name in dists:
        dist = md.distribution(name)
        for file in dist.files or []:
            src = Path(dist.locate_file(file))
            if ".." in file.parts or "__pycache__" in file.parts or not src.is_file():
                continue
            target = dest / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dists


def build(out: Path, lines: list[str]) -> Path:
    sys.path.insert(0, str(TESTS))
    from support import gpu_chain, oracle
    cache = oracle.cache_dir()
    with tempfile.TemporaryDirectory(prefix="gp-bundle-") as tmp:
        b = Path(tmp) / "gpu-chain"
        for line in lines:
            for sub, name in (("bin", "containerd"), ("bin", "ctr"),
                              ("shim", oracle.SHIM)):
                _copy(cache / "containerd" / line / sub / name,
                      b / "cache/containerd" / line / sub / name, strip=True)
        for name in ("nvidia-container-runtime", "nvidia-ctk", "nvidia-cdi-hook",
                     "nvidia-ctk-installer"):
            built = Path("builds") / f"toolkit-{gpu_chain.TOOLKIT}" / "bin" / name
            _copy(cache / built, b / "cache" / built, strip=True)
        _copy(cache / "cri-api/root" / oracle.CRI_PROTO_REL,
              b / "cache/cri-api/root" / oracle.CRI_PROTO_REL)
        _copy(oracle.RUNC, b / "bin/runc")
        _copy(oracle.BUSYBOX, b / "bin/busybox")
        for lib in gpu_chain._ldd([oracle.RUNC]):
            if "libseccomp" in lib:
                _copy(Path(lib), b / "lib/runc" / Path(lib).name)

        python = gpu_chain.python_rootfs(b / "python")
        gpu_chain.build_python_image(b / "image/python3.tar")
        deps = _pydeps(b / "pydeps")
        # the libraries the packages' extensions load (libstdc++, libgcc_s...) go into the
        # bundle's Python tree too: nothing may come from the GPU machine's own /usr/lib
        for lib in sorted(gpu_chain._ldd(sorted((b / "pydeps").rglob("*.so")))):
            target = b / "python" / lib.lstrip("/")
            if not target.exists():
                _copy(Path(lib), target)
        # the generated CRI stubs, keyed like oracle.cri_modules keys them
        stubs = Path(oracle.cri_modules()[0].__file__).parent
        shutil.copytree(stubs, b / "cache/cri-py" / stubs.name,
                        ignore=shutil.ignore_patterns("__pycache__"))

        shutil.copytree(REPO / "components" / "gpuplane", b / "components" / "gpuplane",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (b / "src").mkdir()
        (b / "src/gpuplane").symlink_to("../components/gpuplane")
        for name in ("__init__.py", *HARNESS):
            _copy(TESTS / "support" / name, b / "tests" / "support" / name)

        loader = next(p for p in (b / "python/lib64").glob("ld-linux*"))
        libpath = ":".join(f"$P/{d.lstrip('/')}" for d in gpu_chain._LIB_DIRS
                           if (b / "python" / d.lstrip("/")).is_dir())
        run = (RUN_SH.replace("@LOADER@", str(loader.relative_to(b / "python")))
               .replace("@LIBPATH@", libpath)
               .replace("@PYTHON@", str(python.relative_to(b / "python"))))
        (b / "run.sh").write_text(run)
        (b / "run.sh").chmod(0o755)
        (b / "MANIFEST.json").write_text(json.dumps(
            {"lines": lines, "toolkit": gpu_chain.TOOLKIT, "python_packages": deps},
            indent=2))
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz", compresslevel=1) as tar:
            tar.add(b, arcname="gpu-chain")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(REPO / "build/gpu-chain-bundle.tar.gz"))
    parser.add_argument("--lines", default="1.6,1.7,2.0,2.1,2.2",
                        help="containerd lines to carry (comma-separated)")
    args = parser.parse_args(argv)
    lines = [x.strip() for x in args.lines.split(",") if x.strip()]
    known = ("1.6", "1.7", "2.0", "2.1", "2.2")
    bad = [x for x in lines if x not in known]
    if bad or not lines:
        parser.error(f"--lines: unknown containerd line(s) {bad}; choose from {known}")
    try:
        out = build(Path(args.out), lines)
    except (BundleError, subprocess.CalledProcessError, OSError) as exc:
        print(f"gpu-chain-bundle: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:  # oracle.unavailable's skip outcome: a binary is missing
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        print(f"gpu-chain-bundle: {getattr(exc, 'msg', exc)}", file=sys.stderr)
        return 1
    size = out.stat().st_size / 2**20
    print(f"{out} ({size:.0f} MiB): containerd {', '.join(lines)}; unpack on the GPU "
          "machine and run gpu-chain/run.sh as root")
    return 0


if __name__ == "__main__":
    sys.exit(main())
