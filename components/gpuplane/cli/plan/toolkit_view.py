"""The plan's account of the GPU Operator's toolkit on the nodes: the files it will write
(modelled on the real installer, gpuplane.toolkit.output), and what it would take away
from a node if gpuplane wrote nothing first, with the files and `toolkit.env` entries by
which this plan avoids that.

The counterfactual is the same node planned without node access (`writes_files=False`):
the toolkit then meets the distribution's own files. Its FM05 findings are the settings
the toolkit's rewrite would drop there (on RKE2/K3s/MicroK8s: the template it creates
holds only `version` and `imports`, so the rendered config loses the distribution's own
plugin settings). On RKE2/K3s it also says which runtime setup the plan took and why
(`runtimeSetup`, gpuplane.distros.rancher_mode).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplane.plan.node import NodeContainerdPlan, ToolkitMode, plan_node

_STEERING = ("CONTAINERD_CONFIG", "RUNTIME_CONFIG_SOURCE", "RUNTIME_DROP_IN_CONFIG")


def toolkit_view(plan: NodeContainerdPlan) -> dict[str, Any] | None:
    """The report's `toolkit` member for one node plan; None when the operator's toolkit
    does not run (host toolkit, or no nvidia runtime)."""
    if plan.options.toolkit is not ToolkitMode.OPERATOR:
        return None
    alone = plan_node(plan.profile, plan.version,
                      replace(plan.options, writes_files=False), current=plan.baseline)
    lost = [f.message for f in alone.findings if f.id == "FM05"]
    avoided = bool(lost) and not [f for f in plan.findings if f.id == "FM05"]
    setup = {"path": plan.options.runtime_setup, "why": list(plan.options.runtime_setup_why)} \
        if plan.profile.detects_nvidia_runtime else None
    return {
        "runtimeSetup": setup,
        "writes": sorted(plan.toolkit_files),
        "withoutGpuplane": lost,
        "avoidedBy": {
            "files": sorted(plan.files),
            "toolkitEnv": {e["name"]: e["value"] for e in plan.toolkit_env
                           if e["name"] in _STEERING},
        } if avoided else None,
    }


def toolkit_lines(view: dict[str, Any] | None) -> list[str]:
    """The view as plain sentences, for the text and markdown renderings."""
    if not view:
        return []
    lines: list[str] = []
    setup = view.get("runtimeSetup")
    if setup:
        # RKE2/K3s (gpuplane.distros.rancher_mode): which path puts the runtime in, and why.
        lines.append(f"runtime setup: {setup['path']} ({'; '.join(setup['why'])})")
    writes = f"the operator's toolkit writes: {', '.join(view['writes'])}"
    if setup and setup["path"] == "detected":
        writes += " (files the distribution's containerd never reads)"
    lines.append(writes)
    for lost in view["withoutGpuplane"]:
        lines.append(f"left to itself on this node it would drop settings: {lost}")
    avoided = view["avoidedBy"]
    if avoided:
        env = ", ".join(f"{k}={v}" for k, v in avoided["toolkitEnv"].items())
        lines.append(f"this plan avoids that: gpuplane writes {', '.join(avoided['files'])} "
                     f"first and points the toolkit at it ({env})")
    elif view["withoutGpuplane"]:
        lines.append("this plan does NOT avoid it (see the FM05 finding)")
    return lines


__all__ = ["toolkit_lines", "toolkit_view"]
