"""`GpuChecks`: the post-deploy GPU checks as one Pulumi component.

Children, all after the rest of the deployment (`depends_on`):
* ConfigMap `<name>-probe` with the CUDA probe script (when a check runs the probe),
  named `<name>-probe-<sha256 of the script, 10>` in the cluster;
* `GpuAllocatableCheck` `<name>-allocatable`: each GPU node's allocatable, per resource name
  (under DRA, `ClusterIntent.dra`, `<name>-resourceslices`: each GPU node's ResourceSlice
  from gpu.nvidia.com, checks.dra);
* `GpuJobCheck` `<name>-nodes-check`: it creates a Job per GPU node
  (`<name>-probe-<node>-<8 hex>`, checks.manifests) and judges them all; under DRA each
  Job's pod claims its GPU through a ResourceClaimTemplate of the same name;
* with time-slicing a `GpuJobCheck` `<name>-timeslicing-check` (Job
  `<name>-timeslicing-…`), with HAMi and the vectoradd sample `<name>-hami-check`: both
  only after the allocatable check and the node checks passed.
The Jobs are not Pulumi resources (the state would keep a whole Job per GPU node). Any
failing verdict fails `pulumi up` with the finding, its fix and the pod's output
(`provider.gate`), and the checks after it do not start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.checks.manifests import (
    CheckJob,
    fingerprint,
    needs_probe_configmap,
    plan_checks,
    probe_configmap,
    probe_configmap_name,
    short_name,
)
from gpuplane.checks.provider import GpuAllocatableCheck, GpuJobCheck, gate, verdict
from gpuplane.checks.settings import ChecksSettings
from gpuplane.checks.verdicts import HAMI_DEFAULT_SPLIT
from gpuplane.core.intent import ClusterIntent
from gpuplane.probe import probe_source
from gpuplane.stack import child_options

TYPE = "gpuplane:index:GpuChecks"


@dataclass
class GpuChecksArgs:
    """What the checks need: the stack's intent, `gpuplane:checks` and where to run the
    Jobs (default: the operator namespace). What they must wait for is the caller's
    `depends_on` in the component's options."""

    intent: ClusterIntent
    settings: ChecksSettings = field(default_factory=ChecksSettings)
    namespace: str | None = None
    kubeconfig: pulumi.Input[str] | None = None   # for the verdicts; default like kubectl
    hami_split_count: int = HAMI_DEFAULT_SPLIT    # `gpuplane:hami.deviceSplitCount`


class GpuChecks(pulumi.ComponentResource):
    """Post-deploy proofs that pods really compute on the GPUs the stack promised."""

    configmap: k8s.core.v1.ConfigMap | None
    checks: dict[str, GpuJobCheck]
    allocatable: GpuAllocatableCheck | None

    def __init__(self, name: str, args: GpuChecksArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        intent, settings = args.intent, args.settings
        namespace = args.namespace or intent.operator_namespace
        plan = plan_checks(intent, settings)
        self.configmap, self.checks, self.allocatable = None, {}, None
        if not plan:
            self.register_outputs({"enabled": settings.enabled, "namespace": namespace,
                                   "checks": {}})
            return

        def child(*after: pulumi.Input[pulumi.Resource]) -> pulumi.ResourceOptions:
            return child_options(self, opts, depends_on=after)

        source = probe_source()
        stamp = fingerprint(intent, settings, source)
        configmap_name: str | None = None
        if needs_probe_configmap(plan):
            # Named by its content (as kustomize's generated ConfigMaps are): every probe
            # Job's spec names it as plain text, and a changed probe is a new ConfigMap,
            # created before the old one is deleted.
            configmap_name = probe_configmap_name(name, source)
            cm = probe_configmap(namespace, source, configmap_name)
            self.configmap = k8s.core.v1.ConfigMap(
                short_name(f"{name}-probe"), metadata=cm["metadata"], data=cm["data"],
                opts=child())
        self.allocatable = GpuAllocatableCheck(
            f"{name}-resourceslices" if intent.dra and not intent.plugin_nodes
            else f"{name}-allocatable",
            intent=intent, timeout_seconds=settings.timeout_seconds,
            hami_split_count=args.hami_split_count, kubeconfig=args.kubeconfig, opts=child())

        probe_deps = (self.configmap,) if self.configmap is not None else ()

        def check_jobs(key: str, checks: list[CheckJob],
                       *after: pulumi.Input[pulumi.Resource]) -> GpuJobCheck:
            self.checks[key] = GpuJobCheck(
                f"{name}-{key}-check", checks=checks, intent=intent, settings=settings,
                namespace=namespace, job_prefix=name, fingerprint=stamp,
                configmap=configmap_name, kubeconfig=args.kubeconfig,
                opts=child(*probe_deps, *after))
            return self.checks[key]

        # Wave 1: allocatable and every node's probe, side by side. Wave 2: the sharing
        # proofs, only once every wave-1 check passed (`gate`).
        first: list[GpuJobCheck | GpuAllocatableCheck] = [self.allocatable]
        node_checks = [c for c in plan if c.kind == "node"]
        if node_checks:
            first.append(check_jobs("nodes", node_checks))
        verdicts = [verdict(c) for c in first]
        after = gate(first, verdicts)
        second = [check_jobs(c.key, [c], after) for c in plan if c.kind != "node"]
        verdicts += [verdict(c) for c in second]

        self.register_outputs({
            "enabled": True,
            "namespace": namespace,
            "checks": {key: c.passed for key, c in self.checks.items()},
            "allocatable": self.allocatable.result,
            # Fails the program, after every verdict is in, when any check failed.
            "verdicts": gate([*first, *second], verdicts).apply(lambda _: "passed"),
        })


__all__ = ["TYPE", "GpuChecks", "GpuChecksArgs"]
