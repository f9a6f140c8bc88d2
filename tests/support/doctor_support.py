"""Helpers for the doctor tests: run the packaged inspection program in-process against a
sandbox root and an injected /proc, and build Kubernetes API objects for snapshots."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuplane.doctor.inspect import PROGRAM_PATH

DATA = Path(__file__).parents[1] / "data" / "doctor"
KUBELET_PID = 4242000   # above any real pid_max, so a fake process never shadows a real one


def program() -> ModuleType:
    """The inspection program, imported from its packaged file."""
    spec = importlib.util.spec_from_file_location("gpuplane_inspect_node", PROGRAM_PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_process(proc: Path, pid: int, argv: list[str], exe: str | None = None,
                 comm: str | None = None, environ: dict[str, str] | None = None) -> None:
    """One /proc/<pid> entry: cmdline, comm, an exe link and optionally environ."""
    base = proc / str(pid)
    base.mkdir(parents=True, exist_ok=True)
    (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (base / "comm").write_text((comm or os.path.basename(exe or argv[0]))[:15] + "\n")
    if exe:
        (base / "exe").symlink_to(exe)
    if environ:
        (base / "environ").write_bytes(
            b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0")


def real_process(proc: Path, pid: int) -> None:
    """Copy a real process's cmdline and exe link into a fake /proc."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    fake_process(proc, pid, [a.decode() for a in argv if a], os.readlink(f"/proc/{pid}/exe"))


def kubelet(proc: Path, endpoint: str, *extra: str) -> None:
    fake_process(proc, KUBELET_PID, ["/usr/bin/kubelet", "--container-runtime-endpoint",
                                     f"unix://{endpoint}", *extra], "/usr/bin/kubelet")


def inspect(root: Path | str, proc: Path, *args: str) -> dict[str, Any]:
    """Run the program's `inspect` as the pod would, JSON round trip included."""
    mod = program()
    report = mod.inspect(mod.parse_args(["--root", str(root), "--proc", str(proc), *args]))
    return json.loads(json.dumps(report))


def write_plain(layout: dict[str, str], root: Path) -> None:
    """Write node files under a sandbox root as they are (imports not rebased): what the
    inspection reads through `--root`."""
    for node_path, text in layout.items():
        target = root / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "uid": f"uid-{namespace or ''}-{name}",
                            "creationTimestamp": "2026-11-20T08:00:00Z", **extra}
    if namespace:
        data["namespace"] = namespace
    return data
