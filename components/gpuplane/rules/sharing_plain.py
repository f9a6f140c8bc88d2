"""FM24 and FM25 for a GPU Operator that a program installs itself (a plain Helm release,
a `helm.v4.Chart` or a `ClusterPolicy`), where no stack says what each node pool shares.

gpuplane's own stacks know each node and its pool (`gpuplane.rules.sharing`). A plain
program tells less: the device plugin's profiles (the ConfigMap keys, when the ConfigMap
is in the program), the default key, the operator's `mig.strategy`, MIG Manager's default
and the `nvidia.com/device-plugin.config` / `nvidia.com/mig.config` labels the program
sets. So the nodes are judged as groups: one per profile a node may run (a node labelled
with a key runs that key; an unlabelled node the default) and per MIG layout it may carry.
A pod reaches the groups its nodeSelector and required node affinity allow. It is an
error when every group that can take the pod refuses it, a warning (naming the refusing
profiles) when only some do, and nothing when the program does not say (a ConfigMap
named but not declared, a MIG layout of a custom mig-parted config).

Facts (NVIDIA/k8s-device-plugin at v0.18.0, NVIDIA/gpu-operator at v25.10.1):
- the plugin fails an allocation of more than one shared (replica) device: under MPS
  always, under time-slicing with `failRequestsGreaterThanOne` (internal/rm/rm.go,
  ValidateRequest); the scheduler does not know this, so a pod that
  fits a refusing node by count is placed there and fails (UnexpectedAdmissionError);
- `renameByDefault` advertises a shared resource as `<name>.shared`; a resource's own
  `rename` and `devices` are ignored (api/config/v1/replicas.go, disableResoureRenaming);
- the config-manager gives a node the key its label names, else `DEFAULT_CONFIG`
  (`devicePlugin.config.default`); the operator sets `FALLBACK_STRATEGIES=empty`, so a
  node with neither runs the plugin's defaults: no sharing, the operator's strategy
  (cmd/config-manager/main.go; gpu-operator controllers/object_controls.go,
  transformConfigManager*Container);
- MIG Manager applies the layout a node's `nvidia.com/mig.config` label names; the
  operator labels an unlabelled MIG-capable node only when `migManager.config.default` is
  `all-disabled` (controllers/state_manager.go), so another default partitions nothing.
  A node without a MIG-capable GPU has no label and advertises whole GPUs;
- under the mixed strategy a MIG-enabled GPU is advertised only as
  `nvidia.com/mig-<profile>` (internal/rm/rm.go). Where some nodes still advertise
  `nvidia.com/gpu` the scheduler places the pod there, so FM25 is an error only when
  none the pod can reach does, and says nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.sharing import GPU_RESOURCE, MIG_CONFIG_LABEL, MIG_PREFIX, PLUGIN_CONFIG_LABEL
from gpuplane.rules._shared import at, finding, items, mapping
from gpuplane.rules.node_affinity import operator_matches

MigState = Literal["whole", "mig", "unknown"]
OTHER = "\0other"      # a label value the program does not name (set outside it)
DISABLED = "all-disabled"


@dataclass(frozen=True)
class Profile:
    """One device plugin config a node may run: `key` in the ConfigMap ("": the plugin's
    defaults), the label value that selects it (None: the nodes without the label)."""

    key: str
    label: str | None
    strategy: str                                 # the effective MIG strategy
    mps: bool = False
    fail_over_one: bool = False                   # failRequestsGreaterThanOne in effect
    shared: tuple[tuple[str, int], ...] = ()      # advertised name -> replicas
    renamed: tuple[str, ...] = ()                 # names advertised only as <name>.shared

    def refuses(self, resource: str) -> bool:
        """Whether the plugin fails a request for more than one `resource` here."""
        return self.fail_over_one and dict(self.shared).get(resource, 0) > 1


@dataclass(frozen=True)
class MigGroup:
    """Nodes by their `nvidia.com/mig.config` label (None: none; OTHER: a value the
    program does not name) and what their GPUs are then."""

    label: str | None
    state: MigState


@dataclass(frozen=True)
class PlainSharing:
    """What a plain operator install's nodes may run: its profiles (None: the ConfigMap is
    not in the program, nothing about sharing is known) and MIG groups."""

    where: str
    profiles: tuple[Profile, ...] | None
    mig: tuple[MigGroup, ...]
    # layout name -> whether it enables MIG on every GPU; None: not known (MIG Manager
    # off, or a custom mig-parted config the program does not show)
    layouts: tuple[tuple[str, bool], ...] | None = None
    # The GPU nodes' own (nvidia.com/device-plugin.config, nvidia.com/mig.config) label
    # values, where they are known (the doctor on a live cluster); None: the groups above.
    nodes: tuple[tuple[str | None, str | None], ...] | None = None

    def state(self, label: str) -> MigState:
        """What the GPUs of a node labelled `nvidia.com/mig.config=<label>` are."""
        known = dict(self.layouts) if self.layouts is not None else {}
        if label not in known:
            return "unknown"
        return "mig" if known[label] else "whole"


def profile_of(key: str, doc: Mapping[str, Any], label: str | None,
               operator_strategy: str) -> Profile:
    """A ConfigMap key's parsed YAML as the plugin applies it."""
    strategy = str(mapping(doc.get("flags")).get("migStrategy") or operator_strategy)
    sharing = mapping(doc.get("sharing"))
    mps = isinstance(sharing.get("mps"), Mapping)
    section = mapping(sharing.get("mps") if mps else sharing.get("timeSlicing"))
    rename = section.get("renameByDefault") is True
    shared, renamed = [], []
    for r in items(section.get("resources")):
        name, replicas = mapping(r).get("name"), mapping(r).get("replicas")
        if not isinstance(name, str) or not isinstance(replicas, int):
            continue
        shared.append((f"{name}.shared" if rename else name, replicas))
        if rename:
            renamed.append(name)
    fail = mps or section.get("failRequestsGreaterThanOne") is True
    return Profile(key, label, strategy, mps, fail, tuple(shared), tuple(renamed))


