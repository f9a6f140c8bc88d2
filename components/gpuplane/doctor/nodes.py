"""One node's inspection → the containerd rules, plus what only a live node shows.

The kubelet's containerd (found by its socket, not by a path guess) is checked with the
same `check_node_config` that `gpuplane containerd check` and the node agent use. The
doctor adds what no rule sees from files alone: which containerd the toolkit was pointed
at when two run on the host (FM17, incident 1), a drop-in the toolkit writes where the
kubelet's containerd never reads (FM01, via the rule's expected files), toolkit binaries
that need a newer glibc than the host has (FM15, incident 2), and what real containerd
says: `config dump` and a CRI sandbox through the nvidia handler.
"""

from __future__ import annotations

import posixpath
import tomllib
from dataclasses import dataclass, field
from typing import Any

from gpuplane.containerd import ConfigError, ContainerdVersion, MemoryFiles, effective_config
from gpuplane.containerd.effective import EffectiveConfig
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import EditMode, profile
from gpuplane.doctor.diagnosis import Diagnosis, Evidence, Symptom, causes
from gpuplane.doctor.fixes import containerd_stack_hint, toolkit_env_fix
from gpuplane.rules.glibc import flavours_for
from gpuplane.rules.messages import GLIBC_MISSING, NO_RUNTIME
from gpuplane.rules.nodecheck import (
    VersionUnknown,
    check_node_config,
    parse_version_output,
    runtime_binaries,
)
from gpuplane.rules.nodefiles import check_node_files

DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SOCKET = "/run/containerd/containerd.sock"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
# Runtime errors that mean "the kubelet's containerd has no such runtime handler".
CRI_DOWN = "unknown service runtime.v1.RuntimeService"


@dataclass(frozen=True)
class ToolkitTarget:
    """Where the operator's toolkit writes and which socket it signals, from toolkit.env
    (the toolkit's own defaults where a variable is unset)."""

    config: str = DEFAULT_CONFIG
    socket: str = DEFAULT_SOCKET
    dropin: str | None = DEFAULT_DROPIN
    source: str = "toolkit defaults"

    @classmethod
    def from_env(cls, env: list[Any] | None, *, dropin: bool, source: str) -> ToolkitTarget:
        named = {str(e.get("name")): str(e.get("value", "")) for e in env or []
                 if isinstance(e, dict)}
        config = named.get("CONTAINERD_CONFIG") or named.get("RUNTIME_CONFIG") or DEFAULT_CONFIG
        socket = named.get("CONTAINERD_SOCKET") or named.get("RUNTIME_SOCKET") or DEFAULT_SOCKET
        target = named.get("RUNTIME_DROP_IN_CONFIG") or DEFAULT_DROPIN
        return cls(config, _sock(socket), target if dropin else None, source)


@dataclass(frozen=True)
class NodeContext:
    """What the cluster says about a node that its inspection cannot."""

    name: str
    intent: ClusterIntent
    runtime_version: str | None = None        # node.status.nodeInfo.containerRuntimeVersion
    toolkit: ToolkitTarget | None = None       # None: no operator toolkit on this node
    # (RuntimeClass, handler) the node's pods use or whose nodeSelector picks the node:
    # each handler is judged as a used runtime, like `containerd check`'s.
    runtime_classes: tuple[tuple[str, str], ...] = ()


@dataclass
class NodeResult:
    diagnoses: list[Diagnosis] = field(default_factory=list)
    symptoms: list[Symptom] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)   # for the report's node table


