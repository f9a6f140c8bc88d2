"""GPU stacks gpuplane did not make: no `gpuplane-intent` ConfigMap, the GPU Operator or
HAMi installed by a plain `helm.v3.Release`, a `helm.v4.Chart` (and the ClusterPolicy it
renders) or a `ClusterPolicy` custom resource, time-slicing ConfigMaps beside them.

The cluster facts come from the pack's config (keys named like the stack keys); a
`platform` also gives what the platform decides (`implied_facts`). Each
rule runs once, through the rulebook's own functions; a finding that depends on a fact
the config does not give is held back, and that fact is named once, as advice, with the
rules it holds back: never judged against a guessed cluster, never silently skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuplane.core.chartsource import chart_name_of, release_version
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent, DevicePlugin, ToolkitWhere
from gpuplane.policy.views import StackFindings, View
from gpuplane.rules.sharing_plain import PlainSharing
from gpuplane.rules.stack_levers import foreign_fix

RELEASE_V3 = "kubernetes:helm.sh/v3:Release"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
CLUSTER_POLICY = ("nvidia.com/v1", "ClusterPolicy")
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
RUNTIMECLASS = "kubernetes:node.k8s.io/v1:RuntimeClass"
# The pack config keys that say which nvidia runtime the nodes have without the operator.
RUNTIME_FACTS = frozenset({"runtimeClass", "nvidiaDefault"})


def _always(config: Mapping[str, Any]) -> bool:
    return True


def _k8s_snap(config: Mapping[str, Any]) -> bool:
    return config.get("distro") == "k8s-snap"


def _rancher(config: Mapping[str, Any]) -> bool:
    return config.get("distro") in ("rke2", "k3s")


_TOOLKIT_PATH = frozenset({"FM01", "FM04", "FM05", "FM15", "FM17"})


@dataclass(frozen=True)
class Fact:
    """A pack config key some findings depend on: without it they are held back."""

    key: str
    rules: str                              # what it decides, for the advice
    depends: Callable[[Finding], bool]      # does this finding rest on the fact?
    chart: str = "gpu-operator"             # the install whose rules need it
    # Whether the cluster the config describes needs the fact at all.
    applies: Callable[[Mapping[str, Any]], bool] = _always

    def missing(self, config: Mapping[str, Any]) -> bool:
        return self.key not in config and self.applies(config)


FACTS = (
    Fact("distro", "FM01/FM05/FM15/FM17 (where the toolkit writes and what containerd "
         "reads on this distribution)",
         lambda f: f.id in _TOOLKIT_PATH),
    # k8s-snap keeps containerd under the base dir k8sd was bootstrapped with (`/`, or
    # B/k8s-containerd beside another containerd): `distro` alone does not say which
    # containerd the kubelet uses, and the toolkit's defaults fit only the first.
    Fact("containerdBaseDir", "FM01/FM05/FM17 (which containerd the kubelet uses on "
         "k8s-snap: its base dir, `/` by default)", lambda f: f.id in _TOOLKIT_PATH,
         applies=_k8s_snap),
    Fact("containerdVersion", "FM03/FM16/FM27 (the toolkit's config version, CDI and NRI "
         "against the nodes' containerd)", lambda f: f.id in {"FM03", "FM16", "FM27"}),
    Fact("driver", "FM08 (the operator's driver against a driver already on the nodes)",
         lambda f: f.id == "FM08"),
    # RKE2/K3s: whether the release's own detection adds the operator's runtimes decides
    # the path a GpuCluster takes (gpuplane.distros.rancher_mode) and with it what
    # toolkit.env must say.
    Fact("kubernetesVersion", "FM04/FM17 (whether RKE2/K3s detect the operator's runtimes "
         "themselves, from their release)", lambda f: f.id in _TOOLKIT_PATH,
         applies=_rancher),
    # Not judged at all without it (check_hami_values(cluster_version_known=False)).
    Fact("kubernetesVersion", "FM13 (HAMi's scheduler image against the cluster's "
         "Kubernetes)", lambda f: False, chart="hami"),
)


@dataclass(frozen=True)
class Install:
    """One installation of a chart: where it is declared, its values and version."""

    chart: str          # gpu-operator | hami
    values: Mapping[str, Any]
    version: str | None
    where: str
    urn: str
    from_chart: bool = True   # False: a ClusterPolicy declared on its own


def installs(views: list[View]) -> list[Install]:
    """The GPU Operator and HAMi, however the program installs them."""
    out = []
    for v in views:
        props = v.props
        if v.type in (RELEASE_V3, CHART_V4):
            chart = props.get("chart")
            name = props.get("name")
            found = chart_name_of(chart, fallback=name if isinstance(name, str) else None) \
                if isinstance(chart, str) and chart else None
            if found in ("gpu-operator", "hami"):
                kind = "Release" if v.type == RELEASE_V3 else "Chart"
                out.append(Install(found, props.get("values") or {}, release_version(props),
                                   f"{kind} {name or v.name}", v.urn))
        elif (props.get("apiVersion"), props.get("kind")) == CLUSTER_POLICY \
                or v.type == f"kubernetes:{CLUSTER_POLICY[0]}:{CLUSTER_POLICY[1]}":
            meta = props.get("metadata") or {}
            out.append(Install("gpu-operator", props.get("spec") or {}, None,
                               f"ClusterPolicy {meta.get('name', v.name)}", v.urn,
                               from_chart=False))
    return out


def _nri(item: Install) -> bool:
    """Whether the GPU Operator `item` runs its NRI plugin (`cdi.nriPluginEnabled` with CDI
    on a chart that has the mode), which deletes the operator's RuntimeClasses."""
    from gpuplane.rules.nri import nri_enabled
    from gpuplane.toolkit.operator import chart_tuple

    return item.chart == "gpu-operator" and nri_enabled(item.values, chart_tuple(item.version))


