"""The real NVIDIA toolkit installer as a test oracle: run it in a sandbox on a node layout,
with the env the GPU Operator gives its toolkit container, and read back what it wrote.

The binaries are built from upstream source (../shared/oracles, unpacked into the cache
by scripts/fetch-oracles.sh). How the operator builds the container's env is taken from
the operator's own code at the chart's tag (gpu-operator v25.10.1
`controllers/object_controls.go`, `assets/state-container-toolkit/0500_daemonset.yaml`;
summarised in ../shared/oracles/README.md) and written here independently of gpuplane's
model, so the differential compares two readings, not one.

Sandbox: the node's files sit under `<tmp>/host` at their node paths, byte for byte (the
`imports` strings stay node paths, as the toolkit compares them as strings); the config,
drop-in and config source are handed to the installer under that prefix, the way the
operator hands them under its `/host` and `/runtime/...` mounts, and the drop-in's host
path is the node path. `ROOT` (the toolkit's install dir, which ends up in every
`BinaryName`) points into the sandbox and is mapped back to `/usr/local/nvidia`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oracle

TOOLKITS: dict[str, tuple[str, str]] = {
    # toolkit version: (oracle dir, the installer the operator's toolkit container runs)
    "1.17.8": ("nvidia-toolkit-1.17.8", "nvidia-toolkit"),
    "1.18.1": ("nvidia-toolkit-1.18.1", "nvidia-ctk-installer"),
}
NODE_ROOT = "/usr/local/nvidia"        # ROOT in the operator's DaemonSet asset
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"   # the operator's default (1.18+)


def installer(version: str) -> Path:
    """The installer binary of toolkit `version`; skips (fails in CI) when not unpacked."""
    folder, name = TOOLKITS[version]
    path = oracle.cache_dir() / "oracles" / folder / name
    if not (path.exists() and os.access(path, os.X_OK)):
        oracle.unavailable(f"toolkit oracle {version}: {path} is missing "
                           "(scripts/fetch-oracles.sh unpacks ../shared/oracles)")
    return path


def operator_env(toolkit_env: list[dict[str, str]], *, cdi: bool, runtime_class: str,
                 toolkit: str) -> dict[str, str]:
    """The env the operator gives the toolkit container, in node paths: the DaemonSet
    asset's base env, the CDI additions, the chart's `toolkit.env` (replace or append by
    name), then what the operator forces for containerd."""
    env = {
        "ROOT": NODE_ROOT,
        "NVIDIA_VISIBLE_DEVICES": "void",
        "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND": "management.nvidia.com/gpu",
        "TOOLKIT_PID_FILE": "/run/nvidia/toolkit/toolkit.pid",
    }
    if cdi:
        env |= {"CDI_ENABLED": "true", "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
                "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi"}
    env |= {e["name"]: e["value"] for e in toolkit_env}
    env["RUNTIME"] = "containerd"
    env["CONTAINERD_RUNTIME_CLASS"] = runtime_class
    env.setdefault("CONTAINERD_CONFIG", "/etc/containerd/config.toml")
    env.setdefault("CONTAINERD_SOCKET", "/run/containerd/containerd.sock")
    if toolkit.startswith("1.18"):
        # v25.10 always sets the drop-in: the user's value, or its default when unset/empty
        env["RUNTIME_DROP_IN_CONFIG"] = env.get("RUNTIME_DROP_IN_CONFIG") or DEFAULT_DROPIN
    else:
        env.pop("RUNTIME_DROP_IN_CONFIG", None)
    return env


@dataclass
class ToolkitRun:
    written: dict[str, str]   # node path -> text, every file the installer created or changed
    log: str


def run_toolkit(version: str, layout: dict[str, str], env: dict[str, str],
                tmp: Path) -> ToolkitRun:
    """Run toolkit `version` on `layout` (node path -> text) with the operator's `env`."""
    exe = installer(version)
    host = tmp / "host"
    for node_path, text in layout.items():
        target = host / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    before = _snapshot(host)
    root = tmp / "toolkit-root"

    def inside(node_path: str) -> str:
        return str(host / node_path.lstrip("/"))

    run_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **env}
    run_env |= {
        "ROOT": str(root),
        "TOOLKIT_PID_FILE": str(tmp / "toolkit.pid"),
        "CONTAINERD_CONFIG": inside(env["CONTAINERD_CONFIG"]),
        "CONTAINERD_SOCKET": inside(env["CONTAINERD_SOCKET"]),
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
    proc = subprocess.run([str(exe), "--ignore-errors"], env=run_env, capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise oracle.OracleError(f"toolkit {version} failed ({proc.returncode}):\n{log}")
    after = _snapshot(host)
    written = {path: text.replace(str(root), NODE_ROOT) for path, text in after.items()
               if before.get(path) != text}
    return ToolkitRun(written, log)


def run_on_plan(plan: Any, toolkit: str, tmp: Path) -> tuple[dict[str, str], ToolkitRun]:
    """Run toolkit `toolkit` the way the GPU Operator would on a gpuplane node plan: on the
    node's files after gpuplane wrote them (rendered, for template distributions), with the
    operator's env for the plan's `toolkit.env`. Returns that node layout and the run."""
    from gpuplane.planner import rendered_layout

    node = {**plan.baseline, **plan.files}
    env = operator_env(plan.toolkit_env, cdi=plan.options.cdi,
                       runtime_class=plan.options.runtime_name, toolkit=toolkit)
    real = run_toolkit(toolkit, rendered_layout(node, plan.profile, plan.version), env,
                       tmp / "toolkit")
    return node, real


def _snapshot(host: Path) -> dict[str, str]:
    return {"/" + p.relative_to(host).as_posix(): p.read_text(encoding="utf-8")
            for p in host.rglob("*") if p.is_file()}


def nvidia_ctk(version: str) -> Path:
    """The `nvidia-ctk` of toolkit `version` (what a host install's docs tell users to run:
    `nvidia-ctk runtime configure --runtime=containerd`); skips (fails in CI) when absent."""
    folder, _ = TOOLKITS[version]
    path = oracle.cache_dir() / "oracles" / folder / "nvidia-ctk"
    if not (path.exists() and os.access(path, os.X_OK)):
        oracle.unavailable(f"nvidia-ctk {version}: {path} is missing "
                           "(scripts/fetch-oracles.sh unpacks ../shared/oracles)")
    return path


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
