"""Pod Security admission and the node agent's pod: whether a namespace admits a
privileged, hostPID pod. Read by the stack config (a namespace that never will) and by
the pod runner (the API server's refusal)."""

from __future__ import annotations

from collections.abc import Mapping

PSA_ENFORCE = "pod-security.kubernetes.io/enforce"


def psa_problem(labels: Mapping[str, str], namespace: str) -> str | None:
    """Why Pod Security admission in `namespace` (its `labels`) rejects the agent's pod;
    None when it admits it (`privileged`, or no enforce label: the cluster's default)."""
    level = labels.get(PSA_ENFORCE)
    if level in (None, "privileged"):
        return None
    return (f"namespace {namespace} enforces Pod Security {level!r} ({PSA_ENFORCE}), which "
            "rejects the node agent's privileged, hostPID pod; label the namespace "
            f"{PSA_ENFORCE}=privileged, or set gpuplane:nodePod.namespace to one that admits "
            "privileged pods (unset: the GPU Operator's namespace, which gpuplane creates "
            "privileged)")


__all__ = ["PSA_ENFORCE", "psa_problem"]
