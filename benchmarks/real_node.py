"""Figures for the real node (issue #28): a kubelet built from k8s.io/kubernetes on real
containerd, registered with the test control plane (tests/support/kubelet_node.py).

Prints, for a kubeadm node planned in host mode on containerd 1.7:
- the time until the node is Ready (kubelet start to Ready);
- the node agent's `apply` on the Ready node: wall time and containerd restarts;
- the post-deploy check on the node (probe Job created by ProbeJobCheckProvider, run as a
  real pod through handler `nvidia`, judged): wall time to the verdict, and the verdict
  (here: FM01 no_driver, no GPU on this machine);
- `pulumi up` under the real CLI and kubernetes provider of a `nodeAccess: none` stack
  naming the node, with the post-deploy checks on: wall time from the start of `up` to
  its verdict (the checks fail it: no GPU here), and of the second `up`, which runs the
  failed check again (needs ../shared/charts, as the engine tests do).

    .venv/bin/python benchmarks/real_node.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "engine"))   # shared helpers of the engine tests
sys.path.insert(0, str(REPO / "components"))

from support import (  # noqa: E402 - tests/ on the path
    control_plane,
    gpu_chain,
    kubelet_node,
    oracle,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    why = kubelet_node.missing()
    if why:
        print(f"real_node: {why}", file=sys.stderr)
        return 2
    from kubernetes import client, config

    from gpuplane.checks.live import KubeCluster
    from gpuplane.checks.manifests import plan_checks, probe_configmap
    from gpuplane.checks.provider import ProbeJobCheckProvider
    from gpuplane.checks.settings import ChecksSettings
    from gpuplane.core.intent import ClusterIntent, NodeIntent
    from gpuplane.distros.profiles import Distro, profile
    from gpuplane.probe import PROBE_PATH

    root = Path(tempfile.mkdtemp(prefix="gp-bn-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    try:
        up_s, again_s = _pulumi_up(cp, root, args.runs)
    except BaseException:
        cp.stop()
        raise
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
    client.NodeV1Api(core.api_client).create_runtime_class(
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
         "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    core.create_namespace({"metadata": {"name": "gpu-operator"}})
    configmap = probe_configmap("gpu-operator", PROBE_PATH.read_text(), "checks-probe")
    core.create_namespaced_config_map("gpu-operator", configmap)
    settings = ChecksSettings(timeout_seconds=120)
    image = gpu_chain.build_python_image(root / "python3.tar",
                                         name=f"docker.io/library/{settings.image}")
    ready_s, apply_s, restarts, verdict_s, verdicts = [], [], [], [], []
    try:
        for run in range(args.runs):
            tmp = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
            name = f"bench-node-{run}"
            node = kubelet_node.KubeletSandbox(tmp, "1.7", profile(Distro.KUBEADM))
            node.boot()
            start = time.monotonic()
            kubelet = kubelet_node.attach(cp, node, tmp / "k", name)
            ready_s.append(time.monotonic() - start)
            try:
                start = time.monotonic()
                applied = node.run("apply", node.plan())
                apply_s.append(time.monotonic() - start)
                if applied.rc != 0:
                    print(f"apply failed: {applied.err}", file=sys.stderr)
                    return 1
                restarts.append(node.restarts)
                assert node.daemon is not None
                node.daemon.ctr("images", "import", str(image))
                core.patch_node_status(name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
                intent = ClusterIntent(nodes=(NodeIntent(name, 1),))
                check = plan_checks(intent, settings)[0]
                provider = ProbeJobCheckProvider()
                provider.cluster_factory = lambda *_: KubeCluster.connect(str(cp.kubeconfig))
                provider.poll_seconds = 1.0
                start = time.monotonic()
                outs = provider.create({
                    "checkName": "checks-nodes-check", "checks": [check.key],
                    "intent": intent.to_json(), "namespace": "gpu-operator",
                    "settings": asdict(settings), "jobPrefix": "checks",
                    "fingerprint": f"bench{run}", "configmap": configmap["metadata"]["name"],
                    "timeoutSeconds": 120.0, "kubeconfig": None}).outs
                verdict_s.append(time.monotonic() - start)
                verdicts.append(",".join(outs["result"]["findings"]) or
                                ("passed" if outs["passed"] else "failed"))
            finally:
                kubelet_node.stop_kubelet(kubelet, tmp / "k", cp, name)
                node.close()
                oracle.unmount_under(tmp)
    finally:
        cp.stop()

    def fig(values: list[float]) -> str:
        return (f"median {statistics.median(values):.1f} s "
                f"(min {min(values):.1f}, max {max(values):.1f})")

    print(f"real node, kubeadm, containerd 1.7, {args.runs} runs")
    print(f"  kubelet start -> node Ready:        {fig(ready_s)}")
    print(f"  agent apply on the Ready node:      {fig(apply_s)}; containerd restarts "
          f"per node: {sorted(set(restarts))}")
    print(f"  probe Job created -> verdict:       {fig(verdict_s)}; verdicts: "
          f"{sorted(set(verdicts))}")
    if up_s:
        print(f"  `pulumi up` -> verdict (1 node):    {fig(up_s)}")
        print(f"  second `pulumi up` -> verdict:      {fig(again_s)}")
    return 0


def _pulumi_up(cp: control_plane.ControlPlane, root: Path,
               runs: int) -> tuple[list[float], list[float]]:
    """`pulumi up` to the checks' verdict on a fresh node per run; ([], []) without the
    engine or the charts."""
    from kubernetes import client, config
    from support import pulumi_engine
    from test_pulumi_engine import stack_file

    from gpuplane.checks.settings import ChecksSettings
    from gpuplane.containerd.versions import ContainerdVersion
    from gpuplane.distros.profiles import Distro, profile
    from gpuplane.plan.node import plan_node
    from gpuplane.toolkit.options import PlanOptions, ToolkitMode

    why = pulumi_engine.missing()
    if why:
        print(f"real_node: `pulumi up` not measured: {why}", file=sys.stderr)
        return [], []
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
    image = gpu_chain.build_python_image(
        root / "python3-up.tar", name=f"docker.io/library/{ChecksSettings().image}")
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse("1.7"),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    up_s, again_s = [], []
    for run in range(runs):
        name = f"bench-up-{run}"
        node = kubelet_node.start(cp, Path(tempfile.mkdtemp(prefix="gp-bu-", dir="/tmp")),
                                  plan.layout, plan.profile.config_path, line="1.7", name=name)
        try:
            node.import_image(image)
            core.patch_node_status(name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
            engine = pulumi_engine.Engine(root / f"engine-{run}", kubeconfig=cp.kubeconfig)
            path = stack_file(root / f"stacks-{run}", "kind-smoke", {
                "gpuplane:nodes": [{"name": name, "gpus": 1}],
                "gpuplane:runtime": {"createRuntimeClass": True},
                "gpuplane:checks": {"enabled": True, "timeoutSeconds": 180}})
            up = engine.run("up", "kind-smoke", stack_file=path)
            again = engine.run("up", "kind-smoke", stack_file=path)
            if up.ok or again.ok or "no NVIDIA driver" not in up.stdout:
                raise RuntimeError(f"`pulumi up` did not fail with no NVIDIA driver:\n"
                                   f"{up.stdout[-3000:]}")
            up_s.append(up.seconds)
            again_s.append(again.seconds)
            with control_plane.helm_hooks_succeed(cp, "gpu-operator"):
                down = engine.run("destroy", "kind-smoke", stack_file=path)
            if not down.ok:
                raise RuntimeError(f"`pulumi destroy` failed:\n{down.stdout[-3000:]}")
        finally:
            node.stop()
    return up_s, again_s


if __name__ == "__main__":
    sys.exit(main())
