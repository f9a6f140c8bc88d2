"""The real NVIDIA toolkit installer as a test oracle: run it in a sandbox on a node layout,
with the env the GPU Operator gives its toolkit container, and read back what it wrote.

The binaries are built from the toolkit's Go module at each version a supported chart
ships (tests/builds/toolkit-<version>, built into the cache by scripts/build-oracles.sh).
How the operator builds the container's env is taken from the operator's own code at the
chart's tag (gpu-operator v25.10.1 `controllers/object_controls.go`,
`assets/state-container-toolkit/0500_daemonset.yaml`) and written here independently of
gpuplane's model, so the differential compares two readings, not one.

Which program the operator's toolkit container runs (its entrypoint at each tag):
- 1.18 and later: `nvidia-ctk-installer` (NVIDIA/nvidia-container-toolkit
  `cmd/nvidia-ctk-installer`), one program;
- 1.17.x: `nvidia-toolkit` (`tools/container/nvidia-toolkit`), one program;
- 1.15.x / 1.16.x: `nvidia-toolkit`, which runs `toolkit install` and `containerd setup`
  through `sh -c` from `PATH` (`tools/container/nvidia-toolkit/run.go` `installToolkit`,
  `setupRuntime` at v1.15.0 and v1.16.2): all three are built, and the sandbox's `PATH`
  puts them first. `toolkit install` takes `--ignore-errors` only as a flag there (no env),
  so a one-line shim adds it, as `--ignore-errors` is passed to the later installers.

Sandbox: the node's files sit under `<tmp>/host` at their node paths, byte for byte (the
`imports` strings stay node paths, as the toolkit compares them as strings); the config,
drop-in and config source are handed to the installer under that prefix, the way the
operator hands them under its `/host` and `/runtime/...` mounts, and the drop-in's host
path is the node path. `ROOT` (the toolkit's install dir, which ends up in every
`BinaryName`) points into the sandbox and is mapped back to `/usr/local/nvidia`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import oracle
from support.operator_env import operator_env

TOOLKITS: dict[str, tuple[str, str]] = {
    # toolkit version (every one a supported GPU Operator chart ships): the installer
    # program the operator's toolkit container runs, and a chart that ships it (whose
    # operator env the runs use; tests/support/operator_env.py)
    "1.15.0": ("nvidia-toolkit", "v24.3.0"),
    "1.16.2": ("nvidia-toolkit", "v24.6.2"),
    "1.17.0": ("nvidia-toolkit", "v24.9.0"),
    "1.17.3": ("nvidia-toolkit", "v24.9.1"),
    "1.17.4": ("nvidia-toolkit", "v24.9.2"),
    "1.17.5": ("nvidia-toolkit", "v25.3.0"),
    "1.17.8": ("nvidia-toolkit", "v25.3.4"),
    "1.18.0": ("nvidia-ctk-installer", "v25.10.0"),
    "1.18.1": ("nvidia-ctk-installer", "v25.10.1"),
    "1.19.0": ("nvidia-ctk-installer", "v26.3.1"),
    "1.19.1": ("nvidia-ctk-installer", "v26.3.3"),
    "1.20.0": ("nvidia-ctk-installer", "v26.7.0"),
}
NEWEST = "1.20.0"
"""The toolkit whose runtime binaries (nvidia-container-runtime, nvidia-cdi-hook) are built."""
SPLIT_INSTALLER = ("1.15.", "1.16.")   # nvidia-toolkit runs `toolkit` and `containerd`
NODE_ROOT = "/usr/local/nvidia"        # ROOT in the operator's DaemonSet asset
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"   # the operator's default (1.18+)


def version_tuple(version: str) -> tuple[int, ...]:
    """(1, 18, 1) for "1.18.1"."""
    return tuple(int(p) for p in version.split("."))


def build_bin(name: str) -> Path:
    """`bin/` of the build `name` (a folder of tests/builds) in the cache."""
    return oracle.cache_dir() / "builds" / name / "bin"


def program(version: str, name: str) -> Path:
    """Program `name` of toolkit `version`; skips (fails in CI) when it was not built."""
    path = build_bin(f"toolkit-{version}") / name
    if not (path.exists() and os.access(path, os.X_OK)):
        oracle.unavailable(f"toolkit {version}: {path} is missing "
                           "(scripts/build-oracles.sh builds it from the Go module proxy)")
    return path


def installer(version: str) -> Path:
    """The installer the operator's toolkit container runs at toolkit `version`."""
    return program(version, TOOLKITS[version][0])


