"""Every stack the tests judge, in one catalogue: each bundled stack as it is (clean), and
each broken stack the tests build (a bundled stack plus the one change that walks into a
trap), with the rule ids `gpuplane plan` must reject it with.

The offline tests (tests/pure/test_stack_cases.py) and the real engine
(tests/engine/test_pulumi_engine.py) run the same catalogue, so a broken stack added here is
judged by both. `as_pod` turns a stack with `nodeAccess: ssh` into `nodeAccess: pod`, which
gives the same verdict and needs no command provider (the module proxy does not serve
pulumi-resource-command).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
CLEAN = tuple(sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                     for p in STACKS.glob("Pulumi.*.yaml")))
Edit = Callable[[dict[str, Any], Path], None]
# A version-3 config captured from a node that runs containerd 1.7 (a 2.x guide applied
# to a 1.7 node): containerd 1.7 refuses to start on it (FM03).
V3_ON_17 = """version = 3
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
"""


@dataclass(frozen=True)
class Broken:
    """A bundled stack with one change; `errors`: the rule ids it must be rejected with."""

    stack: str
    edit: Edit
    errors: frozenset[str]


def config_of(stack: str) -> dict[str, Any]:
    data = yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8"))
    return copy.deepcopy(data["config"])


def _merge(section: str, **keys: Any) -> Edit:
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg.setdefault(section, {}).update(keys)
    return edit


def _values(**keys: Any) -> Edit:
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg["gpuplane:gpuOperator"].setdefault("values", {}).update(keys)
    return edit


def _all(*edits: Edit) -> Edit:
    def edit(cfg: dict[str, Any], folder: Path) -> None:
        for e in edits:
            e(cfg, folder)
    return edit


def _set(key: str, value: Any) -> Edit:
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg[key] = value
    return edit


def _drop(key: str) -> Edit:
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg.pop(key, None)
    return edit


def _captured_v3_on_17(cfg: dict[str, Any], folder: Path) -> None:
    captured = folder / "captured-config.toml"
    captured.write_text(V3_ON_17, encoding="utf-8")
    cfg["gpuplane:cluster"]["baselineFiles"] = {"/etc/containerd/config.toml": str(captured)}


def _dra(**keys: Any) -> Edit:
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg["gpuplane:draDriver"].update(keys)
    return edit


def _node_files_on_eks(cfg: dict[str, Any], _dir: Path) -> None:
    cfg["gpuplane:cluster"]["nodeAccess"] = "pod"
    cfg["gpuplane:gpuOperator"]["toolkit"] = "host"
    cfg["gpuplane:docker"] = {"nvidiaRuntime": True}   # a file gpuplane would write


def _h100_pool_of(pool: str, **keys: Any) -> Edit:
    """`gpuplane:sharing.pools.<pool>` with `keys` changed."""
    def edit(cfg: dict[str, Any], _dir: Path) -> None:
        cfg["gpuplane:sharing"]["pools"][pool].update(copy.deepcopy(keys))
    return edit


def _h100_pool(**keys: Any) -> Edit:
    """The h100-mig stack's MIG pool with `keys` changed."""
    return _h100_pool_of("h100", **keys)


