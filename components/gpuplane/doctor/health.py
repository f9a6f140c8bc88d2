"""The live state of the GPU components: operator DaemonSets, HAMi's scheduler, device
plugin and webhook, RuntimeClasses, node readiness and advertised GPUs.

Live objects can differ from the Helm values the rules read (an edited webhook, a stale
DaemonSet, a plugin that never re-read its ConfigMap), so each observation is a symptom
pointing at the rule ids that explain it; its fallback finding speaks when no rule did.
"""

from __future__ import annotations

from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.doctor.cluster import (
    HAMI,
    ClusterView,
    gpu_count,
    labels,
    name,
    namespace,
    ref,
    requests_of,
)
from gpuplane.doctor.diagnosis import Diagnosis, Evidence, Symptom
from gpuplane.doctor.sharing import mig_manager_symptom, pool_counts
from gpuplane.doctor.symptoms import classify, event_evidence, glibc_fallback, runtimeclass_fix
from gpuplane.rules._shared import lookup, quantity, version_tuple
from gpuplane.rules.advertised import expected_resources, mig_manager_state
from gpuplane.rules.events import NODE_DOWN_IDS
from gpuplane.rules.messages import GLIBC_MISSING as GLIBC
from gpuplane.rules.workloads import GPU, GPUMEM, pod_spec_of

FAILING = ("RunContainerError", "CrashLoopBackOff", "CreateContainerError", "Error",
           "CreateContainerConfigError", "ImagePullBackOff", "ErrImagePull")
# What a failing toolkit container can be caused by, most likely first.
_TOOLKIT_IDS = ("FM17", "FM01", "FM04", "FM03", "FM02", "FM15")


def runtimeclass(view: ClusterView, intent: ClusterIntent) -> list[Diagnosis]:
    """FM11: the RuntimeClass GPU pods need is missing."""
    rc = intent.runtime_class
    if view.runtimeclass(rc) is not None or intent.toolkit == "none":
        return []
    users = [p for p in view.gpu_pods if (p.get("spec") or {}).get("runtimeClassName") == rc]
    if not users and (intent.nvidia_default or intent.cdi):
        return []
    names = ", ".join(r for r in sorted(name(r) for r in view.snap.runtimeclasses)) or "none"
    reach = (f"{len(users)} GPU pod(s) ask for it and cannot be created" if users else
             "GPU pods cannot ask for the nvidia runtime, and without it (runc is the "
             "default) they start but see no GPU")
    finding = Finding(
        "FM11", Severity.ERROR,
        f"RuntimeClass {rc!r} does not exist (RuntimeClasses: {names}): {reach}.",
        f"RuntimeClass {rc}", runtimeclass_fix(rc))
    return [Diagnosis(finding, "cluster")]


def operator_health(view: ClusterView, intent: ClusterIntent) -> tuple[list[Symptom], list[str]]:
    """Operator DaemonSets that are not ready, and why their pods say they are not; the
    operator's pods whose DaemonSet was not collected speak for themselves."""
    symptoms: list[Symptom] = []
    notes: list[str] = []
    if (unseen := view.missing("daemonsets")) is not None:
        notes.append(f"not checked: {unseen}: the GPU Operator's DaemonSets")
    for ds in view.daemonsets_in(view.operator_namespace()):
        status = ds.get("status") or {}
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        if ready >= desired:
            continue
        explained = False
        for pod in view.pods_of(ds):
            found = _component_pod(view, intent, pod, "toolkit" in name(ds))
            symptoms += found
            explained = explained or bool(found)
        if not explained:
            notes.append(f"{ref(ds, 'DaemonSet')}: {ready}/{desired} pods ready")
    for pod in view.component_pods:
        if HAMI.search(name(pod)) or view.covered(pod):
            continue
        symptoms += _component_pod(view, intent, pod, "toolkit" in name(pod))
    return symptoms, notes


def _component_pod(view: ClusterView, intent: ClusterIntent, pod: dict[str, Any],
                   toolkit: bool) -> list[Symptom]:
    """What one failing operator pod says: its warning events, container states, logs."""
    out: list[Symptom] = []
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    scopes = ("operator", f"node:{node}")
    for event in view.events_for(pod, "Pod"):
        if event.get("type") != "Warning":
            continue
        found = classify(event, view, intent, f"pod:{namespace(pod)}/{name(pod)}", node)
        if found is None and toolkit:
            found = Symptom(_TOOLKIT_IDS, scopes, event_evidence(event), serious=True)
        if found is not None:
            out.append(found)
    for text, source in _pod_trouble(view, pod, events=False):
        evidence = Evidence(source, text)
        if GLIBC.search(text):
            out.append(Symptom(("FM15",), scopes, evidence, glibc_fallback(node, text)))
        elif toolkit:
            out.append(Symptom(_TOOLKIT_IDS, scopes, evidence, serious=True))
    return out