def runs_nri(views: list[View]) -> bool:
    """Whether the stack's GPU Operator runs its NRI plugin (see `_nri`)."""
    return any(_nri(i) for i in installs(views))


def plain_operator_sharing(views: list[View]) -> PlainSharing | None:
    """What the nodes of the program's own GPU Operator may advertise, for FM24/FM25
    (gpuplane.policy.sharing.plain_sharing_of); a Chart's values before the ClusterPolicy
    it renders."""
    from gpuplane.policy.sharing import plain_sharing_of

    found = sorted((i for i in installs(views) if i.chart == "gpu-operator"),
                   key=lambda i: not i.from_chart)
    return plain_sharing_of(views, [(i.values, i.where, i.version) for i in found])


def implied_facts(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a `platform` fact decides, as the facts it stands for (a fact the config gives
    wins): the distribution (a platform's containerd is the kubeadm layout,
    gpuplane.platforms.profiles.on_platform) and, where the image ships the driver or the
    operator's driver cannot run there, `driver: preinstalled`. The toolkit the image
    ships and the config it writes come with the platform itself (rules.platform)."""
    from gpuplane.platforms.profiles import DRIVER, Platform, platform_profile

    name = config.get("platform")
    if name not in {p.value for p in Platform}:
        return {}
    plat = platform_profile(str(name))
    out: dict[str, Any] = {"distro": "kubeadm"}
    if DRIVER in plat.preinstalled or plat.operator_driver_unsupported:
        out["driver"] = "preinstalled"
    return out


def foreign_intent(config: Mapping[str, Any], found: list[Install],
                   base: ClusterIntent) -> ClusterIntent:
    """`base` (the config's facts) completed from what the stack installs."""
    from gpuplane.rules._shared import flag

    operator = [i for i in found if i.chart == "gpu-operator"]
    plugin: DevicePlugin = config.get("devicePlugin") or (
        "hami" if any(i.chart == "hami" for i in found) else "gpu-operator")
    toolkit: ToolkitWhere = "operator" if operator and flag(
        operator[0].values, "toolkit.enabled", True) else "host"
    nri = base.nri or any(_nri(i) for i in operator)
    out = replace(base, device_plugin=plugin, toolkit=toolkit, nri=nri,
                  driver_preinstalled=config.get("driver", "preinstalled") != "managed")
    return replace(out, runtime_setup=_runtime_setup(out))


def _runtime_setup(intent: ClusterIntent) -> str:
    """RKE2/K3s: the path a GpuCluster of this cluster takes with `runtimeSetup: auto`
    (gpuplane.distros.rancher_mode.choose), so that the toolkit rules judge the release
    as they judge gpuplane's own; elsewhere the intent's."""
    from gpuplane.distros.profiles import profile
    from gpuplane.distros.rancher_mode import choose
    from gpuplane.toolkit.options import PlanOptions, ToolkitMode

    options = PlanOptions(toolkit=ToolkitMode.OPERATOR if intent.toolkit == "operator"
                          else ToolkitMode.HOST, nvidia_default=intent.nvidia_default,
                          runtime_name=intent.runtime_class)
    found = choose(profile(intent.distro, intent.containerd_base_dir), options,
                   intent.kubernetes_version)
    return found.path if found else intent.runtime_setup


def foreign_findings(views: list[View], config: Mapping[str, Any], base: ClusterIntent,
                     out: StackFindings) -> None:
    """Every rule over the GPU installs of a stack gpuplane did not make."""
    found = installs(views)
    config = {**implied_facts(config), **config}
    for f, urn in [*_device_plugin_daemonsets(views, found),
                   *_runtime_classes(views, found, config, base),
                   *_dra_releases(views, base, found, config)]:
        out.add([foreign_fix(f)], urn)   # needs no fact beyond the runtime's
    if not found:
        return
    intent = foreign_intent(config, found, base)
    judged: list[tuple[Finding, str]] = []
    for item in found:
        judged += [(f, item.urn) for f in _judge(item, intent, config)]
    judged += _sharing_configs(views, found)
    from gpuplane.policy.sharing import sharing_findings

    judged += sharing_findings(views, [(i.values, i.where, i.urn) for i in found
                                       if i.chart == "gpu-operator"], None)
    seen: set[tuple[str, str]] = set()
    held: dict[str, list[Finding]] = {}
    for f, urn in judged:
        if (f.id, f.message) in seen:     # a Chart and the ClusterPolicy it renders
            continue
        seen.add((f.id, f.message))
        fact = next((x for x in FACTS if x.missing(config) and x.depends(f)), None)
        if fact is not None:
            held.setdefault(fact.key, []).append(f)
        else:
            out.add([foreign_fix(f)], urn)   # no stack keys in a program not gpuplane's
    charts = {i.chart for i in found}
    said: set[str] = set()
    for fact in FACTS:
        if not fact.missing(config) or fact.chart not in charts or fact.key in said:
            continue
        said.add(fact.key)
        ids = sorted({f.id for f in held.get(fact.key, [])})
        out.add([Finding(
            ids[0] if ids else _first_rule(fact), Severity.WARNING,
            f"not judged: {fact.rules} needs the cluster's `{fact.key}`, which the policy "
            "config does not give"
            + (f"; {len(held[fact.key])} finding(s) of {', '.join(ids)} held back"
               if ids else ""),
            "policy config", f"Set `{fact.key}` in the pack's config (--policy-pack-config; "
            "keys named like the stack keys: distro, containerdVersion, platform, "
            "kubernetesVersion, driver, containerdBaseDir; `gpuplane policy-pack config` "
            "writes them).")], found[0].urn)


def _dra_releases(views: list[View], intent: ClusterIntent, found: list[Install],
                  config: Mapping[str, Any]) -> list[tuple[Finding, str]]:
    """NVIDIA's DRA driver releases: FM15 (their driver root on the platform) and
    FM30-FM36 (gpuplane.rules.dra), beside the GPU Operator the program installs, if any
    (its device plugin, and whether it installs the driver: its driver.enabled, else the
    config's `driver`), and FM34 on that operator."""
    from gpuplane.rules._shared import flag
    from gpuplane.rules.dra import check_dra_release, check_operator_dra
    from gpuplane.rules.dra_facts import DRA_NEWEST
    from gpuplane.rules.pinning import check_chart_version
    from gpuplane.rules.platform import DRA_CHARTS, check_dra_driver_root

    operator = next((i for i in found if i.chart == "gpu-operator" and i.from_chart), None)
    managed = flag(operator.values, "driver.enabled", True) if operator is not None \
        else config.get("driver") == "managed"
    out: list[tuple[Finding, str]] = []
    for v in views:
        chart, name = v.props.get("chart"), v.props.get("name")
        if v.type not in (RELEASE_V3, CHART_V4) or not isinstance(chart, str) or not chart:
            continue
        found_chart = chart_name_of(chart, fallback=name if isinstance(name, str) else None)
        if found_chart not in DRA_CHARTS:
            continue
        kind = "Release" if v.type == RELEASE_V3 else "Chart"
        values = v.props.get("values") or {}
        where = f"{kind} {name or v.name}"
        out += [(f, v.urn) for f in check_dra_driver_root(values, intent, where=where)]
        out += [(f, v.urn) for f in check_chart_version(
            release_version(v.props), chart=found_chart, where=where, stack_key="version",
            example=DRA_NEWEST.removeprefix("v"))]
        judged = check_dra_release(
            values, intent, where=where, driver_managed=managed,
            operator=operator.values if operator is not None else None,
            operator_where=operator.where if operator is not None else "")
        out += [(f, v.urn) for f in _dra_facts_given(judged, config)]
    if operator is not None:
        out += [(f, operator.urn) for f in check_operator_dra(
            operator.values, where=operator.where, dra_release=bool(out) or any(
                v.type in (RELEASE_V3, CHART_V4) and chart_name_of(
                    str(v.props.get("chart") or ""), fallback=str(v.props.get("name") or ""))
                in DRA_CHARTS for v in views))]
    return out


# The facts a DRA rule judges by; without them the pack's defaults would stand in.
_DRA_FACTS = {"FM30": "containerdVersion", "FM33": "kubernetesVersion"}


def _dra_facts_given(judged: list[Finding], config: Mapping[str, Any]) -> list[Finding]:
    """`judged`, with the findings that rest on a fact the config does not give replaced
    by one warning per fact: "not judged", and how to give it."""
    out = [f for f in judged if _DRA_FACTS.get(f.id, "") in ("", *config)]
    for rule, key in _DRA_FACTS.items():
        if key not in config:
            out.append(Finding(
                rule, Severity.WARNING,
                f"not judged: {rule} (the DRA driver against the cluster's {key}) needs "
                f"`{key}`, which the policy config does not give",
                "policy config", f"Set `{key}` in the pack's config (--policy-pack-config; "
                "`gpuplane policy-pack config` writes it)."))
    return out


def _first_rule(fact: Fact) -> str:
    return fact.rules.split(" ", 1)[0].split("/", 1)[0]


def _judge(item: Install, intent: ClusterIntent,
           config: Mapping[str, Any]) -> list[Finding]:
    values = dict(item.values) if isinstance(item.values, Mapping) else {}
    if item.chart == "hami":
        from gpuplane.rules.hami import check_hami_values

        return check_hami_values(values, intent, chart_version=item.version, where=item.where,
                                 cluster_version_known="kubernetesVersion" in config)
    from gpuplane.rules.operator import check_operator_values

    # A ClusterPolicy on its own has no chart: its version is not a fact here.
    return check_operator_values(values, intent, chart_version=item.version,
                                 where=item.where, from_chart=item.from_chart)


def _device_plugin_daemonsets(views: list[View],
                              found: list[Install]) -> list[tuple[Finding, str]]:
    """Device-plugin DaemonSets the stack declares, beside the plugins its installs run."""
    from gpuplane.rules._shared import flag
    from gpuplane.rules.device_plugins import check_device_plugin_daemonsets

    installed = [("the GPU Operator's device plugin" if i.chart == "gpu-operator"
                  else "HAMi's device plugin") + f" ({i.where})"
                 for i in found if flag(i.values, "devicePlugin.enabled", True)]
    daemonsets = [v for v in views if v.type == DAEMONSET]
    by_where = {_daemonset_where(v): v.urn for v in daemonsets}
    found_ = check_device_plugin_daemonsets(
        [(_daemonset_where(v), {**v.props, "kind": "DaemonSet"}) for v in daemonsets],
        installed=installed)
    return [(f, by_where[f.where]) for f in found_]


def _runtime_classes(views: list[View], found: list[Install], config: Mapping[str, Any],
                     base: ClusterIntent) -> list[tuple[Finding, str]]:
    """RuntimeClasses the stack declares, against the runtimes the nodes get
    (gpuplane.rules.device_plugins.node_runtime_handlers): the operator's toolkit's
    (forced: CONTAINERD_RUNTIME_CLASS = operator.runtimeClass, see
    gpuplane.toolkit.operator), else the host's, as the pack config's `runtimeClass` /
    `nvidiaDefault` give them. Without either the nodes' runtimes are not known from the
    stack: nothing is judged, and where the stack installs a GPU stack that is said once,
    as advice."""
    from gpuplane.rules._shared import flag, lookup
    from gpuplane.rules.device_plugins import check_runtime_class_handlers, node_runtime_handlers

    classes = [v for v in views if v.type == RUNTIMECLASS]
    if not classes:
        return []
    toolkit = [i for i in found if i.chart == "gpu-operator"
               and flag(i.values, "toolkit.enabled", True)]
    if toolkit:
        name = str(lookup(toolkit[0].values, "operator.runtimeClass") or "nvidia")
        nri = base.nri or _nri(toolkit[0])
        handlers, source = node_runtime_handlers(
            replace(base, toolkit="operator", runtime_class=name, nri=nri))
        source = f"{source}, {toolkit[0].where}"
    elif RUNTIME_FACTS & set(config):
        handlers, _ = node_runtime_handlers(replace(base, toolkit="host"))
        source = ("the nodes' own toolkit: the runtime the pack config's `runtimeClass` "
                  f"names, {base.runtime_class!r}")
    else:
        if not found:
            return []
        return [(Finding(
            "FM11", Severity.WARNING,
            "not judged: FM11 (RuntimeClass handlers against the nodes' runtimes) needs the "
            "nodes' nvidia runtime, `runtimeClass` (or `nvidiaDefault`), which the policy "
            "config does not give; no GPU Operator toolkit decides it",
            "policy config", "Set `runtimeClass` (the nodes' nvidia runtime, e.g. nvidia) "
            "in the pack's config (--policy-pack-config)."), classes[0].urn)]
    by_where = {_runtime_class_where(v): v.urn for v in classes}
    judged = check_runtime_class_handlers(
        [(_runtime_class_where(v), v.props) for v in classes], handlers, source=source)
    return [(f, by_where[f.where.removesuffix(" handler")]) for f in judged]


def _runtime_class_where(v: View) -> str:
    return f"RuntimeClass {(v.props.get('metadata') or {}).get('name', v.name)}"


def _daemonset_where(v: View) -> str:
    meta = v.props.get("metadata") or {}
    return f"DaemonSet {meta.get('namespace', 'default')}/{meta.get('name', v.name)}"


def _sharing_configs(views: list[View], found: list[Install]) -> list[tuple[Finding, str]]:
    """The time-slicing ConfigMaps the operator's device plugin reads
    (`devicePlugin.config.name`): each profile judged as the rulebook reads one."""
    from gpuplane.rules._shared import lookup
    from gpuplane.rules.timeslicing import check_profile

    names = {str(lookup(i.values, "devicePlugin.config.name") or "")
             for i in found if i.chart == "gpu-operator"} - {""}
    out: list[tuple[Finding, str]] = []
    for v in views:
        meta = v.props.get("metadata") or {}
        if v.type == CONFIGMAP and meta.get("name") in names:
            where = f"ConfigMap {meta.get('namespace', 'default')}/{meta.get('name')}"
            data = v.props.get("data") or {}
            for key in sorted(data, key=str):
                out += [(f, v.urn) for f in check_profile(str(key), data[key], where=where)]
    return out


__all__ = ["CHART_V4", "FACTS", "RELEASE_V3", "Install", "foreign_findings", "foreign_intent",
           "implied_facts", "installs", "plain_operator_sharing"]
