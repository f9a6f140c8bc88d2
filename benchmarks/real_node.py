"""Figures for the real node (issue #28): a kubelet built from k8s.io/kubernetes on real
containerd, registered with the test control plane (tests/kubelet_node.py).

Prints, for a kubeadm node planned in host mode on containerd 1.7:
- the time until the node is Ready (kubelet start to Ready);
- the node agent's `apply` on the Ready node: wall time and containerd restarts;
- the post-deploy check on the node (probe Job created by ProbeJobCheckProvider, run as a
  real pod through handler `nvidia`, judged): wall time to the verdict, and the verdict
  (here: FM01 no_driver, no GPU on this machine).

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
sys.path.insert(0, str(REPO / "components"))

import control_plane  # noqa: E402 - tests/ on the path
import gpu_chain  # noqa: E402
import kubelet_node  # noqa: E402

import oracle  # noqa: E402


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
    from gpuplane.distros import Distro, profile
    from gpuplane.intent import ClusterIntent, NodeIntent
    from gpuplane.probe import PROBE_PATH

    root = Path(tempfile.mkdtemp(prefix="gp-bn-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
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
                kubelet_node.stop_kubelet(kubelet, tmp / "k")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