def _pod_trouble(view: ClusterView, pod: dict[str, Any],
                 events: bool = True) -> list[tuple[str, str]]:
    """(what, where) for each failing container state, warning event and log tail."""
    out = []
    status = pod.get("status") or {}
    for cs in [*(status.get("initContainerStatuses") or []),
               *(status.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if waiting.get("reason") in FAILING:
            out.append((f"{waiting.get('reason')}: {waiting.get('message', '')}".strip(),
                        f"{ref(pod, 'Pod')} container {cs.get('name')}"))
        elif terminated and terminated.get("exitCode"):
            out.append((f"exit {terminated.get('exitCode')}: {terminated.get('message', '')}"
                        .strip(), f"{ref(pod, 'Pod')} container {cs.get('name')}"))
    for event in view.events_for(pod, "Pod") if events else []:
        if event.get("type") == "Warning":
            evidence = event_evidence(event)
            out.append((evidence.detail, evidence.source))
    for entry in view.logs_of(pod):
        lines = [line for line in str(entry.get("text", "")).splitlines() if line.strip()]
        if lines:
            key = next((line for line in lines if GLIBC.search(line)), lines[-1])
            out.append((key.strip(), f"log {ref(pod, 'Pod')} container "
                                     f"{entry.get('container')}"))
    return out


def node_readiness(view: ClusterView) -> list[Symptom]:
    """GPU nodes that are NotReady: evidence for whatever broke their runtime."""
    out = []
    for node in view.gpu_nodes():
        for cond in (node.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") != "True":
                evidence = Evidence(f"Node {name(node)}: Ready={cond.get('status')}",
                                    f"{cond.get('reason', '')}: {cond.get('message', '')}")
                out.append(Symptom(NODE_DOWN_IDS, (f"node:{name(node)}", "operator"), evidence,
                                   serious=True))
    return out


def allocatable(view: ClusterView, intent: ClusterIntent, hami_values: dict[str, Any] | None,
                notes: list[str] | None = None) -> list[Symptom]:
    """What each GPU node advertises against what the stack expects, per resource name
    (`gpuplane.rules.advertised.expected_resources`); a node MIG Manager is still
    reconfiguring, or failed to, is reported as that and not judged by its counts."""
    out = []
    notes = [] if notes is None else notes
    nodes = {n.name: n for n in intent.gpu_nodes}
    for node in view.gpu_nodes(nodes):
        mig = mig_manager_state(labels(node))
        if mig is not None and (mig.reconfiguring or mig.failed):
            out.append(mig_manager_symptom(node, mig))
            continue
        want = nodes.get(name(node))
        # A node of the DRA driver's own pools (draDriver.pools) advertises nothing: its
        # GPUs are in ResourceSlices (doctor.dra).
        if want is None or (intent.dra_pools and intent.dra_serves(want)):
            continue
        if want.resources:
            out += pool_counts(node, want, intent)
            continue
        have = gpu_count(node, "allocatable")
        evidence = Evidence(f"Node {name(node)} status.allocatable",
                            f"{GPU}: {have:g} ({want.gpus} physical GPU(s))")
        if intent.device_plugin == "hami":
            split = lookup(hami_values or {}, "devicePlugin.deviceSplitCount", 10)
            if not (have and have == want.gpus and _number(split) > 1):
                continue
            # The physical count alone is no proof: only two plugins on the node are.
            hami, other = view.device_plugins_on(node)
            if not (hami and other):
                if not other:
                    notes.append(
                        f"node {name(node)} advertises {have:g} {GPU}, the physical count, "
                        "but no second device plugin was seen on it: FM12 not reported")
                continue
            shown = Evidence(f"node {name(node)}: device plugins",
                             f"HAMi's: {', '.join(hami)}; another: {', '.join(other)}")
            for seen in (evidence, shown):
                out.append(Symptom(("FM12",), ("operator", "hami"), seen, Finding(
                    "FM12", Severity.ERROR,
                    f"node {name(node)} advertises {have:g} {GPU}, the physical count, "
                    f"instead of {want.gpus} x {split} HAMi shares: another device plugin "
                    f"({', '.join(other)}) runs beside HAMi's and overwrites its count.",
                    f"Node {name(node)}",
                    "Keep `gpuplane:devicePlugin: hami` (gpuplane renders the operator's "
                    "devicePlugin.enabled=false); raw Helm: --set devicePlugin.enabled=false "
                    "on the gpu-operator release (or uninstall the other device plugin).")))
            continue
        expected = next(iter(expected_resources(want, intent).values()))
        if intent.time_slicing_replicas > 0 and have != expected:
            out.append(Symptom(("FM10",), ("operator", "cluster"), evidence, Finding(
                "FM10", Severity.ERROR,
                f"node {name(node)} advertises {have:g} {GPU} but {want.gpus} GPU(s) x "
                f"{intent.time_slicing_replicas} time-slicing replicas make {expected}: the "
                "device plugin is not applying the sharing config.",
                f"Node {name(node)}",
                "Check `gpuplane:timeSlicing` (replicas, configMap, profile) and restart the "
                "device plugin DaemonSet, which does not watch its ConfigMap; raw Helm: "
                "devicePlugin.config.name/default naming the ConfigMap and its profile, then "
                "`kubectl rollout restart ds/nvidia-device-plugin-daemonset`.")))
    return out


def _number(value: Any) -> float:
    try:
        return quantity(value)
    except ValueError:
        return 0.0


# ------------------------------------------------------------------ HAMi


def hami_health(view: ClusterView, intent: ClusterIntent, intent_declared: bool,
                hami_values: dict[str, Any] | None, kube_known: bool = True
                ) -> tuple[list[Diagnosis], list[Symptom], list[str]]:
    diagnoses: list[Diagnosis] = []
    symptoms: list[Symptom] = []
    notes: list[str] = []
    if intent.device_plugin != "hami":
        return diagnoses, symptoms, notes
    actual = view.hami_namespace()
    if actual is None and (unseen := view.missing("helm-releases", "deployments",
                                                  "daemonsets")) is not None:
        notes.append(f"not checked: {unseen}: where HAMi runs (FM13)")
        return diagnoses, symptoms, notes
    if actual is None:
        diagnoses.append(Diagnosis(Finding(
            "FM13", Severity.ERROR,
            "gpuplane:devicePlugin is hami but no HAMi release, scheduler or device plugin was "
            "found in any namespace.",
            "HAMi", "Run `pulumi up` to install HAMi (`gpuplane:hami.chartVersion`, "
            "`gpuplane:hami.namespace`); without gpuplane: helm install hami hami-charts/hami "
            "-n kube-system."), "hami"))
        return diagnoses, symptoms, notes
    if intent_declared and actual != intent.hami_namespace:
        diagnoses.append(Diagnosis(Finding(
            "FM13", Severity.WARNING,
            f"HAMi runs in namespace {actual}, but the stack expects {intent.hami_namespace}: "
            "gpuplane manages (and checks) a release that is not the one serving the pods.",
            f"HAMi in namespace {actual}",
            f"Set `gpuplane:hami.namespace: {actual}`, or uninstall the release in {actual} "
            f"and let gpuplane install it in {intent.hami_namespace} (raw: helm uninstall hami "
            f"-n {actual})."), "hami"))
    symptoms += _scheduler(view, intent, actual, kube_known, notes)
    symptoms += _device_plugin(view, actual)
    found, more = _webhooks(view, actual)
    symptoms += found
    notes += more
    symptoms += _never_fit(view, hami_values)
    return diagnoses, symptoms, notes


def _scheduler(view: ClusterView, intent: ClusterIntent, ns: str, kube_known: bool,
               notes: list[str]) -> list[Symptom]:
    """HAMi's kube-scheduler image against the API server, from its Deployment, its
    ReplicaSets or its pods (whichever were collected), and why its pods fail (their
    states, events and logs)."""
    out: list[Symptom] = []
    want = version_tuple(intent.kubernetes_version)
    objects = [(o, kind) for kind, items in (("Deployment", view.snap.deployments),
                                             ("ReplicaSet", view.snap.replicasets),
                                             ("Pod", view.component_pods))
               for o in items if namespace(o) == ns and "scheduler" in name(o)]
    for obj, kind in objects:
        spec = pod_spec_of({**obj, "kind": kind}) or {}
        for ctr in spec.get("containers") or []:
            image = str(ctr.get("image", ""))
            if "kube-scheduler" not in image:
                continue
            tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
            have = version_tuple(tag)
            if have and not kube_known:
                notes.append(f"not checked: HAMi's kube-scheduler image {image} against the "
                             "API server (version not collected, no control-plane node seen)")
            elif have and want and have[:2] != want[:2]:
                out.append(_scheduler_tag(intent, ns, image, Evidence(
                    f"{ref(obj, kind)} container {ctr.get('name')}",
                    f"image {image}; the API server is v{intent.kubernetes_version}")))
    failing = [p for p in view.component_pods if namespace(p) == ns
               and "scheduler" in name(p)]
    for dep in view.snap.deployments:
        if namespace(dep) != ns or "scheduler" not in name(dep):
            continue
        status = dep.get("status") or {}
        if int(status.get("readyReplicas") or 0) >= int((dep.get("spec") or {}).get(
                "replicas", 1) or 1):
            failing = [p for p in failing if p not in view.pods_of(dep)]
    for pod in failing:
        for text, source in _pod_trouble(view, pod):
            out.append(Symptom(("FM13",), ("hami",), Evidence(source, text),
                               about=("kubeScheduler", "scheduler"), serious=True))
    return out


def _scheduler_tag(intent: ClusterIntent, ns: str, image: str, evidence: Evidence) -> Symptom:
    """One finding per image, whichever object showed it (Deployment, ReplicaSet, pod)."""
    version = intent.kubernetes_version
    return Symptom(("FM13",), ("hami",), evidence, about=("kubeScheduler",), fallback=Finding(
        "FM13", Severity.ERROR,
        f"HAMi's kube-scheduler runs {image} against a v{version} API server: a scheduler "
        "of another minor version crash-loops.",
        f"HAMi scheduler in namespace {ns}: kube-scheduler image",
        f"Set `gpuplane:hami.schedulerImageTag: v{version}` (or leave it null and set "
        "`gpuplane:cluster.kubernetesVersion`); raw Helm: --set "
        f"scheduler.kubeScheduler.image.tag=v{version}."))


def _device_plugin(view: ClusterView, ns: str) -> list[Symptom]:
    out = []
    for ds in view.daemonsets_in(ns):
        if "device-plugin" not in name(ds):
            continue
        status = ds.get("status") or {}
        if int(status.get("desiredNumberScheduled") or 0) == 0:
            selector = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "nodeSelector") or {}
            shown = ", ".join(f"{k}={v}" for k, v in selector.items()) or "none"
            evidence = Evidence(f"{ref(ds, 'DaemonSet')}",
                                f"0 pods scheduled (nodeSelector {shown})")
            out.append(Symptom(("FM13",), ("hami",), evidence, about=("gpu=on", "label"),
                               fallback=Finding(
                "FM13", Severity.ERROR,
                f"HAMi's device plugin DaemonSet {name(ds)} runs on no node (its nodeSelector "
                f"is {shown}): no GPU is shared and GPU pods stay Pending.",
                ref(ds, "DaemonSet"),
                "List the GPU nodes in `gpuplane:nodes` (gpuplane labels them gpu=on); by "
                "hand: kubectl label node <gpu node> gpu=on.")))
    return out


def _webhooks(view: ClusterView, ns: str) -> tuple[list[Symptom], list[str]]:
    out: list[Symptom] = []
    notes: list[str] = []
    hooks = [(cfg, hook) for cfg in view.snap.webhooks for hook in cfg.get("webhooks") or []
             if "hami" in name(cfg) or
             (((hook.get("clientConfig") or {}).get("service") or {}).get("namespace") == ns
             and "hami" in str(((hook.get("clientConfig") or {}).get("service") or {})
                               .get("name", "")))]
    if not hooks:
        unseen = view.missing("mutatingwebhookconfigurations")
        notes.append(f"not checked: {unseen}: HAMi's webhook" if unseen else
                     "no HAMi MutatingWebhookConfiguration found: GPU pods are not sent to "
                     "hami-scheduler")
        return out, notes
    namespaces = {name(n): labels(n) for n in view.snap.namespaces}
    unseen_ns = view.missing("namespaces")
    for cfg, hook in hooks:
        source = f"MutatingWebhookConfiguration {name(cfg)} webhook {hook.get('name')}"
        if hook.get("failurePolicy", "Fail") == "Ignore":
            out.append(Symptom(("FM13",), ("hami",), Evidence(source, "failurePolicy: Ignore"),
                               about=("failurePolicy",), fallback=Finding(
                "FM13", Severity.WARNING,
                "HAMi's webhook has failurePolicy Ignore: while hami-scheduler is "
                "unreachable, GPU pods are admitted unmutated and run unshared on the default "
                "scheduler.",
                source,
                "Set `gpuplane:hami.webhookFailurePolicy: Fail` and "
                "`gpuplane:hami.schedulerReplicas: 2`; raw Helm: --set scheduler."
                "admissionWebhook.failurePolicy=Fail,scheduler.replicas=2.")))
        for pod in view.gpu_pods:
            pod_ns = namespace(pod)
            ns_labels = namespaces.get(pod_ns, {"kubernetes.io/metadata.name": pod_ns})
            excluded = None
            if unseen_ns and _other_keys(hook.get("namespaceSelector")):
                notes.append(f"not checked: {unseen_ns}: whether HAMi's webhook selects "
                             f"namespace {pod_ns} (its namespaceSelector reads labels)")
            elif not selects(hook.get("namespaceSelector"), ns_labels):
                excluded = f"its namespaceSelector does not select namespace {pod_ns}"
            elif not selects(hook.get("objectSelector"), labels(pod)):
                excluded = f"its objectSelector does not select pod {pod_ns}/{name(pod)}"
            if excluded is None:
                continue
            scheduler = (pod.get("spec") or {}).get("schedulerName", "default-scheduler")
            evidence = Evidence(f"Pod {pod_ns}/{name(pod)}",
                                f"schedulerName {scheduler}: not mutated by HAMi ({excluded})")
            out.append(Symptom(("FM13",), ("hami",), evidence, about=("Selector",),
                               fallback=Finding(
                "FM13", Severity.ERROR,
                f"HAMi's webhook never sees GPU pods in namespace {pod_ns}: {excluded}, so "
                "they bypass hami-scheduler and get whole, unshared GPUs (or stay Pending).",
                source,
                "Remove the selector override from `gpuplane:hami.values` (scheduler."
                "admissionWebhook), or label the namespace/pods to match; raw Helm: the "
                "chart's scheduler.admissionWebhook selectors.")))
    return out, notes


def _other_keys(selector: Any) -> bool:
    """Whether a selector reads namespace labels other than the name the API sets."""
    if not isinstance(selector, dict):
        return False
    keys = set((selector.get("matchLabels") or {}).keys())
    keys |= {e.get("key") for e in selector.get("matchExpressions") or []}
    return bool(keys - {"kubernetes.io/metadata.name"})


def selects(selector: Any, lbl: dict[str, str]) -> bool:
    """Kubernetes LabelSelector semantics (an empty or missing selector selects all)."""
    if not isinstance(selector, dict):
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if lbl.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and lbl.get(key) not in values:
            return False
        if op == "NotIn" and key in lbl and lbl[key] in values:
            return False
        if op == "Exists" and key not in lbl:
            return False
        if op == "DoesNotExist" and key in lbl:
            return False
    return True


def _never_fit(view: ClusterView, hami_values: dict[str, Any] | None) -> list[Symptom]:
    """FM14: gpumem above every card's memory (GFD's nvidia.com/gpu.memory label, MiB,
    times HAMi's deviceMemoryScaling)."""
    scaling = _number(lookup(hami_values or {}, "devicePlugin.deviceMemoryScaling", 1)) or 1.0
    cards = [_number(labels(n).get("nvidia.com/gpu.memory", 0)) for n in view.gpu_nodes()]
    largest = max(cards, default=0.0) * scaling
    out: list[Symptom] = []
    if not largest:
        return out
    for pod in view.gpu_pods:
        want = requests_of({**pod, "kind": "Pod"}).get(GPUMEM, 0.0)
        if want > largest:
            where = f"Pod {namespace(pod)}/{name(pod)}"
            out.append(Symptom(("FM14",), (f"pod:{namespace(pod)}/{name(pod)}",),
                               Evidence(where, f"{GPUMEM} {want:g} MiB"), Finding(
                "FM14", Severity.ERROR,
                f"the pod asks for {want:g} MiB of {GPUMEM}, but the largest GPU has "
                f"{largest:g} MiB (nvidia.com/gpu.memory x deviceMemoryScaling {scaling:g}): "
                "it can never be placed and stays Pending.",
                f"{where} resources.limits['{GPUMEM}']",
                f"Ask for at most {largest:g} MiB of {GPUMEM} (or use "
                "nvidia.com/gpumem-percentage); to oversubscribe memory deliberately set "
                "`gpuplane:hami.deviceMemoryScaling` (raw Helm: devicePlugin."
                "deviceMemoryScaling).")))
    return out


__all__ = ["allocatable", "hami_health", "node_readiness", "operator_health", "runtimeclass",
           "selects"]
