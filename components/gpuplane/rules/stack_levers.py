"""What a stack user edits for a finding on containerd files: the `gpuplane:` keys that
make gpuplane write the right thing.

The containerd rules word their fixes in containerd's terms, because they also serve
`gpuplane containerd check`, where the user edits the file itself. Where gpuplane writes
the files (the plan, and the doctor on a gpuplane-managed cluster) the node files are
gpuplane's output, so the fix must name the stack key that changes them: the doctor
appends it, the plan leads with it. One table for both, below both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent


def distro_keys(intent: ClusterIntent) -> str:
    """The stack keys that say where the node's containerd keeps its files."""
    base = (f" and `gpuplane:cluster.containerdBaseDir: {intent.containerd_base_dir}`"
            if intent.containerd_base_dir else "")
    return f"`gpuplane:cluster.distro: {intent.distro}`{base}"


def _fm01(i: ClusterIntent) -> str:
    if i.platform:
        return ("set `gpuplane:runtime.name` to the runtime the node image defines (or "
                "leave it unset), or `gpuplane:cluster.platform` to the image the nodes run.")
    return (f"set {distro_keys(i)} to what the node runs; gpuplane then writes the drop-in "
            "where this containerd reads it and points the toolkit there.")


def _fm07(i: ClusterIntent) -> str:
    driver = i.kubelet_cgroup_driver
    other = "cgroupfs" if driver == "systemd" else "systemd"
    want = "true" if driver == "systemd" else "false"
    return (f"set `gpuplane:runtime.systemdCgroup: {want}` to match the kubelet's {driver} "
            "cgroup driver (as `gpuplane:cluster.kubeletCgroupDriver` says), or, if the "
            f"kubelet uses {other}, `gpuplane:cluster.kubeletCgroupDriver: {other}`; gpuplane "
            "writes SystemdCgroup into every runc-based runtime.")


def _image_toolkit(i: ClusterIntent) -> str:
    """Where the platform's image has the toolkit, the operator's is the second one."""
    from gpuplane.platforms.profiles import TOOLKIT, platform_profile

    if not i.platform or i.toolkit != "operator" \
            or TOOLKIT not in platform_profile(i.platform).preinstalled:
        return ""
    return ("; where the operator's toolkit writes the file, use the image's own "
            "(`gpuplane:gpuOperator.toolkit: host`)")


_HINTS: dict[str, Callable[[ClusterIntent], str]] = {
    "FM01": _fm01,
    "FM02": lambda i: ("set `gpuplane:cluster.containerdVersion` to the node's containerd "
                       f"(now {i.containerd_version}); on < 2.1 gpuplane writes the whole CRI "
                       "table (runc and nvidia) into one drop-in."),
    "FM03": lambda i: ("set `gpuplane:cluster.containerdVersion` to the node's containerd "
                       f"(now {i.containerd_version}) so every file gets that line's config "
                       "version, and pin `gpuplane:gpuOperator.chartVersion` to v24.9.2 or "
                       "later for containerd 2.x (toolkit >= 1.17.4; v24.9.0/v24.9.1 pin "
                       "1.17.0/1.17.3)" + _image_toolkit(i) + "."),
    "FM04": lambda i: (f"set {distro_keys(i)} to what the node runs (on RKE2/K3s also "
                       "`gpuplane:gpuOperator.runtimeSetup`); gpuplane then writes the "
                       "distribution's template or drop-in, never the file it regenerates."),
    "FM05": lambda i: (f"set {distro_keys(i)} (or `gpuplane:cluster.platform`) to what "
                       "manages the node's containerd; gpuplane then writes only where that "
                       "writer leaves the files alone."),
    "FM06": lambda i: ("keep `gpuplane:rollout.canary: true` and a small "
                       "`gpuplane:rollout.maxUnavailable`; gpuplane restarts containerd only "
                       "where the merged config changes."),
    "FM07": lambda i: _fm07(i),
    "FM17": lambda i: (f"set {distro_keys(i)} to what the node runs; gpuplane derives the "
                       "toolkit's CONTAINERD_* env from them (leave toolkit.env out of "
                       "`gpuplane:gpuOperator.values`)."),
    "FM09": lambda i: ("keep `gpuplane:runtime.nvidiaDefault: false` unless nvidia must be the "
                       "default; gpuplane's node agent restores runc as the default when the "
                       "stack is destroyed."),
    "FM27": lambda i: ("set `gpuplane:gpuOperator.nri: false`, or upgrade containerd (1.7.30+, "
                       "2.1, 2.2) and set `gpuplane:cluster.containerdVersion`; where gpuplane "
                       "edits the node's files it writes the NRI drop-in itself."),
    "FM16": lambda i: ("set `gpuplane:gpuOperator.cdi: false`, or upgrade containerd and set "
                       "`gpuplane:cluster.containerdVersion` accordingly."),
}


