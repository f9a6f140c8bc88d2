"""The foreign matrix (#46): every distribution and managed platform gpuplane knows, crossed
with every way a plain program installs the GPU Operator (`helm.v3.Release`,
`helm.v4.Chart`, a `ClusterPolicy` custom resource), with the values users write by hand.
Each cell's toolkit-path verdict (FM01/FM04/FM05/FM17) must equal that of a GpuCluster
stack of the same cluster whose operator values were written the same way. Shared by the
offline tier (tests/pure/test_foreign_matrix.py) and the real CLI
(tests/engine/test_foreign_engine.py)."""

from __future__ import annotations

import json
from typing import Any

from gpuplane.platforms.profiles import DRIVER, PLATFORMS, Platform

CHART = "v25.10.1"
TOOLKIT_IDS = frozenset({"FM01", "FM04", "FM05", "FM17"})
# A k8s-snap bootstrapped beside Docker's containerd (the founding incident).
SNAP_BASE = "/var/lib/k8s-containerd"
# (facts) per distribution: versions a node of each runs.
DISTROS: dict[str, dict[str, Any]] = {
    "kubeadm": {"containerdVersion": "2.0", "kubernetesVersion": "1.33.4"},
    "k8s-snap": {"containerdVersion": "1.7.27", "kubernetesVersion": "1.32.3",
                 "containerdBaseDir": SNAP_BASE},
    "rke2": {"containerdVersion": "2.0", "kubernetesVersion": "1.31.6"},
    "k3s": {"containerdVersion": "2.0", "kubernetesVersion": "1.31.6"},
    "microk8s": {"containerdVersion": "1.7", "kubernetesVersion": "1.33.4"},
    "k0s": {"containerdVersion": "1.7", "kubernetesVersion": "1.33.4"},
}
FORMS = ("release", "chart", "cluster-policy")
# Values as users write them: the chart's defaults for the toolkit, and an env copied from
# a kubeadm guide.
VALUES: dict[str, dict[str, Any]] = {
    "defaults": {"driver": {"enabled": False}},
    "kubeadm-env": {"driver": {"enabled": False}, "toolkit": {"env": [
        {"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"}]}},
}


def facts(cluster: str) -> dict[str, Any]:
    """The pack config's facts for `cluster` (a distribution or a platform): what a user
    gives; a platform implies its distribution and, where it decides it, the driver."""
    if cluster in DISTROS:
        return {"distro": cluster, "driver": "preinstalled", **DISTROS[cluster]}
    plat = PLATFORMS[Platform(cluster)]
    out: dict[str, Any] = {"platform": cluster, "containerdVersion": plat.containerd_lines[-1],
                           "kubernetesVersion": "1.33.4"}
    if DRIVER not in plat.preinstalled and not plat.operator_driver_unsupported:
        out["driver"] = "preinstalled"   # the platform does not decide it
    return out


CLUSTERS = (*DISTROS, *(p.value for p in Platform))


def program(form: str, values: dict[str, Any]) -> str:
    """A plain Pulumi program (Python) installing the operator with `values`."""
    text = json.dumps(values).replace("false", "False").replace("true", "True")
    repo = '{"repo": "https://helm.ngc.nvidia.com/nvidia"}'
    if form == "release":
        return (f'k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="gpu-operator", '
                f'version="{CHART}", repository_opts={repo}, namespace="gpu-operator", '
                f'values={text})\n')
    if form == "chart":
        return (f'k8s.helm.v4.Chart("gpu-operator", chart="gpu-operator", version="{CHART}", '
                f'repository_opts={repo}, namespace="gpu-operator", values={text})\n')
    return ('k8s.apiextensions.CustomResource("cp", api_version="nvidia.com/v1", '
            f'kind="ClusterPolicy", metadata={{"name": "cluster-policy"}}, spec={text})\n')


def gpu_cluster(cluster: str, values: dict[str, Any]) -> dict[str, Any]:
    """The GpuCluster stack config of the same cluster, its operator values written by hand
    the same way: a `toolkit.env` list replaces the env gpuplane renders, so the chart's
    defaults are an empty list."""
    f = facts(cluster)
    own = json.loads(json.dumps(values))
    own.setdefault("toolkit", {}).setdefault("env", [])
    node: dict[str, Any] = {"distro": f.get("distro", "kubeadm"),
                            "kubernetesVersion": f["kubernetesVersion"],
                            "containerdVersion": f["containerdVersion"], "nodeAccess": "none"}
    if "platform" in f:
        node["platform"] = f["platform"]
    if "containerdBaseDir" in f:
        node["containerdBaseDir"] = f["containerdBaseDir"]
    return {
        "gpuplane:cluster": node,
        "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04", "pool": "gpu"}],
        "gpuplane:runtime": {"name": "nvidia", "nvidiaDefault": False},
        "gpuplane:gpuOperator": {"chartVersion": CHART, "driver": "preinstalled",
                                 "toolkit": "operator", "values": own},
    }


def verdict(findings: list[dict[str, Any]]) -> dict[str, str]:
    """The toolkit-path verdict: each rule id with its worst severity."""
    rank = {"error": 2, "warning": 1, "info": 0}
    out: dict[str, str] = {}
    for f in findings:
        if f["id"] in TOOLKIT_IDS and not f["message"].startswith("not judged") \
                and rank.get(f["severity"], 0) >= rank.get(out.get(f["id"], "info"), 0):
            out[f["id"]] = f["severity"]
    return out


__all__ = ["CHART", "CLUSTERS", "FORMS", "TOOLKIT_IDS", "VALUES", "facts", "gpu_cluster",
           "program", "verdict"]