BROKEN: dict[str, Broken] = {
    # Sharing (issue #47): the operator's strategy against the pool's, the single strategy
    # over unlike instances, MPS on MIG instances.
    "h100-mig/FM19-raw-single-strategy": Broken(
        "h100-mig", _values(mig={"strategy": "single"}), frozenset({"FM19"})),
    "h100-mig/FM21-single-balanced": Broken(
        "h100-mig", _h100_pool(mig={"strategy": "single", "profile": "all-balanced"}),
        frozenset({"FM21"})),
    "h100-mig/FM22-mps-on-mig": Broken(
        "h100-mig", _h100_pool(mode="mps", replicas=2,
                               mig={"strategy": "single", "profile": "all-1g.10gb"}),
        frozenset({"FM22"})),
    "two-pools/FM20-mig-on-a10": Broken(
        "two-pools", _h100_pool_of("notebooks", mode="whole", replicas=0,
                                   mig={"strategy": "mixed", "profile": "all-1g.5gb"}),
        frozenset({"FM20"})),
    # HAMi's modes per pool: its MIG mode on a GPU without MIG, the operator plugin's
    # time-slicing on a HAMi pool.
    "hami-pools/FM20-mig-mode-on-l4": Broken(
        "hami-pools", _h100_pool_of("training", gpuModel="L4"), frozenset({"FM20"})),
    "hami-pools/FM29-time-slicing-under-hami": Broken(
        "hami-pools", _h100_pool_of("inference", mode="time-slicing", replicas=4,
                                    deviceSplitCount=None), frozenset({"FM29"})),
    "kind-smoke/FM18-latest-toolkit": Broken(
        "kind-smoke", _values(toolkit={"version": "latest"}), frozenset({"FM18"})),
    "kind-smoke/FM16-cdi-on-1.6": Broken(
        "kind-smoke", _all(_merge("gpuplane:cluster", containerdVersion="1.6"),
                           _merge("gpuplane:gpuOperator", cdi=True)), frozenset({"FM16"})),
    "hami-shared/FM12-two-device-plugins": Broken(
        "hami-shared", _values(devicePlugin={"enabled": True}), frozenset({"FM12"})),
    "hami-shared/FM13-cdi": Broken(
        "hami-shared", _merge("gpuplane:gpuOperator", cdi=True), frozenset({"FM13"})),
    # HAMi alone with the operator set-up's values copied: the device plugin would wait
    # for a toolkit validation no operator writes.
    "hami-host/FM13-operator-toolkit-ready": Broken(
        "hami-host", _merge("gpuplane:hami", values={
            "devicePlugin": {"gpuOperatorToolkitReady": {"enabled": True}}}),
        frozenset({"FM13"})),
    "kubeadm-prod/FM06-all-at-once": Broken(
        "kubeadm-prod", _set("gpuplane:rollout", {"canary": False, "maxUnavailable": 10}),
        frozenset({"FM06"})),
    "kubeadm-prod/FM07-cgroupfs-kubelet": Broken(
        "kubeadm-prod", _merge("gpuplane:cluster", kubeletCgroupDriver="cgroupfs"),
        frozenset({"FM07"})),
    "kubeadm-prod/FM03-captured-v3-on-1.7": Broken(
        "kubeadm-prod", _captured_v3_on_17, frozenset({"FM03"})),
    "kubeadm-prod/FM06+FM18-two-classes": Broken(
        "kubeadm-prod", _all(_set("gpuplane:rollout", {"canary": False, "maxUnavailable": 10}),
                             _values(toolkit={"version": "latest"})),
        frozenset({"FM06", "FM18"})),
    "eks-al2023-nvidia/FM08-operator-toolkit": Broken(
        "eks-al2023-nvidia", _merge("gpuplane:gpuOperator", toolkit="operator"),
        # and FM11: the chart's own CDI default (on from v25.10) stops the toolkit making
        # nvidia the default runtime this stack asks for
        frozenset({"FM08", "FM11"})),
    "aks-ubuntu/FM08-managed-driver": Broken(
        "aks-ubuntu", _merge("gpuplane:gpuOperator", driver="managed"), frozenset({"FM08"})),
    "eks-al2023/FM08-managed-driver": Broken(
        "eks-al2023", _merge("gpuplane:gpuOperator", driver="managed"), frozenset({"FM08"})),
    "bottlerocket-nvidia/FM12-operator-plugin": Broken(
        "bottlerocket-nvidia", _set("gpuplane:devicePlugin", "gpu-operator"),
        frozenset({"FM12"})),
    "bottlerocket-nvidia/FM12-hami": Broken(
        "bottlerocket-nvidia", _all(_set("gpuplane:devicePlugin", "hami"),
                                    _drop("gpuplane:timeSlicing")),
        # and FM13: the chart's own CDI default (on from v25.10) under HAMi
        frozenset({"FM12", "FM13"})),
    "aks-ubuntu/FM11-runtime-class": Broken(
        "aks-ubuntu", _merge("gpuplane:runtime", name="nvidia"), frozenset({"FM01", "FM11"})),
    "gke-cos/FM17-config-dump-source": Broken(
        "gke-cos", _values(toolkit={"env": [{"name": "RUNTIME_CONFIG_SOURCE",
                                             "value": "command"}]}), frozenset({"FM17"})),
    "gke-ubuntu/FM17-config-dump-source": Broken(
        "gke-ubuntu", _values(toolkit={"env": [{"name": "RUNTIME_CONFIG_SOURCE",
                                                "value": "command"}]}), frozenset({"FM17"})),
    "gke-cos/FM15-toolkit-install-dir": Broken(
        "gke-cos", _values(toolkit={"installDir": "/usr/local/nvidia"}), frozenset({"FM15"})),
    "gke-cos/FM15-driver-install-dir": Broken(
        "gke-cos", _values(hostPaths={"driverInstallDir": "/run/nvidia/driver"}),
        frozenset({"FM15"})),
    "eks-al2023-nvidia/FM04-node-files": Broken(
        "eks-al2023-nvidia", _node_files_on_eks, frozenset({"FM04"})),
    # NVIDIA's DRA driver (FM30-FM36): each pitfall walked into from the DRA stack.
    "kubeadm-dra/FM30+FM33-containerd-1.7-kubernetes-1.31": Broken(
        "kubeadm-dra", _all(_merge("gpuplane:cluster", containerdVersion="1.7",
                                   kubernetesVersion="1.31.4"),
                            _merge("gpuplane:gpuOperator", cdi=False)),
        frozenset({"FM30", "FM33"})),
    "kubeadm-dra/FM31-operator-driver-root": Broken(
        "kubeadm-dra", _dra(driverRoot="/run/nvidia/driver"), frozenset({"FM31"})),
    "kubeadm-dra/FM32-operator-device-plugin": Broken(
        "kubeadm-dra", _values(devicePlugin={"enabled": True}), frozenset({"FM32"})),
    # The DRA driver on one pool (issue #48): its kubelet plugin's selector removed, so
    # it runs beside the device plugin on the other pool's nodes.
    "kubeadm-dra-pools/FM32-kubelet-plugin-everywhere": Broken(
        "kubeadm-dra-pools", _dra(values={"kubeletPlugin": {"nodeSelector": None}}),
        frozenset({"FM32"})),
    "kubeadm-dra/FM34-operator-dra-mode": Broken(
        "kubeadm-dra", _values(gpuCluster={"deployCR": True}), frozenset({"FM34"})),
    "kubeadm-dra/FM36-kubelet-plugins-path": Broken(
        "kubeadm-dra", _dra(values={"kubeletPlugin": {
            "kubeletPluginsDirectoryPath": "/srv/kubelet/plugins"}}), frozenset({"FM36"})),
    "gke-cos/FM13-hami-read-only-root": Broken(
        "gke-cos", _all(_set("gpuplane:devicePlugin", "hami"),
                        _merge("gpuplane:gpuOperator", cdi=False)), frozenset({"FM13"})),
}


def broken_config(case: str, folder: Path) -> dict[str, Any]:
    """The broken stack's config; files it captures are written into `folder`."""
    spec = BROKEN[case]
    cfg = config_of(spec.stack)
    spec.edit(cfg, folder)
    return cfg


def as_pod(cfg: dict[str, Any]) -> dict[str, Any]:
    """`nodeAccess: ssh` → `nodeAccess: pod` (the same agent, the same verdict), without
    the SSH settings and key, which a pod stack must not carry."""
    if cfg.get("gpuplane:cluster", {}).get("nodeAccess") == "ssh":
        cfg["gpuplane:cluster"]["nodeAccess"] = "pod"
        cfg.pop("gpuplane:sshPrivateKey", None)
        cfg.pop("gpuplane:ssh", None)
    return cfg


def write_stack(folder: Path, name: str, cfg: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": cfg}, sort_keys=False), encoding="utf-8")
    return path


__all__ = ["BROKEN", "CLEAN", "Broken", "as_pod", "broken_config", "config_of",
           "write_stack"]