def chart_of(toolkit: str) -> str:
    """A GPU Operator chart that ships toolkit `toolkit`."""
    return TOOLKITS[toolkit][1]


@dataclass
class ToolkitRun:
    written: dict[str, str]   # node path -> text, every file the installer created or changed
    log: str


def run_toolkit(version: str, layout: dict[str, str], env: dict[str, str],
                tmp: Path, containerd: tuple[str, str] | None = None) -> ToolkitRun:
    """Run toolkit `version` on `layout` (node path -> text) with the operator's `env`.

    `containerd` (line, node path): the node's containerd binary, installed in the sandbox
    with the C library it loads, as it is on a real node. It matters: before 1.18 the
    installer asks `chroot <host> containerd config dump` for the node's config first
    (1.17.0: only that; 1.17.1-1.17.8: then the file; 1.17.8 runs `RUNTIME_EXECUTABLE_PATH`,
    earlier ones `containerd` from `PATH`), and 1.18+ does when `RUNTIME_CONFIG_SOURCE`
    says `command` (NVIDIA/nvidia-container-toolkit tools/container/runtime/containerd/
    containerd.go `getRuntimeConfig` at v1.17.0, v1.17.4, v1.17.8). Without it the command
    fails in the sandbox and the run would show the file fallback, not the node."""
    exe = installer(version)
    host = tmp / "host"
    for node_path, text in layout.items():
        target = host / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if containerd is not None:
        _install_containerd(host, *containerd)
    before = _snapshot(host)
    root = tmp / "toolkit-root"

    def inside(node_path: str) -> str:
        return str(host / node_path.lstrip("/"))

    path = "/usr/sbin:/usr/bin:/sbin:/bin"
    if version.startswith(SPLIT_INSTALLER):
        path = f"{_split_path(version, tmp)}:{path}"
    run_env = {"PATH": path, **env}
    run_env |= {
        "ROOT": str(root),
        "TOOLKIT_PID_FILE": str(tmp / "toolkit.pid"),
        "PID_FILE": str(tmp / "toolkit.pid"),   # 1.15 reads only this one
        # the host paths the operator mounts, where the installer reads them (1.17 takes
        # RUNTIME_CONFIG / RUNTIME_SOCKET first, which v24.9.0+ operators set too)
        **{name: inside(env[name]) for name in ("CONTAINERD_CONFIG", "CONTAINERD_SOCKET",
                                                "RUNTIME_CONFIG", "RUNTIME_SOCKET")
           if env.get(name)},
        "RUNTIME_RESTART_MODE": "none",
        "NO_DAEMON": "true",
        "HOST_ROOT_MOUNT": str(host),
        "NVIDIA_DRIVER_ROOT": str(host),
        "DRIVER_ROOT_CTR_PATH": str(host),
        "CDI_OUTPUT_DIR": str(tmp / "cdi"),
    }
    if "RUNTIME_DROP_IN_CONFIG" in env:
        run_env["RUNTIME_DROP_IN_CONFIG"] = inside(env["RUNTIME_DROP_IN_CONFIG"])
        run_env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] = env["RUNTIME_DROP_IN_CONFIG"]
    if "RUNTIME_CONFIG_SOURCE" in env:
        run_env["RUNTIME_CONFIG_SOURCE"] = ",".join(
            f"file={inside(s[5:])}" if s.startswith("file=") else s
            for s in env["RUNTIME_CONFIG_SOURCE"].split(","))
    command = [str(exe), "--ignore-errors"]
    if version.startswith(SPLIT_INSTALLER):
        # 1.15/1.16's nvidia-toolkit has no --ignore-errors (the `toolkit` shim adds it),
        # and 1.15 locks a fixed /run/nvidia/toolkit.pid: a private tmpfs there, per run.
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mkdir -p /run/nvidia && mount -t tmpfs gp-toolkit /run/nvidia && '
                   'exec "$0" "$@"', str(exe)]
    proc = subprocess.run(command, env=run_env, capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise oracle.OracleError(f"toolkit {version} failed ({proc.returncode}):\n{log}")
    after = _snapshot(host)
    written = {path: text.replace(str(root), NODE_ROOT) for path, text in after.items()
               if before.get(path) != text}
    return ToolkitRun(written, log)


def _split_path(version: str, tmp: Path) -> str:
    """`PATH` for the 1.15/1.16 `nvidia-toolkit`: a `toolkit` shim that adds
    `--ignore-errors` to `toolkit install`, then the version's own `containerd` (its
    runtime set-up program, not the daemon)."""
    shim = tmp / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    real = program(version, "toolkit")
    program(version, "containerd")
    (shim / "toolkit").write_text(
        f'#!/bin/sh\ncmd=$1; shift\nexec {real} "$cmd" --ignore-errors "$@"\n')
    (shim / "toolkit").chmod(0o755)
    return f"{shim}:{real.parent}"


def run_on_plan(plan: Any, toolkit: str, tmp: Path) -> tuple[dict[str, str], ToolkitRun]:
    """Run toolkit `toolkit` the way the GPU Operator would on a gpuplane node plan: on the
    node's files after gpuplane wrote them (rendered, for template distributions), with the
    operator's env for the plan's `toolkit.env`. Returns that node layout and the run."""
    from gpuplane.plan.layout import rendered_layout

    node = {**plan.baseline, **plan.files}
    env = operator_env(plan.options.operator_chart or chart_of(toolkit), plan.toolkit_env,
                       cdi=plan.options.cdi, runtime_class=plan.options.runtime_name)
    line = f"{plan.version.major}.{plan.version.minor}"
    real = run_toolkit(toolkit, rendered_layout(node, plan.profile, plan.version), env,
                       tmp / "toolkit", containerd=(line, plan.profile.containerd_binary))
    return node, real


_PROGRAM_FILES = ".gp-programs"   # marker listing the planted binaries (never node files)


def _install_containerd(host: Path, line: str, node_path: str) -> None:
    """containerd of `line` at `node_path` under `host`, with its loader and C library."""
    binary = oracle.binary(line).resolve()
    planted = [node_path]
    _place(binary, host / node_path.lstrip("/"))
    for lib in _shared_libraries(binary):
        _place(Path(lib).resolve(), host / lib.lstrip("/"))
        planted.append(lib)
    (host / _PROGRAM_FILES).write_text("\n".join(["/" + _PROGRAM_FILES, *planted]) + "\n")


def _place(source: Path, target: Path) -> None:
    """`source` at `target`: a hard link where both share a file system (a 50 MB daemon
    per case otherwise), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@functools.cache
def _shared_libraries(binary: Path) -> tuple[str, ...]:
    """The absolute paths `ldd` names for `binary` (loader included)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    return tuple(word for line in out.stdout.splitlines() for word in line.split()
                 if word.startswith("/"))


def _snapshot(host: Path) -> dict[str, str]:
    marker = host / _PROGRAM_FILES
    skip = set(marker.read_text().split()) if marker.exists() else set()
    return {path: p.read_text(encoding="utf-8") for p in host.rglob("*")
            if p.is_file() and (path := "/" + p.relative_to(host).as_posix()) not in skip}


def nvidia_ctk(version: str) -> Path:
    """The `nvidia-ctk` of toolkit `version` (what a host install's docs tell users to run:
    `nvidia-ctk runtime configure --runtime=containerd`); skips (fails in CI) when absent."""
    return program(version, "nvidia-ctk")


def host_configure(version: str, layout: dict[str, str], *, config: str, dropin: str,
                   args: list[str], tmp: Path) -> dict[str, str]:
    """Run `nvidia-ctk runtime configure --runtime=containerd` on `layout` (node paths) with
    the drop-in at `dropin`, the way a host install configures containerd; returns the
    node's files afterwards, with the sandbox prefix taken out of any `imports` entry."""
    host = tmp / "host"
    for node_path, text in layout.items():
        target = host / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [str(nvidia_ctk(version)), "runtime", "configure", "--runtime=containerd",
         f"--config={host}{config}", f"--drop-in-config={host}{dropin}", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp)
    if proc.returncode != 0:
        raise oracle.OracleError(f"nvidia-ctk {version} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}{proc.stderr}")
    return {path: text.replace(str(host), "") for path, text in _snapshot(host).items()}
