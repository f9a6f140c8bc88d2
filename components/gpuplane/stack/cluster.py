"""`GpuCluster`: the whole GPU enablement of one cluster, composed from the components.

Order matters and is encoded as dependencies: node containerd changes first (canary,
then batches), then the GPU Operator (its toolkit must find the imports gpuplane added),
the time-slicing config before the operator that points at it and a plugin restart after,
HAMi after the operator, and the post-deploy checks after everything else. HAMi alone (no
`gpuplane:gpuOperator`): no operator release; HAMi follows the node changes directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.checks import GpuChecks, GpuChecksArgs
from gpuplane.checks.settings import ChecksSettings
from gpuplane.config import HAMI_CHART, OPERATOR_CHART, StackConfig, StackConfigError
from gpuplane.config.helm_values import (
    dra_labels,
    dra_values,
    hami_values,
    operator_values,
    time_slicing_data,
)
from gpuplane.config.platform_input import platform_input
from gpuplane.config.sharing_values import config_map_name, mig_parted_data, node_labels
from gpuplane.core.findings import Finding, levelled
from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, INTENT_LABEL
from gpuplane.distros.docker_daemon import DAEMON_JSON
from gpuplane.plan.node import NodeContainerdPlan, plan_node
from gpuplane.plan.rollout import batches
from gpuplane.platforms.native.result import PlatformInput
from gpuplane.policy.verdict import (
    config_map_view,
    node_labels_view,
    planned_findings,
    release_view,
)
from gpuplane.rules.dra import check_dra_node_cdi
from gpuplane.rules.platform import check_platform_node_writes
from gpuplane.rules.stack_levers import planned_fix
from gpuplane.stack import child_options
from gpuplane.stack.dra_driver import DraDriver, DraDriverArgs
from gpuplane.stack.gpu_operator import GpuOperator, GpuOperatorArgs
from gpuplane.stack.hami import Hami, HamiArgs
from gpuplane.stack.inputs import (
    Sources,
    invalid_stack,
    missing_key_problem,
    node_inputs,
    project_root,
    ssh_key,
)
from gpuplane.stack.node_labels import NodeLabels
from gpuplane.stack.node_pod import ContainerdPodRollout, ContainerdPodRolloutArgs
from gpuplane.stack.node_rollout import ContainerdRollout, ContainerdRolloutArgs, NodeTarget
from gpuplane.stack.refusal import log_findings, refuse
from gpuplane.stack.runtime_class import NvidiaRuntimeClass, NvidiaRuntimeClassArgs
from gpuplane.stack.sharing import Sharing, SharingArgs
from gpuplane.stack.time_slicing import TimeSlicing, TimeSlicingArgs


@dataclass
class GpuClusterArgs:
    """What `GpuCluster` is built from (the Pulumi `...Args` convention).

    `config`: the stack's `gpuplane:*` settings (`parse_stack_config`, or
    `config_from_pulumi()` inside a program). `private_key`: the SSH key for the node
    rollout (a secret); None: the stack's `gpuplane:sshPrivateKey`. `baselines`: node name
    -> {node path: content} captured from that node; None: the files the config's
    `baselineFiles` name, read relative to the project root (what the bundled program
    does too). Nodes without captured files are planned from gpuplane's model.
    `kubeconfig` / `kube_context`: where the post-deploy verdicts, HAMi's node labels and
    the device plugin restart connect (they use the Kubernetes client, not a Pulumi
    provider): pass the same kubeconfig as the `kubernetes.Provider` given in `opts` when
    there is one.
    Every Kubernetes resource gpuplane creates uses the provider from `opts`.
    """

    config: StackConfig
    private_key: pulumi.Input[str] | None = None
    baselines: Mapping[str, Mapping[str, str]] | None = None
    kubeconfig: pulumi.Input[str] | None = None
    kube_context: str | None = None


# Set only by the offline plan (`recorded_clusters`): every GpuCluster a program builds,
# whatever the program, so the plan reports the cluster a user's own program made.
_BUILT: ContextVar[list[GpuCluster] | None] = ContextVar("gpuplane_built", default=None)


@contextmanager
def recorded_clusters() -> Iterator[list[GpuCluster]]:
    """Within: each GpuCluster constructed is appended to the list yielded (before its
    first child, so a refusing cluster is in it too)."""
    built: list[GpuCluster] = []
    token = _BUILT.set(built)
    try:
        yield built
    finally:
        _BUILT.reset(token)


class GpuCluster(pulumi.ComponentResource):
    """Everything `gpuplane:*` describes, for one cluster."""

    config: StackConfig                        # what it was built from
    plan: NodeContainerdPlan                   # from gpuplane's model of the distribution
    node_plans: dict[str, NodeContainerdPlan]  # per node: from its captured files, if any
    baseline_sources: dict[str, Sources]       # per captured node: path -> (key, local copy)
    batches: list[list[str]]
    rollout: ContainerdRollout | ContainerdPodRollout | None
    operator: GpuOperator | None               # None: HAMi alone, no operator block
    hami: Hami | None
    dra_driver: DraDriver | None               # gpuplane:draDriver, after the operator
    platform_input: PlatformInput | None       # what to feed a managed platform's nodes
    stack_findings: list[Finding]              # beyond the node plans' own: platform, values
    rule_levels: tuple[tuple[str, str], ...]   # gpuplane:rules, applied to every finding
    checks: GpuChecks

    def __init__(self, name: str, args: GpuClusterArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        cfg = args.config
        # Read before anything is registered: a bad key leaves nothing behind.
        try:
            inputs = node_inputs(cfg, args.baselines, project_root())
        except StackConfigError as exc:
            raise invalid_stack(exc) from None
        private_key = ssh_key(args.private_key)
        super().__init__("gpuplane:index:GpuCluster", name, None, opts)
        self.baseline_sources = inputs.sources
        self.config = cfg
        built = _BUILT.get()
        if built is not None:
            built.append(self)
        # One record for every reader below (its JSON is made once: it lists every node).
        stack_intent = cfg.intent()
        self.intent = stack_intent
        self.rule_levels = stack_intent.rule_levels
        # Everything is planned and judged before the first child: a refusal leaves
        # nothing half-built (no namespace, no intent, no release) on the cluster.
        child = child_options(self, opts)
        self.platform_input, platform_findings = platform_input(cfg)
        self.plan = plan_node(cfg.profile, cfg.containerd, cfg.plan_options(),
                              docker=cfg.docker_settings)
        self.node_plans = _node_plans(cfg, self.plan, inputs.baselines)
        # Node files on a managed platform, which rewrites them (FM04-platform-owned).
        self.stack_findings = check_platform_node_writes(
            stack_intent, [path for p in self.node_plans.values() for path in p.files]
            + ([DAEMON_JSON] if any(p.docker for p in self.node_plans.values()) else [])
            if cfg.node_access else [], where="node plan")
        # What the platform makes of its input (EKS: nodeadm's merged config), judged too.
        self.stack_findings += platform_findings
        # The DRA driver needs CDI on in each node's merged config, as planned (FM30).
        self.stack_findings += [f for plan in {id(p): p for p in self.node_plans.values()
                                               }.values()
                                for f in check_dra_node_cdi(
                                    plan.effective.cdi, stack_intent,
                                    where=f"node plan {plan.profile.config_path}")]
        self.batches = batches([n.name for n in cfg.nodes if n.gpus > 0],
                               canary=cfg.rollout.canary,
                               max_unavailable=cfg.rollout.max_unavailable)
        namespace = cfg.gpuplane_namespace
        op = cfg.gpu_operator
        writes = bool(cfg.node_access) and bool(self.batches) and any(
            p.files or p.docker or p.options.mask_units for p in self.node_plans.values())
        sharing = bool(cfg.sharing_profiles()) and cfg.device_plugin == "gpu-operator"
        values = operator_values(cfg, self.plan.toolkit_env) if op is not None else None
        hami = hami_values(cfg) if cfg.device_plugin == "hami" else None
        dra = cfg.dra_driver
        dra_vals = dra_values(cfg) if dra is not None else None
        sharing_data = time_slicing_data(cfg) if sharing else None
        # The DRA pools' nodes (draDriver.pools): one NodeLabels, all alike.
        dra_nodes = dra_labels(cfg)
        dra_node_labels = next(iter(dra_nodes.values()), {})
        self.rollout = None
        self.stack_findings += planned_findings(
            stack_intent,
            # Only the releases it will create: HAMi alone has no operator to judge.
            releases=([release_view(f"{name}-gpu-operator", chart=OPERATOR_CHART,
                                    version=op.chart_version, namespace=namespace,
                                    values=values)] if op is not None and values is not None
                      else [])
            + ([release_view(f"{name}-hami", chart=HAMI_CHART,
                             version=cfg.hami.chart_version, namespace=cfg.hami.namespace,
                             values=hami)] if hami is not None else [])
            + ([release_view(f"{name}-dra-driver", chart=dra.chart_name,
                             version=dra.helm_version, namespace=dra.namespace,
                             values=dra_vals)] if dra is not None and dra_vals is not None
               else []),
            config_maps=[config_map_view(config_map_name(cfg), namespace=namespace,
                                         data=sharing_data)] if sharing_data else [],
            node_plans=self.node_plans, batches=self.batches if writes else [],
            node_labels=[node_labels_view(f"{name}-dra-nodes", nodes=list(dra_nodes),
                                          labels=dra_node_labels)] if dra_nodes else [])
        if refuse(self, self.plan_findings):
            writes = False   # held by the offline plan: the files show as withheld
        else:
            log_findings(self, self.plan_findings)   # the advice, shown by the CLI too
        if writes and cfg.cluster.node_access != "pod" and private_key is None:
            raise invalid_stack(missing_key_problem(name))

        ns = k8s.core.v1.Namespace(
            f"{name}-operator-namespace" if op is not None else f"{name}-namespace",
            metadata={"name": namespace,
                      "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
            opts=child)
        in_ns = child_options(self, opts, depends_on=[ns])
        intent = k8s.core.v1.ConfigMap(
            f"{name}-intent",
            metadata={"name": INTENT_CONFIGMAP, "namespace": namespace,
                      "labels": {INTENT_LABEL: "true"}},
            data={INTENT_KEY: stack_intent.to_json()},
            opts=in_ns)

        before_operator: list[pulumi.Input[pulumi.Resource]] = [ns, intent]
        if writes and cfg.cluster.node_access == "pod":
            # No SSH: the same agent from a privileged pod per node (gpuplane.agent.pod); its
            # namespace is gpuplane's privileged operator namespace unless set otherwise.
            own = cfg.node_pod_namespace == namespace
            self.rollout = ContainerdPodRollout(f"{name}-containerd", ContainerdPodRolloutArgs(
                plans=self.node_plans, batches=self.batches,
                namespace=cfg.node_pod_namespace, image=cfg.node_pod.image,
                timeout_seconds=cfg.node_pod.timeout_seconds, kubeconfig=args.kubeconfig,
                after=[ns] if own else []), opts=child)
            before_operator += self.rollout.finished
        elif writes and private_key is not None:
            targets = [NodeTarget(n.name, n.host or n.name, n.user or cfg.ssh.user,
                                  n.port or cfg.ssh.port, cfg.ssh.sudo) for n in cfg.nodes]
            self.rollout = ContainerdRollout(f"{name}-containerd", ContainerdRolloutArgs(
                targets=targets, plans=self.node_plans, batches=self.batches,
                private_key=private_key), opts=child)
            # The last batch waits for every earlier one: depending on it alone keeps the
            # dependency graph linear in nodes.
            before_operator += self.rollout.finished

        time_slicing = None
        if sharing_data is not None:
            time_slicing = TimeSlicing(f"{name}-time-slicing", TimeSlicingArgs(
                namespace=namespace, config_map=config_map_name(cfg),
                data=sharing_data), opts=in_ns)
            before_operator.append(time_slicing.config_map)
        labels, mig_parted = node_labels(cfg), mig_parted_data(cfg)
        if labels or mig_parted:
            # The pools' labels (and a custom MIG layout) before the plugin and MIG Manager.
            before_operator += Sharing(f"{name}-sharing", SharingArgs(
                namespace=namespace, labels=labels, mig_parted=mig_parted,
                kubeconfig=args.kubeconfig), opts=in_ns).resources

        if dra_nodes:
            # Before the operator labels them: it keeps a "false" it finds, so its device
            # plugin never starts there, and the DRA driver's kubelet plugin selects them.
            before_operator.append(NodeLabels(
                f"{name}-dra-nodes", nodes=list(dra_nodes), labels=dra_node_labels,
                kubeconfig=args.kubeconfig, opts=child))

        self.operator = None
        deployed: list[pulumi.Resource] = []
        if op is not None and values is not None:
            self.operator = GpuOperator(f"{name}-gpu-operator", GpuOperatorArgs(
                namespace=namespace, chart_version=op.chart_version, values=values,
                source=op.chart_source, skip_await=op.skip_await),
                opts=child_options(self, opts, depends_on=before_operator))
            deployed.append(self.operator)
            if time_slicing is not None:
                time_slicing.add_restart(self.operator.release, args.kube_context,
                                         args.kubeconfig)

        runtime_class = None
        if cfg.creates_runtime_class:
            runtime_class = NvidiaRuntimeClass(f"{name}-runtime-class", NvidiaRuntimeClassArgs(
                runtime_name=cfg.runtime.name), opts=child)
            deployed.append(runtime_class)
        self.hami = None
        if hami is not None:
            # After the operator (its toolkit) when there is one; HAMi alone: after the
            # node changes (the host toolkit's runtime) and its RuntimeClass.
            after: list[pulumi.Input[pulumi.Resource]] = (
                [self.operator] if self.operator is not None
                else [*before_operator, *([runtime_class] if runtime_class else [])])
            self.hami = Hami(f"{name}-hami", HamiArgs(
                namespace=cfg.hami.namespace, chart_version=cfg.hami.chart_version,
                values=hami, source=cfg.hami.chart_source, skip_await=cfg.hami.skip_await,
                gpu_nodes=[n.name for n in cfg.nodes if n.gpus > 0],
                kubeconfig=args.kubeconfig),
                opts=child_options(self, opts, depends_on=after))
            deployed.append(self.hami)
        self.dra_driver = None
        if dra is not None and dra_vals is not None:
            # After the operator: its driver and toolkit (CDI) come first.
            self.dra_driver = DraDriver(f"{name}-dra-driver", DraDriverArgs(
                chart=dra.chart_name, namespace=dra.namespace,
                chart_version=dra.helm_version, values=dra_vals, source=dra.chart_source,
                skip_await=dra.skip_await),
                opts=child_options(self, opts, depends_on=[self.operator]
                                   if self.operator is not None else before_operator))
            deployed.append(self.dra_driver)
        if time_slicing is not None and time_slicing.restart is not None:
            deployed.append(time_slicing.restart)
        self.checks = GpuChecks(f"{name}-checks", GpuChecksArgs(
            intent=stack_intent, settings=ChecksSettings.from_config(cfg.checks),
            hami_split_count=cfg.hami.device_split_count, kubeconfig=args.kubeconfig),
            opts=child_options(self, opts, depends_on=deployed))
        self.register_outputs({
            "batches": self.batches,
            "toolkitEnv": self.plan.toolkit_env,
            "planFindings": [f.to_dict() for f in self.plan_findings],
            "platformInput": self.platform_input.to_output() if self.platform_input else None,
        })

    @property
    def plan_findings(self) -> list[Finding]:
        """The rulebook's findings on every distinct node plan, each once; those of plans
        made from captured files name their nodes. The model's plan counts only where a
        node is planned from it (or no node is listed): a finding on the distribution's
        stock files says nothing about nodes whose own files were captured."""
        out: list[Finding] = []
        used = list(self.node_plans.values())
        model = [self.plan] if not used or any(p is self.plan for p in used) else []
        for plan in {id(p): p for p in [*model, *used]}.values():
            nodes = [n for n, p in self.node_plans.items() if p is plan]
            for f in plan.findings:
                # The node files are gpuplane's plan: the fix leads with the stack key.
                f = planned_fix(f, self.intent, _captured_key(self.config, f.where, nodes)
                                if plan is not self.plan else None)
                if plan is not self.plan:
                    f = replace(f, where=f"{f.where} (nodes {', '.join(nodes)})")
                if f not in out:
                    out.append(f)
        # `gpuplane:rules` never lowers a finding on a node's own files: the agent never
        # applies a plan with errors (gpuplane.agent.script.agent_plan).
        return out + [f for f in levelled(self.stack_findings, self.rule_levels)
                      if f not in out]


def _captured_key(cfg: StackConfig, where: str, nodes: list[str]) -> str | None:
    """The stack key naming the captured copy of the file at `where` (`path:line`) for the
    first of `nodes`; None where that file was not captured."""
    index = next((i for i, n in enumerate(cfg.nodes) if n.name in nodes), None)
    if index is None:
        return None
    captured = cfg.baseline_files_of(index)
    path = where.split(":", 1)[0]
    key, local = captured.get(path, (None, None))
    return f"{key} ({local})" if key and local else key


def _node_plans(cfg: StackConfig, model: NodeContainerdPlan,
                baselines: Mapping[str, Mapping[str, str]]) -> dict[str, NodeContainerdPlan]:
    """One plan per distinct set of captured files (nodes of a pool usually share one)."""
    # None: the model. A node with baselines of no files is planned from "no files" (its
    # top-level file mapped to null), not from the model.
    # A node outside draDriver.pools keeps its host units: only the driver's nodes run
    # ComputeDomains, so only their nvidia-imex.service is masked.
    plans: dict[tuple[frozenset[tuple[str, str]] | None, bool], NodeContainerdPlan] = {
        (None, True): model}
    options = cfg.plan_options()
    dra_pools = cfg.dra_pools
    out = {}
    for node in cfg.nodes:
        captured = dict(baselines.get(node.name, {}))
        units = not dra_pools or node.pool in dra_pools or not options.mask_units
        has_baseline = node.name in baselines
        key = (frozenset(captured.items()) if has_baseline else None, units)
        if key not in plans:
            # The node's own files only: what it lacks, it lacks (gpuplane.config.baselines
            # refuses a capture that misses the file the plan edits).
            plans[key] = plan_node(cfg.profile, cfg.containerd,
                                   options if units else replace(options, mask_units=()),
                                   current=captured if has_baseline else None,
                                   docker=cfg.docker_settings)
        out[node.name] = plans[key]
    return out


__all__ = ["GpuCluster", "GpuClusterArgs", "recorded_clusters"]
