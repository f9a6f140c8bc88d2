"""The plan's "GPU sharing" line: how each pool's GPUs are handed out, in words.

A stack with `gpuplane:sharing` or the DRA driver is not described by the legacy
`gpuplane:timeSlicing` keys (which then stay at `replicas: 0`), so the line reads the
profiles the plan carries (`config.sharing`, `config.draDriver`) and falls back to the
time-slicing keys only where neither is set.
"""

from __future__ import annotations

from typing import Any


def _profile(profile: dict[str, Any], hami: bool) -> str:
    """One sharing profile (a pool's or the cluster default's) as a user would say it;
    under HAMi, `whole` leaves the nodes to HAMi's cluster-wide settings."""
    mode, replicas = profile["mode"], profile["replicas"]
    if hami and mode == "whole":
        text = "HAMi's cluster settings (gpuplane:hami)"
    elif mode == "time-slicing":
        text = f"time-slicing, {replicas} pods per GPU"
        if profile["renameByDefault"]:
            text += ", advertised as nvidia.com/gpu.shared"
        if profile["failRequestsGreaterThanOne"]:
            text += ", one GPU per pod"
    elif mode == "mps":
        text = f"MPS, {replicas} clients per GPU"
        if profile["failRequestsGreaterThanOne"]:
            text += ", one GPU per pod"
    elif mode == "mig" and profile.get("mig"):
        mig = profile["mig"]
        layout = f"profile {mig['profile']}" if mig.get("profile") else "a custom layout"
        text = f"MIG {mig['strategy']}, {layout}"
    elif mode == "mig":
        text = "MIG (HAMi's mig mode)"
    elif mode == "hami-core":
        split = profile.get("deviceSplitCount")
        text = f"HAMi core, {split} tasks per GPU" if split else "HAMi core"
    elif profile.get("mig"):  # whole GPUs, partitioned by MIG Manager
        mig = profile["mig"]
        layout = f"profile {mig['profile']}" if mig.get("profile") else "a custom layout"
        text = f"MIG {mig['strategy']}, {layout}"
    else:
        text = "whole GPUs, one pod per GPU"
    model = profile.get("gpuModel")
    return f"{text} ({model})" if model else text


def sharing_line(plan: dict[str, Any]) -> str | None:
    """How the GPUs are shared, said every time (one pod per GPU is a choice too); None
    for a program without a GpuCluster."""
    cfg = plan.get("config")
    if not cfg:
        return None
    sharing, dra = cfg.get("sharing"), cfg.get("draDriver")
    parts: list[str] = []
    if dra:
        where = (f"pool{'s' if len(dra['pools']) > 1 else ''} {', '.join(dra['pools'])}"
                 if dra.get("pools") else "every GPU node")
        parts.append(f"ResourceClaims through the DRA driver on {where}")
    if sharing:
        pools, hami = sharing["pools"], cfg["devicePlugin"] == "hami"
        if not (dra and not dra.get("pools")):
            parts.append(f"default: {_profile(sharing['default'], hami)}")
        parts.extend(f"pool {name}: {_profile(p, hami)}" for name, p in pools.items())
        if hami:
            return f"GPU sharing under HAMi (gpuplane:sharing, HAMi's nodeconfig): " \
                   f"{'; '.join(parts)}"
        where = f"gpuplane:sharing, ConfigMap {sharing['configMap']}"
        return f"GPU sharing ({where}): {'; '.join(parts)}"
    if cfg["devicePlugin"] == "hami":
        return "GPU sharing: HAMi (pods request gpumem / gpucores shares of a GPU)"
    if dra:
        return f"GPU sharing: {parts[0]} (gpuplane:draDriver)"
    replicas = cfg["timeSlicing"]["replicas"]
    if replicas >= 2:
        return (f"GPU sharing: time-slicing, {replicas} pods per GPU "
                f"(gpuplane:timeSlicing.replicas; ConfigMap {cfg['timeSlicing']['configMap']}"
                f", profile {cfg['timeSlicing']['profile']})")
    return ("GPU sharing: off, one pod per GPU (gpuplane:timeSlicing.replicas: 0; 2 or "
            "more shares each GPU by time-slicing)")