def analyse_node(inspection: dict[str, Any], ctx: NodeContext) -> NodeResult:
    """Findings, symptoms and notes for one inspected node."""
    out = NodeResult()
    name, intent = ctx.name, ctx.intent
    scope = f"node:{name}"
    for error in inspection.get("errors") or []:
        out.notes.append(f"node {name} inspection: {error}")
    daemons = [d for d in inspection.get("daemons") or [] if isinstance(d, dict)]
    mine = next((d for d in daemons if d.get("pid") == inspection.get("kubelet_daemon")), None)
    if mine is None:
        out.notes.append(f"node {name}: no containerd daemon serving the kubelet was found; "
                         "its containerd config was not checked")
        return out
    files = {str(k): str(v) for k, v in (inspection.get("files") or {}).items()}
    try:
        version = _version(mine, ctx)
    except (VersionUnknown, ValueError) as exc:
        # Outside the merge model: what needs no model (the probe, glibc) is still judged.
        out.notes.append(f"node {name}: {exc}; its containerd config was not checked")
        out.facts = {"containerd": _reported(mine, ctx), "daemons": len(daemons),
                     "kubelet_containerd": {"pid": mine.get("pid"), "config": mine.get("config"),
                                            "socket": mine.get("address")}}
        out.symptoms += _probe_symptoms(inspection, name, intent, ())
        out.symptoms += _glibc_symptoms(inspection, name, _dump_default(inspection), intent)
        return out
    config = str(mine.get("config") or DEFAULT_CONFIG)
    if config not in files:
        out.notes.append(f"node {name}: containerd pid {mine.get('pid')} reads {config}, which "
                         "does not exist: it runs on built-in defaults")
        files[config] = ""
    loaded = {d["pid"]: _reads(d, files, version) for d in daemons}
    others = [d for d in daemons if d is not mine]
    out.facts = {"containerd": str(version), "daemons": len(daemons),
                 "kubelet_containerd": {"pid": mine.get("pid"), "config": config,
                                        "socket": mine.get("address")}}

    target = ctx.toolkit if intent.toolkit == "operator" else None
    fm17 = _wrong_daemon(target, mine, others, loaded, name, intent) if target else None
    expected_runtimes = {"runc"}
    if intent.toolkit != "none" and fm17 is None and not intent.nri:
        # Under the operator's NRI plugin no nvidia runtime exists (FM27 judges NRI instead).
        expected_runtimes.add(intent.runtime_class)
    expected_files: tuple[str, ...] = ()
    if target and fm17 is None and target.dropin and target.dropin not in loaded[mine["pid"]]:
        expected_files = (target.dropin,)
    # With FM17 the toolkit configured the other daemon: that is why handlers are missing,
    # and the RuntimeClasses' handlers are not judged as causes of their own.
    classes = ctx.runtime_classes if fm17 is None else ()
    handlers = {handler for _, handler in classes}
    facts = {"missing_binaries": tuple(
                 (runtime, path) for runtime, path
                 in _missing_binaries(inspection, files, config, version)
                 if runtime in handlers),
             "expected_runtimes": frozenset(expected_runtimes),
             "expected_files": expected_files,
             "kubelet_cgroup_driver": _driver(inspection),
             "cdi_requested": intent.cdi if intent.toolkit != "none" else None,
             "nri_requested": intent.nri,
             "config_key_prefix": f"node {name}"}
    try:
        check = check_node_config(MemoryFiles(files), config, version, facts,
                                  runtime_classes=classes)
    except ConfigError as exc:
        out.notes.append(f"node {name}: containerd's config cannot be read: {exc}")
        return out
    findings = [containerd_stack_hint(f, intent) for f in check.findings]
    findings += _template_edits(target, intent, version, name)
    out.diagnoses = causes(findings, scope)
    if fm17 is not None:
        # The operator's values rule names the same cause when the intent knows the distro;
        # the node's facts then become its evidence, else this finding stands alone.
        finding, evidence = fm17
        out.symptoms.append(Symptom(("FM17",), ("operator", scope), evidence, finding))
    out.facts["effective"] = check.effective.to_dict()

    node_ids = tuple(dict.fromkeys([*(d.finding.id for d in out.diagnoses),
                                    *(["FM17"] if fm17 else [])]))
    dump = _dump_evidence(inspection, check.effective, out.notes, name)
    if dump is not None and node_ids:
        out.symptoms.append(Symptom(node_ids, (scope, "operator"), dump))
    out.symptoms += _probe_symptoms(inspection, name, intent, node_ids)
    out.symptoms += _glibc_symptoms(inspection, name, check.effective.default_runtime, intent)
    return out


