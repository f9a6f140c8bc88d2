"""What a GPU node's device plugin must advertise, per extended resource name, and what
MIG Manager's node labels say about a node whose MIG layout is changing.

Both the post-deploy checks (gpuplane.checks.allocatable) and the doctor
(gpuplane.doctor.health) judge `status.allocatable` against the stack; this module is the
one place that says what the stack expects, so the two cannot disagree. Pure.

Upstream facts, at the tags the supported GPU Operator charts ship:

* mixed MIG strategy: one resource per MIG profile, `nvidia.com/mig-<profile>`
  (NVIDIA/k8s-device-plugin internal/rm/rm.go@v0.17.0); MPS: the plugin's Allocate sets
  `CUDA_MPS_PIPE_DIRECTORY` in the container (internal/plugin/mps.go@v0.17.0).
* MIG Manager labels the node `nvidia.com/mig.config.state`: `pending` while it applies
  the layout named by `nvidia.com/mig.config`, `rebooting` while a mode change waits for a
  reboot, then `success` or `failed`; while it works it sets the GPU clients'
  `nvidia.com/gpu.deploy.<component>` labels to `paused-for-mig-change` (so the device
  plugin leaves the node and nothing is advertised), and sets them back to `true` when it
  exits (NVIDIA/mig-parted deployments/container/reconfigure-mig.sh@v0.13.0;
  pkg/mig/reconfigure/reconfigure.go@v0.14.0 in Go).
* When shutting the clients down fails, MIG Manager v0.14.0 leaves the state `pending`
  and the labels paused, and waits for a change of `nvidia.com/mig.config` that never
  comes: the node advertises nothing until someone acts (NVIDIA/gpu-operator#2833).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuplane.core.intent import GPU_RESOURCE, ClusterIntent, NodeIntent
from gpuplane.rules.timeslicing import expected_allocatable as timeslicing_allocatable

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PAUSED = "paused-for-mig-change"
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
RECONFIGURING = ("pending", "rebooting")
MPS_PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"


def expected_resources(node: NodeIntent, intent: ClusterIntent,
                       hami_split: int | None = None) -> dict[str, int]:
    """Each extended resource `node` must advertise and its count: the pool's own map
    (`NodeIntent.resources`: MIG instances per profile, a pool's replicas) when the stack
    set one; else HAMi's split of each GPU (`hami_split`, default the intent's
    `hami.deviceSplitCount`); else the physical GPUs times the cluster's time-slicing
    replicas of `ClusterIntent.gpu_resource`."""
    if node.resources:
        return dict(node.resources)
    if intent.device_plugin == "hami":
        split = intent.hami_split_count if hami_split is None else hami_split
        return {GPU_RESOURCE: node.gpus * split}
    return {intent.gpu_resource: timeslicing_allocatable(node.gpus, intent)}


def probe_resource(node: NodeIntent, intent: ClusterIntent) -> str:
    """The resource one check pod asks for on `node`: the first its pool advertises."""
    return next(iter(expected_resources(node, intent)))


def is_mig_resource(resource: str) -> bool:
    return resource.startswith(MIG_RESOURCE_PREFIX)


@dataclass(frozen=True)
class MigManagerState:
    """What MIG Manager's labels on one node say."""

    config: str | None          # nvidia.com/mig.config: the layout asked for
    state: str | None           # nvidia.com/mig.config.state
    paused: tuple[str, ...]     # nvidia.com/gpu.deploy.* labels at paused-for-mig-change

    @property
    def reconfiguring(self) -> bool:
        """MIG Manager is still applying `config` (or is wedged doing so)."""
        return self.state in RECONFIGURING

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    @property
    def plugin_paused(self) -> bool:
        """The device plugin was taken off the node for the change."""
        return DEVICE_PLUGIN_DEPLOY_LABEL in self.paused

    def describe(self) -> str:
        """The labels as `key=value`, for messages."""
        parts = [f"{MIG_STATE_LABEL}={self.state}"]
        if self.config is not None:
            parts.insert(0, f"{MIG_CONFIG_LABEL}={self.config}")
        parts += [f"{label}={PAUSED}" for label in self.paused]
        return ", ".join(parts)


def mig_manager_state(labels: Mapping[str, str] | None) -> MigManagerState | None:
    """MIG Manager's view of a node from its labels; None when it never labelled it."""
    labels = labels or {}
    state = labels.get(MIG_STATE_LABEL)
    if state is None:
        return None
    paused = tuple(sorted(k for k, v in labels.items()
                          if k.startswith("nvidia.com/gpu.deploy.") and v == PAUSED))
    return MigManagerState(labels.get(MIG_CONFIG_LABEL), state, paused)


__all__ = ["DEVICE_PLUGIN_DEPLOY_LABEL", "MIG_CONFIG_LABEL", "MIG_RESOURCE_PREFIX",
           "MIG_STATE_LABEL", "MPS_PIPE_ENV", "PAUSED", "MigManagerState",
           "expected_resources", "is_mig_resource", "mig_manager_state", "probe_resource"]
