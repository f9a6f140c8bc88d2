"""Figures for `pulumi up` to the verdict on namespaced nodes (issue #28,
tests/support/ns_node.py): the real CLI and kubernetes provider, a `nodeAccess: pod` stack with
the host toolkit, the RuntimeClass and the post-deploy checks, on 1 and 2 kubeadm nodes
(containerd 1.7, each in mount and network namespaces of its own, with a real kubelet).

Per node count it prints the wall time of:
- `pulumi up` from its start to its verdict: the agent's pod writes each node's plan
  and restarts containerd through `systemctl`, canary first, then the probe Job runs on
  each node through handler `nvidia` and fails `up` (FM01 no_driver: no GPU here);
- the second `pulumi up` (the failed check again, nothing else);
- `pulumi destroy` (each node restored through its pod);
and the containerd restarts per node of each step. Needs ../shared/charts, as the
engine tests do.

    .venv/bin/python benchmarks/ns_node_up.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "engine"))   # shared helpers of the engine tests
sys.path.insert(0, str(REPO / "components"))

from support import (  # noqa: E402 - tests/ on the path
    control_plane,
    gpu_chain,
    kubelet_node,
    ns_node,
    pulumi_engine,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for why in (kubelet_node.missing(), pulumi_engine.missing()):
        if why:
            print(f"ns_node_up: {why}", file=sys.stderr)
            return 2
    import json
    import os

    from kubernetes import client, config
    from test_ns_node import CONFIG, pod_stack

    from gpuplane.checks.settings import ChecksSettings
    from gpuplane.stack.node_pod import SANDBOX_ENV

    root = Path(tempfile.mkdtemp(prefix="gp-bns-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
    image = gpu_chain.build_python_image(
        root / "python3.tar", name=f"docker.io/library/{ChecksSettings().image}")
    figures: dict[tuple[int, str], list[float]] = {}
    restarts: dict[tuple[int, str], set[int]] = {}
    try:
        for count in (1, 2):
            for run in range(args.runs):
                names = [f"bench-ns-{count}-{run}-{i}" for i in range(count)]
                with ns_node.running(cp, names) as nodes:
                    for name, n in nodes.items():
                        n.import_image(image)
                        core.patch_node_status(
                            name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
                    os.environ[SANDBOX_ENV] = json.dumps(
                        {name: n.sandbox() for name, n in nodes.items()})
                    captured = root / f"captured-{count}-{run}.toml"
                    captured.write_text(nodes[names[0]].host(CONFIG).read_text())
                    path = pod_stack(root / f"stacks-{count}-{run}", names, captured,
                                     checks=True, runtime_class=True)
                    engine = pulumi_engine.Engine(root / f"engine-{count}-{run}",
                                                  kubeconfig=cp.kubeconfig)
                    for label, should_pass in (("up", False), ("second up", False),
                                               ("destroy", True)):
                        before = {name: n.restarts for name, n in nodes.items()}
                        op = "destroy" if label == "destroy" else "up"
                        with control_plane.helm_hooks_succeed(cp, "gpu-operator"):
                            res = engine.run(op, "kind-smoke", stack_file=path)
                        if res.ok != should_pass or (
                                op == "up" and "no NVIDIA driver" not in res.stdout):
                            raise RuntimeError(f"`pulumi {op}` ended unexpectedly:\n"
                                               f"{res.stdout[-3000:]}")
                        figures.setdefault((count, label), []).append(res.seconds)
                        restarts.setdefault((count, label), set()).update(
                            n.restarts - before[name] for name, n in nodes.items())
    finally:
        cp.stop()

    print(f"namespaced kubeadm nodes, containerd 1.7, nodeAccess pod, {args.runs} runs")
    print(f"{'nodes':>5} {'step':10} {'median s':>9} {'min s':>7} {'max s':>7} "
          "restarts/node")
    for (count, label), values in figures.items():
        print(f"{count:>5} {label:10} {statistics.median(values):9.1f} {min(values):7.1f} "
              f"{max(values):7.1f} {sorted(restarts[(count, label)])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