# ------------------------------------------------------------------ which containerd

def _missing_binaries(inspection: dict[str, Any], files: dict[str, str], config: str,
                      version: ContainerdVersion) -> tuple[tuple[str, str], ...]:
    """(runtime, BinaryName) for each runtime binary the inspection found absent. The
    inspection holds the config files, not the host's directories, so presence is what
    it recorded for each binary the files name; one it did not look at is not judged.
    The caller keeps the runtimes the node's pods use (its RuntimeClass handlers)."""
    seen = {str(b.get("path")): bool(b.get("present")) for b in inspection.get("binaries") or []
            if isinstance(b, dict)}
    try:
        effective = effective_config(config, MemoryFiles(files), version, missing_ok=True)
    except ConfigError:
        return ()
    return tuple((name, path) for name, path in runtime_binaries(effective)
                 if seen.get(path) is False)


def _version(daemon: dict[str, Any], ctx: NodeContext) -> ContainerdVersion:
    """The daemon's own `--version`, else the node's reported runtime, else the intent."""
    text = daemon.get("version")
    if text:
        return parse_version_output(str(text))
    reported = (ctx.runtime_version or "").removeprefix("containerd://")
    if reported:
        return ContainerdVersion.parse(reported)
    return ContainerdVersion.parse(ctx.intent.containerd_version)


def _reported(daemon: dict[str, Any], ctx: NodeContext) -> str:
    """The version text as found (for the report), when it cannot be modelled."""
    return str(daemon.get("version") or ctx.runtime_version or "unknown")


def _dump_default(inspection: dict[str, Any]) -> str | None:
    """The default runtime real containerd reports, without gpuplane's model."""
    dump = inspection.get("config_dump") or {}
    view = dump_view(str(dump.get("stdout", ""))) if dump.get("ok") else None
    return None if view is None else view["default_runtime"]


def _reads(daemon: dict[str, Any], files: dict[str, str],
           version: ContainerdVersion) -> set[str]:
    """The files a daemon reads (its config and what the imports match)."""
    config = str(daemon.get("config") or DEFAULT_CONFIG)
    if config not in files:
        return set()
    try:
        effective = effective_config(config, MemoryFiles(files), version)
    except ConfigError:
        return {config}
    return {f.path for f in effective.files}


def _sock(path: str) -> str:
    path = posixpath.normpath(path.removeprefix("unix://"))
    return "/run/" + path.removeprefix("/var/run/") if path.startswith("/var/run/") else path


def _wrong_daemon(target: ToolkitTarget, mine: dict[str, Any], others: list[dict[str, Any]],
                  loaded: dict[int, set[str]], node: str,
                  intent: ClusterIntent) -> tuple[Finding, Evidence] | None:
    """FM17: the toolkit's config, drop-in or socket belong to another containerd."""
    reasons = []
    for other in others:
        reads = loaded.get(other["pid"], set())
        label = f"containerd pid {other['pid']} ({other.get('binary')}, socket " \
                f"{other.get('address')})"
        if target.socket == other.get("address"):
            reasons.append(f"CONTAINERD_SOCKET {target.socket} is the socket of {label}")
        for what, path in (("CONTAINERD_CONFIG", target.config),
                           ("RUNTIME_DROP_IN_CONFIG", target.dropin)):
            if path and path in reads and path not in loaded.get(mine["pid"], set()):
                reasons.append(f"{what} {path} is read by {label}")
    if not reasons:
        return None
    kubelet = (f"the kubelet's containerd is pid {mine['pid']} (config {mine.get('config')}, "
               f"socket {mine.get('address')})")
    shown = "; ".join(dict.fromkeys(reasons))
    finding = Finding(
        "FM17", Severity.ERROR,
        f"two containerd daemons run on node {node} and the toolkit ({target.source}) is "
        f"pointed at the other one: {shown}. {kubelet}, which never gets the nvidia runtime: "
        "GPU pods fail with `no runtime for \"nvidia\" is configured` while the other daemon "
        "looks healthy.",
        f"node {node}: {target.source}",
        toolkit_env_fix(intent, mine, _dropin_dir(mine, loaded)),
    )
    return finding, Evidence(f"node {node}: containerd daemons", f"{shown}; {kubelet}")