def stack_lever(finding: Finding, intent: ClusterIntent) -> str | None:
    """The stack keys that fix `finding`, in words; None where its fix names one already,
    where no key fixes it, or for advice (INFO)."""
    if "gpuplane:" in finding.fix or finding.severity is Severity.INFO:
        return None
    hint = _HINTS.get(finding.id)
    return hint(intent) if hint is not None else None


def containerd_stack_hint(finding: Finding, intent: ClusterIntent) -> Finding:
    """The doctor's form: the rule's fix, then the stack key (once)."""
    lever = stack_lever(finding, intent)
    return finding if lever is None else replace(
        finding, fix=f"{finding.fix} With gpuplane: {lever}")


def planned_fix(finding: Finding, intent: ClusterIntent, captured: str | None = None) -> Finding:
    """The plan's form: the stack key first (the node files are gpuplane's plan), then what
    it changes in them; with `captured` (the stack key naming the captured copies the plan
    read), the other way out: change the node and capture it again."""
    lever = stack_lever(finding, intent)
    if lever is None:
        return finding
    fix = f"{lever[0].upper()}{lever[1:]} On the node files that does: {finding.fix}"
    if captured:
        fix += (f" Or change the node's own file and capture it again (`gpuplane nodes "
                f"capture`): the plan read it from the copy {captured} names.")
    return replace(finding, fix=fix)


# A program gpuplane did not make has no `gpuplane:` stack keys: the cluster's facts are
# the pack config's keys (named like the stack's), the rest is the release's own values.
_PACK = "in the pack's config (--policy-pack-config)"
_FOREIGN_KEYS = (
    (re.compile(r"`gpuplane:cluster\.(distro|containerdBaseDir|platform|containerdVersion|"
                r"kubernetesVersion)((?::[^`]*)?)`"), rf"`\1\2` {_PACK}"),
    (re.compile(r"`gpuplane:(?:gpuOperator|hami)\.values: ([^`]*)`"),
     r"the release's values `\1`"),
    (re.compile(r"`gpuplane:(?:gpuOperator|hami)\.values`"), "the release's values"),
    (re.compile(r"`gpuplane:gpuOperator\.chartVersion`"), "the release's chart `version`"),
)
# Rules whose verdict rests on the distribution the pack config names.
_ON_FACTS = ("FM01", "FM04", "FM05", "FM17")


def foreign_fix(finding: Finding) -> Finding:
    """`finding` worded for a program gpuplane did not make (judged with the pack
    config's facts): where its fix names `gpuplane:` stack keys, the release values to
    change (its raw Helm part) lead, then, for the rules that rest on the distribution,
    the pack-config keys that state it; elsewhere the stack keys become those keys."""
    if "gpuplane:" not in finding.fix:
        return finding
    raw_at = re.search(r"raw Helm:? ", finding.fix)
    if raw_at:
        raw = finding.fix[raw_at.end():].rstrip()
        fix = f"Change the release's values, raw Helm {raw}"
        if finding.id in _ON_FACTS and "`gpuplane:cluster.distro: " in finding.fix:
            fix = (f"If the nodes run another distribution than the pack's config says, set "
                   f"`distro` (and `containerdBaseDir`) {_PACK} to what they run; otherwise "
                   + fix[0].lower() + fix[1:])
        return replace(finding, fix=fix if fix.endswith((".", "}")) else fix + ".")
    fix = finding.fix
    for pattern, words in _FOREIGN_KEYS:
        fix = pattern.sub(words, fix)
    return replace(finding, fix=fix)


__all__ = ["containerd_stack_hint", "distro_keys", "foreign_fix", "planned_fix",
           "stack_lever"]