def plain_sharing(values: Mapping[str, Any], data: Mapping[str, Mapping[str, Any]] | None,
                  mig_labels: Iterable[str], *, where: str,
                  named_layouts: Mapping[str, bool] | None,
                  nodes: Iterable[tuple[str | None, str | None]] | None = None
                  ) -> PlainSharing:
    """The groups of one operator install: `values` (the chart's, or a ClusterPolicy's
    spec), `data` the plugin ConfigMap's parsed keys (None: not in the program; {}: no
    ConfigMap named), `mig_labels` the `nvidia.com/mig.config` values the program sets,
    `named_layouts` layout name -> whether it enables MIG on every GPU (the chart's
    default mig-parted config; None: a custom config the program does not show), `nodes`
    the live GPU nodes' two label values (then only those nodes are judged)."""
    from gpuplane.rules._shared import flag, lookup

    strategy = str(lookup(values, "mig.strategy") or "single")
    profiles: tuple[Profile, ...] | None = None
    if data is not None:
        default = str(lookup(values, "devicePlugin.config.default") or "")
        found = [profile_of(k, d, k, strategy) for k, d in sorted(data.items())]
        if not data:
            found.append(Profile("", None, strategy))
        elif default in data:
            found.append(profile_of(default, data[default], None, strategy))
        elif not default:
            found.append(Profile("", None, strategy))
        profiles = tuple(found)
    manager = flag(values, "migManager.enabled", True)
    mig_default = str(lookup(values, "migManager.config.default") or DISABLED)
    layouts = tuple(sorted(named_layouts.items())) if manager and named_layouts is not None \
        else None
    known = PlainSharing(where, profiles, (), layouts)
    labels = sorted(set(mig_labels) | ({DISABLED} if manager else set()))
    groups = [MigGroup(m, known.state(m)) for m in labels]
    # Unlabelled: GPUs without MIG; MIG-capable ones too where MIG Manager would not label
    # them all-disabled (their MIG mode then is as found).
    unlabelled: MigState = "whole" if manager and mig_default == DISABLED else "unknown"
    groups += [MigGroup(None, unlabelled), MigGroup(OTHER, "unknown")]
    return PlainSharing(where, profiles, tuple(groups), layouts,
                        None if nodes is None else tuple(sorted(set(nodes), key=str)))