def _dropin_dir(daemon: dict[str, Any], loaded: dict[int, set[str]]) -> str:
    config = str(daemon.get("config") or DEFAULT_CONFIG)
    reads = sorted(p for p in loaded.get(daemon["pid"], set()) if p != config)
    if reads:
        return posixpath.dirname(reads[0])
    return posixpath.join(posixpath.dirname(config), "conf.d")


def _template_edits(target: ToolkitTarget | None, intent: ClusterIntent,
                    version: ContainerdVersion, node: str) -> list[Finding]:
    """FM04 (the rule): the toolkit edits the generated file of a template distro."""
    if target is None:
        return []
    try:
        prof = profile(intent.distro, intent.containerd_base_dir)
    except ValueError:
        return []
    if prof.edit_mode is not EditMode.TEMPLATE:
        return []
    return check_node_files(prof, [target.config], where=f"node {node}: {target.source}",
                            version=version)


def _driver(inspection: dict[str, Any]) -> str | None:
    kubelet = inspection.get("kubelet") or {}
    driver = kubelet.get("cgroup_driver") if isinstance(kubelet, dict) else None
    return driver if driver in ("systemd", "cgroupfs") else None


# ------------------------------------------------------------------ what real containerd says

def dump_view(text: str) -> dict[str, Any] | None:
    """Default runtime and runtime names from `containerd config dump` output."""
    try:
        plugins = tomllib.loads(text).get("plugins", {})
    except tomllib.TOMLDecodeError:
        return None
    for key in ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"):
        table = plugins.get(key)
        if isinstance(table, dict):
            ctd = table.get("containerd") or {}
            return {"default_runtime": ctd.get("default_runtime_name"),
                    "runtimes": sorted((ctd.get("runtimes") or {}).keys())}
    return None


def _dump_evidence(inspection: dict[str, Any], effective: EffectiveConfig, notes: list[str],
                   node: str) -> Evidence | None:
    dump = inspection.get("config_dump") or {}
    if not dump.get("ok"):
        return None
    view = dump_view(str(dump.get("stdout", "")))
    if view is None:
        return None
    model = {"default_runtime": effective.default_runtime,
             "runtimes": sorted(effective.runtimes)}
    if view != model:
        notes.append(f"node {node}: containerd config dump ({view}) differs from gpuplane's "
                     f"model of the same files ({model}); the dump is what runs")
    missing = "" if view["default_runtime"] in view["runtimes"] else " (not defined)"
    return Evidence(f"node {node}: containerd config dump (pid {dump.get('pid')})",
                    f"default runtime {view['default_runtime']}{missing}; runtimes "
                    f"{', '.join(view['runtimes']) or 'none'}")


def _probe_symptoms(inspection: dict[str, Any], node: str, intent: ClusterIntent,
                    node_ids: tuple[str, ...]) -> list[Symptom]:
    probe = inspection.get("cri_probe") or {}
    status = probe.get("status")
    source = f"node {node}: CRI probe ({probe.get('method', 'n/a')}, handler " \
             f"{probe.get('handler', intent.runtime_class)})"
    scopes = (f"node:{node}", "operator")
    if status == "ok":
        works = Evidence(source, f"a pod sandbox started through the {probe.get('handler')} "
                                 "handler: the runtime itself works on this node")
        # Then a GPU pod without the GPU lacks the runtime class, not the runtime (FM11).
        out = [Symptom(("FM11",), ("cluster",), works)]
        if node_ids:
            out.append(Symptom(node_ids, scopes[:1], works))
        return out
    if status != "failed":
        return []
    error = str(probe.get("error", ""))
    evidence = Evidence(source, f"RunPodSandbox failed: {error}")
    if NO_RUNTIME.search(error):
        fallback = Finding(
            "FM01", Severity.ERROR,
            f"the kubelet's containerd on node {node} has no {intent.runtime_class} runtime: "
            f"{error}",
            f"node {node}", _missing_runtime_fix(intent))
        return [Symptom(("FM17", "FM01", "FM02", "FM03", "FM04"), scopes, evidence,
                        fallback)]
    if CRI_DOWN in error:
        return [Symptom(("FM02", "FM03", "FM09", "FM01"), scopes, evidence, serious=True)]
    if GLIBC_MISSING.search(error):
        return [Symptom(("FM15",), ("operator", scopes[0]), evidence, serious=True)]
    return [Symptom(node_ids or ("FM01",), scopes, evidence, serious=True)]


