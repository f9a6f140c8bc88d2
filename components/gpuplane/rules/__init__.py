"""The rulebook: failure modes FM01-FM38 and the pure checks that find them."""

from gpuplane.rules.catalogue import RULES, Rule, explain
from gpuplane.rules.containerd import ContainerdFacts, Loss, check_containerd
from gpuplane.rules.hami import check_hami_nodes, check_hami_values
from gpuplane.rules.nodefiles import check_node_files
from gpuplane.rules.operator import check_operator_values
from gpuplane.rules.rollout import RolloutStep, check_rollout
from gpuplane.rules.timeslicing import check_time_slicing, expected_allocatable
from gpuplane.rules.workloads import check_workload, gpu_requests, pod_spec_of

__all__ = [
    "RULES",
    "ContainerdFacts",
    "Loss",
    "RolloutStep",
    "Rule",
    "check_containerd",
    "check_hami_nodes",
    "check_hami_values",
    "check_node_files",
    "check_operator_values",
    "check_rollout",
    "check_time_slicing",
    "check_workload",
    "expected_allocatable",
    "explain",
    "gpu_requests",
    "pod_spec_of",
]
