"""FM05 (error): settings the GPU Operator's toolkit takes away from the node.

The toolkit rewrites containerd's config on every node it configures
(gpuplane.toolkit.output). Measured with the real installers, that rewrite can drop what
the node had: on RKE2/K3s/MicroK8s a template the toolkit creates holds only `version` and
`imports`, so the rendered config loses every plugin setting the distribution generated
(the `opt` path, and with a v3 source the `images` table: sandbox image, snapshotter,
registry); on containerd < 2.0 its drop-in is one file's whole CRI table merged last, so
what other drop-ins set in that table (registry `config_path`, mirrors, runc options) is
gone. The rule compares everything containerd would run with after gpuplane's files with
what it runs with after the toolkit, and reports each lost or changed setting other than
the ones the toolkit is there to set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules._shared import finding
from gpuplane.toolkit.output import MODE_RUNTIMES

# What the toolkit sets on purpose: its runtimes, the default runtime, CDI.
_OWN = ("containerd.runtimes.", "containerd.default_runtime_name", "enable_cdi")
_SHOWN = 6


def _leaves(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, Mapping) and data:
        for key, value in data.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


# What the toolkit sets in a runtime the node already had under its name (EKS's and
# AKS's vendor `nvidia` runtimes): the rest of that runtime's table is the node's.
_SET_IN_EXISTING = ("options.BinaryName", "options.Runtime", "container_annotations")


def _toolkits_own(path: str, runtimes: set[str], existing: set[str]) -> bool:
    _, _, rest = path.partition("plugins.")
    for key in ("io.containerd.grpc.v1.cri.", "io.containerd.cri.v1.runtime.", "cri."):
        if rest.startswith(key):
            inner = rest[len(key):]
            if inner.startswith("containerd.runtimes."):
                name, _, setting = inner[len("containerd.runtimes."):].partition(".")
                if name in existing:
                    # A runtime the node had: the toolkit may only set its binary.
                    return setting.startswith(_SET_IN_EXISTING)
                return name in runtimes
            return inner.startswith(_OWN[1:])
    return False


def _runtime_names(merged: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for key in ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "cri"):
        table = merged.get("plugins", {}).get(key)
        runtimes = table.get("containerd", {}).get("runtimes") if isinstance(table, dict) else None
        if isinstance(runtimes, Mapping):
            names |= set(runtimes)
    return names


def _origin(path: str, origins: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The last file (in merge order) whose own data sets the dotted `path`."""
    return next((name for name, data in reversed(origins) if _sets(data, path)), None)


def _sets(node: Any, rest: str) -> bool:
    """Whether `node` has the dotted `rest`; keys may hold dots themselves
    (`io.containerd.grpc.v1.cri`, `docker.io`), so every split is tried."""
    if not rest:
        return True
    if not isinstance(node, Mapping):
        return False
    return any(_sets(value, rest[len(key) + 1:]) for key, value in node.items()
               if rest == key or rest.startswith(f"{key}."))


def check_toolkit_losses(before: Mapping[str, Any], after: Mapping[str, Any], *, where: str,
                         runtime_name: str = "nvidia",
                         origins: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> list[Finding]:
    """FM05 for each setting containerd had after gpuplane's files (`before`, merged) that it
    no longer has, or has with another value, after the toolkit (`after`, merged).
    `origins`: (file, its own data) in merge order, to name the file that set each lost
    setting — typically a drop-in captured from the node (`baselineFiles`)."""
    if not before or not after:
        return []   # a config containerd refuses is reported by the containerd rules
    runtimes = {runtime_name, *MODE_RUNTIMES}
    existing = runtimes & _runtime_names(before)
    now = dict(_leaves(after.get("plugins", {}), "plugins"))
    lost = [(path, value, now.get(path)) for path, value in
            _leaves(before.get("plugins", {}), "plugins")
            if now.get(path) != value and not _toolkits_own(path, runtimes, existing)
            and value != {}]   # an empty table holds no setting (`plugins` of `version = 3`)
    if not lost:
        return []
    def source(path: str) -> str:
        origin = _origin(path, origins)
        return f", set by {origin}" if origin else ""

    shown = "; ".join(f"{p} = {v!r}" + (f" (now {n!r}" if n is not None else " (gone")
                      + source(p) + ")" for p, v, n in lost[:_SHOWN])
    files = sorted({o for p, _, _ in lost if (o := _origin(p, origins))})
    more = f" and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else ""
    return [finding(
        "FM05", f"the toolkit's rewrite drops {len(lost)} setting(s) this node has: "
        f"{shown}{more}.", where,
        "Let gpuplane render `toolkit.env` (do not override CONTAINERD_CONFIG, "
        "RUNTIME_CONFIG_SOURCE or RUNTIME_DROP_IN_CONFIG in `gpuplane:gpuOperator.values`); "
        "on RKE2/K3s/MicroK8s gpuplane then writes the whole template first, which needs "
        "`gpuplane:cluster.nodeAccess: ssh` (or `pod`). On containerd "
        "< 2.0 keep CRI settings in the top-level config (the toolkit's config source)"
        + (f" — move them from {', '.join(files)} into it" if files else "")
        + ", or set `gpuplane:gpuOperator.toolkit: host`.", Severity.ERROR)]


def check_distro_unmanaged(path: str, before: str | None, after: str | None, marker: str,
                           distro: str, *, where: str) -> list[Finding]:
    """FM05: the toolkit rewrites a file the distribution manages only while it starts with
    `marker` (k0s: `# k0s_managed=true`, pkg/component/worker/containerd/component.go
    @v1.35.1+k0s.0 `isK0sManagedConfig`). The rewrite keeps no comments, so the
    distribution stops generating its containerd config from then on."""
    if after is None or before is None or not before.startswith(marker + "\n") \
            or after.startswith(marker + "\n"):
        return []
    return [finding(
        "FM05", f"the toolkit rewrites {path} without its first line `{marker}`: {distro} "
        "then treats it as the user's and stops generating containerd's config — its "
        "drop-ins are no longer merged into the CRI config it writes, and that file, under "
        "/run (tmpfs), is not written again after a reboot while the rewritten file still "
        "imports it.", where,
        "Use `gpuplane:gpuOperator.toolkit: host` (gpuplane writes the nvidia runtime as a "
        f"drop-in {distro} merges), or put `{marker}` back as the first line of {path} "
        "after the toolkit has run.", Severity.ERROR)]


__all__ = ["check_distro_unmanaged", "check_toolkit_losses"]