def _missing_runtime_fix(intent: ClusterIntent) -> str:
    return (f"Set `gpuplane:cluster.distro` (now {intent.distro}) and, on k8s-snap, "
            "`gpuplane:cluster.containerdBaseDir` to what the node runs, so the toolkit is "
            "pointed at the kubelet's containerd; without gpuplane set the operator's "
            "toolkit.env CONTAINERD_CONFIG, CONTAINERD_SOCKET and RUNTIME_DROP_IN_CONFIG to "
            "that containerd's config, socket and drop-in directory (`gpuplane containerd "
            "check` on the node shows which files it reads).")


def _glibc_symptoms(inspection: dict[str, Any], node: str, default_runtime: str | None,
                    intent: ClusterIntent) -> list[Symptom]:
    """FM15: toolkit binaries on the host that need a newer glibc than the host has."""
    glibc = (inspection.get("glibc") or {}).get("version")
    host = _vtuple(glibc)
    if host is None:
        return []
    osr = inspection.get("os_release") or {}
    os_name = osr.get("PRETTY_NAME") or osr.get("ID") or "the host OS"
    out = []
    for binary in inspection.get("binaries") or []:
        need = _vtuple(binary.get("glibc_required"))
        if not binary.get("present") or need is None or need <= host:
            continue
        path = binary.get("path")
        default = default_runtime == intent.runtime_class
        reach = ("nvidia is containerd's default runtime, so every pod on the node fails"
                 if default else "every container started through the nvidia runtime fails")
        evidence = Evidence(f"node {node}: {path}",
                            f"needs GLIBC_{binary['glibc_required']}; the host ({os_name}) "
                            f"has glibc {glibc}")
        fits = ", ".join(flavours_for(host)) or "none published"
        fallback = Finding(
            "FM15", Severity.ERROR,
            f"{path} on node {node} needs GLIBC_{binary['glibc_required']} but {os_name} has "
            f"glibc {glibc}: `GLIBC_{binary['glibc_required']} not found`, and {reach}.",
            f"node {node}: {path}",
            f"Set `gpuplane:nodes[].os` of this node to its OS (e.g. {_os_key(osr)}) so "
            f"gpuplane picks a toolkit flavour built for glibc <= {glibc} ({fits}), or set "
            "`gpuplane:gpuOperator.toolkitImage.tag` to such a flavour, or "
            "`gpuplane:gpuOperator.toolkit: host`; without gpuplane set the Helm value "
            "toolkit.version to a tag of that flavour, or toolkit.enabled=false and install "
            "nvidia-container-toolkit from the OS packages.")
        out.append(Symptom(("FM15",), ("operator", f"node:{node}"), evidence, fallback))
    return out


def _os_key(osr: dict[str, str]) -> str:
    version = osr.get("VERSION_ID", "")
    return f"{osr.get('ID', 'os')}{version}" if version else osr.get("ID", "its OS")


def _vtuple(text: Any) -> tuple[int, int] | None:
    if not isinstance(text, str):
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


__all__ = ["NodeContext", "NodeResult", "ToolkitTarget", "analyse_node", "dump_view"]

