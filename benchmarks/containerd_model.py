"""How fast is the containerd model compared with asking containerd itself?

Per release line: median and p95 of load + merge + all containerd rules for one node's
k8s-snap-style layout (top-level + 3 drop-ins, read from disk), against spawning
`containerd --config X config dump` on the same files; then a 1000-node fleet of
distinct in-memory layouts. Prints figures only; the targets (<= 1 ms per node config,
>= 50x faster than containerd) are for reading, not asserted.

    .venv/bin/python benchmarks/containerd_model.py [--runs 500] [--spawns 30]

The containerd builds come from scripts/fetch-containerd.sh ($GPUPLANE_CACHE, default
~/.cache/gpuplane); a missing one is reported and its comparison skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuplane.containerd import (
    ContainerdVersion,
    LocalFiles,
    MemoryFiles,
    effective_config,
)
from gpuplane.rules import ContainerdFacts, check_containerd

LINES = ("1.6", "1.7", "2.1")
ETC = "/var/snap/k8s/common/etc/containerd"
CRI = '"io.containerd.grpc.v1.cri"'


def layout(etc: str, node: int = 0) -> dict[str, str]:
    """A k8s-snap-style node: the distro's top-level config, its runc drop-in, a
    non-CRI drop-in and the nvidia drop-in holding the whole CRI table (as gpuplane
    plans it for containerd < 2.1). `node` makes every file's text distinct."""
    systemd = "true" if node % 2 == 0 else "false"
    top = f"""# node-{node}
version = 2
oom_score = 0
imports = ["{etc}/conf.d/*.toml"]
root = "/var/snap/k8s/common/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/var/snap/k8s/common/run/containerd.sock"

[plugins.{CRI}]
  sandbox_image = "ghcr.io/canonical/k8s-snap/pause:3.{node % 10}"

[plugins.{CRI}.cni]
  bin_dir = "/opt/cni/bin"
  conf_dir = "/etc/cni/net.d"

[plugins.{CRI}.registry]
  config_path = "{etc}/hosts.d"
"""
    runc = f"""# node-{node}
version = 2
[plugins.{CRI}.containerd]
  default_runtime_name = "runc"
[plugins.{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = {systemd}
"""
    gc = f"""# node-{node}
version = 2
[plugins."io.containerd.gc.v1.scheduler"]
  pause_threshold = 0.0{node % 10 + 1}
  deletion_threshold = {node % 7}
"""
    nvidia = f"""# node-{node}, written by gpuplane: the whole CRI table in one drop-in
version = 2
[plugins.{CRI}]
  sandbox_image = "ghcr.io/canonical/k8s-snap/pause:3.{node % 10}"
[plugins.{CRI}.containerd]
  default_runtime_name = "runc"
[plugins.{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = {systemd}
[plugins.{CRI}.containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins.{CRI}.containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/nvidia/toolkit-{node}/nvidia-container-runtime"
  SystemdCgroup = {systemd}
"""
    return {
        f"{etc}/config.toml": top,
        f"{etc}/conf.d/00-k8s-runc.toml": runc,
        f"{etc}/conf.d/50-gc.toml": gc,
        f"{etc}/conf.d/99-nvidia.toml": nvidia,
    }


def check(top: str, files: LocalFiles | MemoryFiles, line: ContainerdVersion,
          driver: str = "systemd") -> int:
    """Load, merge and run every containerd rule, with the facts a plan provides."""
    effective = effective_config(top, files, line)
    facts = ContainerdFacts(effective, expected_runtimes=frozenset({"nvidia"}),
                            expected_files=(f"{top.rsplit('/', 1)[0]}/conf.d/99-nvidia.toml",),
                            kubelet_cgroup_driver=driver)
    return len(check_containerd(facts))


def timed(fn: Callable[[], object], runs: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def containerd_binary(line: str) -> Path | None:
    cache = Path(os.environ.get("GPUPLANE_CACHE", Path.home() / ".cache" / "gpuplane"))
    binary = cache / "containerd" / line / "bin" / "containerd"
    return binary if os.access(binary, os.X_OK) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="model runs per line")
    parser.add_argument("--spawns", type=int, default=30, help="containerd runs per line")
    parser.add_argument("--fleet", type=int, default=1000, help="nodes in the fleet")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        etc = f"{tmp}{ETC}"
        for path, text in layout(etc).items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
        top = f"{etc}/config.toml"
        for name in LINES:
            line = ContainerdVersion.parse(name)
            model = timed(lambda line=line: check(top, LocalFiles(), line), args.runs)
            binary = containerd_binary(name)
            real: list[float] | None = None
            if binary is not None:
                cmd = [str(binary), "--config", top, "config", "dump"]
                real = timed(lambda cmd=cmd: subprocess.run(
                    cmd, capture_output=True, check=True), args.spawns, warmup=2)
            rows.append((name, model, real))

    print(f"containerd model vs `containerd config dump`, one k8s-snap node config "
          f"(top-level + 3 drop-ins, from disk); model = load + merge + all rules; "
          f"{args.runs} model runs, {args.spawns} containerd runs per line\n")
    header = (f"{'line':<5} {'model median':>13} {'model p95':>10} {'containerd median':>18} "
              f"{'containerd p95':>15} {'speed-up':>9}")
    print(header)
    print("-" * len(header))
    for name, model, real in rows:
        m_med, m_p95 = statistics.median(model) * 1e3, p95(model) * 1e3
        if real is None:
            print(f"{name:<5} {m_med:>10.3f} ms {m_p95:>7.3f} ms   (containerd {name} missing: "
                  "run sh scripts/fetch-containerd.sh)")
            continue
        r_med, r_p95 = statistics.median(real) * 1e3, p95(real) * 1e3
        print(f"{name:<5} {m_med:>10.3f} ms {m_p95:>7.3f} ms {r_med:>15.2f} ms "
              f"{r_p95:>12.2f} ms {r_med / m_med:>8.0f}x")

    fleet = []
    for node in range(args.fleet):
        name = LINES[node % len(LINES)]
        etc = f"/var/snap/k8s/common/node-{node}/etc/containerd"
        driver = "systemd" if node % 2 == 0 else "cgroupfs"  # as layout() sets SystemdCgroup
        fleet.append((f"{etc}/config.toml", MemoryFiles(layout(etc, node)),
                      ContainerdVersion.parse(name), driver))
    start = time.perf_counter()
    findings = sum(check(*node) for node in fleet)
    elapsed = time.perf_counter() - start
    print(f"\nfleet: {args.fleet} distinct in-memory node layouts (1.6/1.7/2.1 in turn): "
          f"{elapsed * 1e3:.0f} ms in all, {elapsed / args.fleet * 1e3:.3f} ms per node, "
          f"{findings} findings")


if __name__ == "__main__":
    main()
