"""What a stack says about its cluster, in one small serialisable record.

Rules need facts that no single resource carries (is the driver pre-installed? which
containerd runs on the nodes? is nvidia the default runtime?). `GpuCluster` writes this
record into the cluster as the ConfigMap `gpuplane-intent` (key `intent.json`), so the
same facts reach the policies at preview time (as that ConfigMap's inputs) and the doctor
on a live cluster (as that ConfigMap's data).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Literal

from gpuplane.core.sharing import PoolSharing

INTENT_CONFIGMAP = "gpuplane-intent"
INTENT_KEY = "intent.json"
INTENT_LABEL = "gpuplane.dev/intent"
GPU_RESOURCE = "nvidia.com/gpu"     # what the device plugin advertises for a whole GPU
# The preinstalled driver's host IMEX daemon, which ComputeDomains need masked (FM35).
IMEX_UNIT = "nvidia-imex.service"

DevicePlugin = Literal["gpu-operator", "hami", "platform"]
ToolkitWhere = Literal["operator", "host", "none"]
# The kubelet's cgroup driver, which runc's SystemdCgroup must match (FM07).
CgroupDriver = Literal["systemd", "cgroupfs"]


@dataclass(frozen=True)
class NodeIntent:
    """One GPU node as the stack describes it."""

    name: str
    gpus: int = 1
    os: str = "ubuntu22.04"          # <id><version>, as the toolkit image flavours name it
    pool: str = "default"
    # What the node's device plugin advertises, per extended resource name, when its pool
    # shares GPUs in a way the cluster-wide fields cannot say (MIG instances, a pool's own
    # replicas): e.g. (("nvidia.com/mig-1g.10gb", 14),). Empty: `gpus` times the cluster's
    # time-slicing replicas of `ClusterIntent.gpu_resource`, as before
    # (gpuplane.checks.allocatable.expected_allocatable).
    resources: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ClusterIntent:
    """The stack's decisions that rules compare resources and live objects against."""

    distro: str = "kubeadm"
    platform: str | None = None        # cluster.platform (platforms.profiles); None: self-managed
    containerd_version: str = "1.7"
    kubernetes_version: str = "1.31.0"
    containerd_base_dir: str | None = None
    kubelet_cgroup_driver: CgroupDriver = "systemd"
    device_plugin: DevicePlugin = "gpu-operator"
    toolkit: ToolkitWhere = "operator"
    driver_preinstalled: bool = True
    cdi: bool = False
    # gpuOperator.nri: the operator's NRI plugin injects GPUs; its RuntimeClasses are gone.
    nri: bool = False
    nvidia_default: bool = False       # nvidia is containerd's default runtime on GPU nodes
    runtime_class: str = "nvidia"
    # RKE2/K3s with the operator's toolkit: `detected` (socket-only toolkit.env, the
    # distribution adds the runtimes) or `template` (gpuplane.distros.rancher_mode).
    runtime_setup: str = "template"
    operator_namespace: str = "gpu-operator"
    hami_namespace: str = "kube-system"
    time_slicing_replicas: int = 0     # 0: time-slicing off
    time_slicing_configmap: str = "time-slicing-config"
    time_slicing_profile: str = "any"
    time_slicing_rename: bool = False  # renameByDefault: shared GPUs are nvidia.com/gpu.shared
    hami_split_count: int = 10         # hami.deviceSplitCount
    max_unavailable: int = 1
    canary: bool = True
    allow_all_at_once: bool = False    # rollout.allowAllAtOnce: the FM06 outage is accepted
    nodes: tuple[NodeIntent, ...] = field(default_factory=tuple)
    # gpuplane:draDriver: GPUs are handed out by NVIDIA's DRA driver (ResourceClaims).
    dra: bool = False
    # gpuplane:sharing (or timeSlicing): each sharing profile (a key of the device
    # plugin's ConfigMap), and which key each node pool uses: (pool, key) pairs.
    sharing: tuple[PoolSharing, ...] = ()
    sharing_pools: tuple[tuple[str, str], ...] = ()
    # With `dra`: where the DRA driver reads the NVIDIA driver (`nvidiaDriverRoot`), the
    # driver's chart version, and which of its parts run (GPUs, ComputeDomains).
    dra_driver_root: str = "/"
    dra_chart_version: str = ""
    dra_gpus: bool = True
    dra_compute_domains: bool = False
    # The node agent masks IMEX_UNIT on the GPU nodes (ComputeDomains on a preinstalled
    # driver, with node access): FM35 says so instead of leaving the step to the user.
    dra_masks_imex: bool = False
    # draDriver.pools: the node pools the driver serves; empty: every GPU node. The
    # others keep the operator's device plugin (and their sharing).
    dra_pools: tuple[str, ...] = ()
    # gpuplane:rules: (rule id, "advisory" | "disabled") pairs the stack accepts; the
    # program and the policy pack apply them to every finding (gpuplane.core.findings.levelled).
    rule_levels: tuple[tuple[str, str], ...] = ()

    @property
    def gpu_resource(self) -> str:
        """The extended resource a whole-GPU or shared slot is advertised as: with
        time-slicing and `renameByDefault` the device plugin renames `nvidia.com/gpu` to
        `nvidia.com/gpu.shared` (NVIDIA/k8s-device-plugin api/config/v1/resources.go
        `DefaultSharedRename`, suffix in api/config/v1/consts.go, at v0.18.0), so the
        allocatable check must read, and the probe Job ask for, that name. HAMi keeps
        `nvidia.com/gpu`."""
        if self.device_plugin != "hami" and self.time_slicing_replicas > 0 \
                and self.time_slicing_rename:
            return f"{GPU_RESOURCE}.shared"
        return GPU_RESOURCE

    @property
    def gpu_nodes(self) -> tuple[NodeIntent, ...]:
        return tuple(n for n in self.nodes if n.gpus > 0)

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        """Serialised once per record (it is immutable): the program, its checks and the
        policies each ask, and a fleet's record lists every node."""
        data = asdict(self)
        if not data["allow_all_at_once"]:   # only an explicit opt-in is written
            del data["allow_all_at_once"]
        if data["platform"] is None:        # self-managed stacks keep their record as it was
            del data["platform"]
        if not data["rule_levels"]:         # as the record was before gpuplane:rules
            del data["rule_levels"]
        if not data["dra"]:   # the DRA fields only where the stack has the driver
            for key in ("dra", "dra_driver_root", "dra_chart_version", "dra_gpus",
                        "dra_compute_domains", "dra_masks_imex", "dra_pools"):
                del data[key]
        elif not data["dra_pools"]:   # every GPU node: the record as it was before pools
            del data["dra_pools"]
        for key in ("sharing", "sharing_pools"):   # only a stack that shares writes them
            if not data[key]:
                del data[key]
        for p in data.get("sharing", ()):   # only a HAMi pool writes its split and scaling
            for key in ("hami_split", "hami_memory_scaling"):
                if not p[key]:
                    del p[key]
        if not data["nri"]:                 # as the record was before gpuOperator.nri
            del data["nri"]
        for node in data["nodes"]:          # only a pool with its own sharing writes these
            if not node["resources"]:
                del node["resources"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterIntent:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        nodes = tuple(NodeIntent(**{k: v for k, v in n.items()
                                    if k in NodeIntent.__dataclass_fields__ and k != "resources"},
                                 resources=tuple((str(r), int(c))
                                                 for r, c in n.get("resources", ())))
                      for n in known.pop("nodes", ()))
        levels = tuple((str(k), str(v)) for k, v in known.pop("rule_levels", ()))
        sharing = tuple(PoolSharing(**{**p, "mig_layout": tuple(
            (str(n), int(c)) for n, c in p.get("mig_layout", ()))})
            for p in known.pop("sharing", ()))
        pools = tuple((str(p), str(k)) for p, k in known.pop("sharing_pools", ()))
        dra_pools = tuple(str(p) for p in known.pop("dra_pools", ()))
        return cls(**known, nodes=nodes, rule_levels=levels, sharing=sharing,
                   sharing_pools=pools, dra_pools=dra_pools)

    def dra_serves(self, node: NodeIntent) -> bool:
        """Whether `node`'s GPUs are the DRA driver's (every GPU node unless `dra_pools`
        names some pools), not a device plugin's."""
        return self.dra and (not self.dra_pools or node.pool in self.dra_pools)

    @property
    def dra_nodes(self) -> tuple[NodeIntent, ...]:
        """The GPU nodes the DRA driver serves (checked by ResourceSlice)."""
        return tuple(n for n in self.gpu_nodes if self.dra_serves(n))

    @property
    def plugin_nodes(self) -> tuple[NodeIntent, ...]:
        """The GPU nodes a device plugin serves (checked by allocatable)."""
        return tuple(n for n in self.gpu_nodes if not self.dra_serves(n))

    def sharing_of(self, pool: str) -> PoolSharing | None:
        """The sharing profile a node of `pool` uses; None: whole GPUs, no profile."""
        key = dict(self.sharing_pools).get(pool)
        return next((p for p in self.sharing if p.key == key), None)

    @classmethod
    def from_json(cls, text: str) -> ClusterIntent:
        return cls.from_dict(json.loads(text))


__all__ = ["IMEX_UNIT", "INTENT_CONFIGMAP", "INTENT_KEY", "INTENT_LABEL", "ClusterIntent",
           "NodeIntent"]