def chart_layouts(values: Mapping[str, Any], chart: str | None) -> dict[str, bool] | None:
    """The named layouts of the mig-parted config MIG Manager reads, each with whether it
    enables MIG on every GPU: the chart's default config at its tag; None for a custom
    ConfigMap (`migManager.config.name`). The operator's own default ConfigMap (the name
    chart v24.3.0 sets: deployments/gpu-operator/values.yaml and
    controllers/object_controls.go MigPartedDefaultConfigMapName@v24.3.0) is the chart's."""
    from gpuplane.core.mig import named_configs
    from gpuplane.rules._shared import lookup

    if str(lookup(values, "migManager.config.name") or "") not in (
            "", "default-mig-parted-config"):
        return None
    return {name: all(row[1] for row in rows) for name, rows in named_configs(chart).items()}


# ---------------------------------------------------------------- reachability

def _match(expr: Mapping[str, Any], value: str | None) -> bool:
    """One matchExpression on a label the groups know; OTHER may be any other value."""
    return operator_matches(expr.get("operator"), value,
                            [str(v) for v in items(expr.get("values"))], unknown=OTHER)


def _reaches(spec: Mapping[str, Any], plugin: str | None, mig: str | None) -> bool:
    """Whether a node of these two label values may take the pod (nodeSelector and
    required node affinity; expressions on other labels do not narrow)."""
    labels = {PLUGIN_CONFIG_LABEL: plugin, MIG_CONFIG_LABEL: mig}
    for key, want in mapping(spec.get("nodeSelector")).items():
        if key in labels and (labels[key] is None or
                              (labels[key] != str(want) and labels[key] != OTHER)):
            return False
    required = mapping(mapping(mapping(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [mapping(t) for t in items(required.get("nodeSelectorTerms"))]
    if not terms:
        return True
    return any(all(_match(mapping(e), labels[str(mapping(e).get("key"))])
                   for e in items(t.get("matchExpressions"))
                   if mapping(e).get("key") in labels) for t in terms)


def _named(spec: Mapping[str, Any]) -> set[str]:
    """The `nvidia.com/mig.config` values the pod itself names."""
    out = {str(v) for k, v in mapping(spec.get("nodeSelector")).items() if k == MIG_CONFIG_LABEL}
    required = mapping(mapping(mapping(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for t in items(required.get("nodeSelectorTerms")):
        for e in items(mapping(t).get("matchExpressions")):
            if mapping(e).get("key") == MIG_CONFIG_LABEL and mapping(e).get("operator") == "In":
                out |= {str(v) for v in items(mapping(e).get("values"))}
    return out


# ---------------------------------------------------------------- the rules

def _groups(plain: PlainSharing, spec: Mapping[str, Any]) -> list[tuple[Profile, MigGroup]]:
    """(profile, MIG group) pairs a node may be: the live nodes' own, else every profile
    with every MIG group (the program's labels, the pod's own, the unlabelled nodes and
    labels set outside the program)."""
    profiles = plain.profiles or ()
    if plain.nodes is not None:
        by_label = {p.label: p for p in profiles}
        unlabelled: MigState = next((g.state for g in plain.mig if g.label is None),
                                    "unknown")
        # A node whose label names no key runs no plugin (FM23): it takes no pod.
        return [(by_label[k], MigGroup(m, plain.state(m) if m is not None else unlabelled))
                for k, m in plain.nodes if k in by_label]
    named = _named(spec)
    extra = [MigGroup(m, plain.state(m)) for m in sorted(named)
             if m not in {g.label for g in plain.mig}]
    mig = [g for g in (*plain.mig, *extra) if g.label != OTHER or not named]
    return [(p, g) for p in profiles for g in mig]


def _offers(p: Profile, g: MigGroup, resource: str) -> bool | None:
    """Whether nodes of profile `p` and MIG group `g` advertise `resource` (None: not
    known)."""
    if resource in p.renamed:
        return False
    if resource.endswith(".shared") and resource not in dict(p.shared):
        return False
    base = resource.removesuffix(".shared")
    if base == GPU_RESOURCE:
        if p.strategy == "mixed" and g.state != "whole":
            return None if g.state == "unknown" else False
        return True
    if base.startswith(MIG_PREFIX):
        if p.strategy != "mixed" or g.state == "whole":
            return False
        return None
    return None


Amounts = Iterable[tuple[str, Mapping[str, float]]]


def check_plain_workload_sharing(spec: Mapping[str, Any], containers: Amounts,
                                 plain: PlainSharing, where: str) -> list[Finding]:
    """FM24 and FM25 for one pod spec against a plain install's groups."""
    if plain.profiles is None:      # the ConfigMap is not in the program: not known
        return []
    groups = [(p, g) for p, g in _groups(plain, spec) if _reaches(spec, p.label, g.label)]
    out: list[Finding] = []
    for path, amounts in containers:
        for name, amount in sorted(amounts.items()):
            if amount <= 0 or not name.startswith("nvidia.com/"):
                continue
            here = at(where, f"{path}.resources")
            out += _fm25(groups, name, here, plain) + _fm24(groups, name, amount, here, plain)
    return out


def _fm25(groups: list[tuple[Profile, MigGroup]], name: str, here: str,
          plain: PlainSharing) -> list[Finding]:
    if not groups or name != GPU_RESOURCE or any(
            p.strategy != "mixed" or g.state != "mig" for p, g in groups):
        return []
    layouts = sorted({str(g.label) for _, g in groups})
    return [finding(
        "FM25", f"the pod asks for {name}, but every node it can run on carries "
                f"{MIG_CONFIG_LABEL}={' or '.join(layouts)} under the mixed MIG strategy "
                f"({plain.where}): those nodes advertise only nvidia.com/mig-<profile>, "
                "so it stays Pending.", here,
        "Ask for the MIG instance (e.g. nvidia.com/mig-1g.10gb: 1), select nodes with "
        f"whole GPUs ({MIG_CONFIG_LABEL}=all-disabled), or use mig.strategy: single.")]


def _fm24(groups: list[tuple[Profile, MigGroup]], name: str, amount: float, here: str,
          plain: PlainSharing) -> list[Finding]:
    if amount <= 1:
        return []
    offering = [(p, g) for p, g in groups if _offers(p, g, name) is not False]
    refusing = sorted({_key_words(p) for p, g in offering if p.refuses(name)})
    if not refusing:
        return []
    why = ("MPS" if all(p.mps for p, _ in offering if p.refuses(name))
           else "time-slicing with failRequestsGreaterThanOne (or MPS)")
    keys = ", ".join(refusing)
    if all(p.refuses(name) for p, _ in offering):
        return [finding(
            "FM24", f"the pod asks for {amount:g} {name} where every node it can run on "
                    f"shares it with {why} ({plain.where}, device plugin profile {keys}): "
                    "the plugin fails the allocation (UnexpectedAdmissionError) and the pod "
                    "never starts.", here,
            f"Ask for 1 {name} per container; or give its nodes a profile of whole GPUs "
            f"and select it (nodeSelector {PLUGIN_CONFIG_LABEL}=<key>); for "
            "time-slicing, failRequestsGreaterThanOne: false lets it through (the replicas "
            "may share one GPU).")]
    return [finding(
        "FM24", f"the pod asks for {amount:g} {name}; nodes running device plugin profile "
                f"{keys} ({plain.where}) share it with {why} and fail that allocation, "
                "while others take it: the scheduler does not tell them apart, so the pod "
                "starts or fails (UnexpectedAdmissionError) by where it lands.", here,
        f"Pin the pod to a profile that takes it (nodeSelector {PLUGIN_CONFIG_LABEL}="
        "<key>, or a NotIn node affinity on the refusing keys), or ask for 1 "
        f"{name} per container.", severity=Severity.WARNING)]


def _key_words(p: Profile) -> str:
    if p.label is None:
        return f"{p.key!r} (the default: nodes without {PLUGIN_CONFIG_LABEL})"
    return f"{p.key!r} ({PLUGIN_CONFIG_LABEL}={p.label})"


__all__ = ["DISABLED", "OTHER", "MigGroup", "PlainSharing", "Profile", "chart_layouts",
           "check_plain_workload_sharing", "plain_sharing", "profile_of"]
