"""RKE2/K3s with the GPU Operator's toolkit: which of two paths puts the nvidia runtime
into the config their containerd reads, and why (stack key `gpuOperator.runtimeSetup`).

- **detected** (what RKE2's docs recommend, rancher/rke2-docs
  `docs/add-ons/gpu_operators.md`@09157fbd): `toolkit.env` holds only
  `CONTAINERD_SOCKET` (for chart v25.3.x also the two `ACCEPT_NVIDIA_VISIBLE_DEVICES_*`
  entries, with the device plugin's `DEVICE_LIST_STRATEGY=volume-mounts`). The toolkit
  installs its binaries into `/usr/local/nvidia/toolkit`, edits
  `/etc/containerd/...` (which RKE2's containerd never reads) and restarts containerd
  through the socket; at that restart RKE2/K3s render their built-in template again and
  detect the binaries, adding runtimes `nvidia` and `nvidia-cdi`. gpuplane writes no node
  file, so `cluster.nodeAccess: none` is enough.
- **template**: gpuplane writes the whole template over SSH and points the toolkit at it
  (gpuplane.plan.node), for what detection cannot give.

Where the detection looks (k3s-io/k3s; RKE2 runs K3s's agent code):
`pkg/agent/containerd/config_linux.go` prepends `runtimesPath`,
`/usr/local/nvidia/toolkit:/opt/kwasm/bin`, to PATH for the look-up that
`pkg/agent/containerd/runtimes.go`@cd1fadb9 does with `exec.LookPath` (k3s-io/k3s#10761,
in the October 2024 releases v1.28.15, v1.29.10, v1.30.6 and v1.31.2, the version gate of
k3s-io/docs#340; `nvidia-cdi` came with k3s-io/k3s#11065 in the same releases). The
releases between k3s-io/k3s#9311 (early 2024: PATH only) and those did not search the
operator's dir, so `auto` takes the detected path from those releases on only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpuplane.distros.profiles import DistroProfile
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

RuntimeSetup = Literal["auto", "detected", "template"]
KEY = "gpuplane:gpuOperator.runtimeSetup"
# The first release of each Kubernetes minor whose K3s/RKE2 searches the operator's dir
# first and detects nvidia-cdi (k3s-io/docs#340's version gate); every later minor does.
DETECTS_OPERATOR_FROM = {(1, 28): 15, (1, 29): 10, (1, 30): 6, (1, 31): 2}
_FIRST_MINOR_ALWAYS = (1, 32)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


class DetectionRefused(ValueError):
    """`runtimeSetup: detected` where the distribution's detection cannot give what the
    stack asks. The message is the problem alone; the stack key is `KEY`, which the stack
    config attaches as data (gpuplane.config.stack) rather than as text to parse back."""

    key = KEY


@dataclass(frozen=True)
class Choice:
    """The path taken and the reasons, in the words the plan shows."""

    path: Literal["detected", "template"]
    why: tuple[str, ...]


def applies(profile: DistroProfile, options: PlanOptions) -> bool:
    """Whether the choice exists: RKE2/K3s (they detect runtimes) with the operator's toolkit."""
    return profile.detects_nvidia_runtime and options.toolkit is ToolkitMode.OPERATOR


def detects_operator_toolkit(kubernetes_version: str) -> bool:
    """Whether the K3s/RKE2 release of `kubernetes_version` finds the operator's binaries."""
    match = _VERSION.match(kubernetes_version.strip())
    if not match:
        return False
    major, minor, patch = (int(g) for g in match.groups())
    if (major, minor) >= _FIRST_MINOR_ALWAYS:
        return True
    first = DETECTS_OPERATOR_FROM.get((major, minor))
    return first is not None and patch >= first


def unmet(profile: DistroProfile, options: PlanOptions, kubernetes_version: str) -> list[str]:
    """What the stack asks for that RKE2's/K3s's detection does not give, each with the
    stack key that asks for it."""
    out: list[str] = []
    if not detects_operator_toolkit(kubernetes_version):
        gates = ", ".join(f"v{a}.{b}.{p}" for (a, b), p in DETECTS_OPERATOR_FROM.items())
        out.append(f"gpuplane:cluster.kubernetesVersion {kubernetes_version}: this "
                   f"{profile.title} release is not known to search /usr/local/nvidia/toolkit "
                   f"(from {gates} and every 1.32+ release on, k3s-io/k3s#10761)")
    if options.nvidia_default:
        out.append("gpuplane:runtime.nvidiaDefault is true: the detection adds runtimes but "
                   "makes none the default")
    if options.runtime_name != "nvidia":
        out.append(f"gpuplane:runtime.name is {options.runtime_name}: the detection names "
                   "the runtime nvidia")
    if options.systemd_cgroup is not None:
        out.append("gpuplane:runtime.systemdCgroup is set: the detected runtimes copy the "
                   "SystemdCgroup the distribution gives runc")
    return out


def choose(profile: DistroProfile, options: PlanOptions, kubernetes_version: str,
           requested: RuntimeSetup = "auto") -> Choice | None:
    """The path for this stack (None where there is no choice: not RKE2/K3s, or not the
    operator's toolkit). DetectionRefused, with the reasons, for `detected` where the
    detection cannot give what the stack asks."""
    if not applies(profile, options):
        return None
    gaps = unmet(profile, options, kubernetes_version)
    if requested == "template":
        return Choice("template", (f"{KEY} is template: gpuplane writes the whole template "
                                   "and points the toolkit at it",))
    if requested == "detected" and gaps:
        raise DetectionRefused(
            f"detected, but {profile.title}'s own detection cannot give "
            f"what this stack asks: {'; '.join(gaps)}. Change those keys, or set "
            "gpuOperator.runtimeSetup: template (gpuplane writes the whole template, which "
            "needs cluster.nodeAccess: ssh or pod)")
    if gaps:
        return Choice("template", tuple(
            ["the detection cannot give what this stack asks", *gaps]))
    return Choice("detected", (
        f"{profile.title} adds the runtimes nvidia and nvidia-cdi itself once the toolkit "
        "has installed /usr/local/nvidia/toolkit/nvidia-container-runtime; toolkit.env "
        "sets only the containerd socket (RKE2's documented way) and no node file is "
        "written",))


__all__ = ["KEY", "Choice", "RuntimeSetup", "applies", "choose", "detects_operator_toolkit",
           "unmet"]
