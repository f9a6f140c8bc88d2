"""The CrossGuard policies: one mandatory policy per failure mode for its errors and one
advisory twin for its warnings, generated from the catalogue so every rule id the
rulebook can report has a policy whose enforcement users can configure.

All are stack policies: most rules need facts from several resources (the stack's
`gpuplane-intent` ConfigMap, the releases, the node commands and their order). Stacks
without that ConfigMap (workload stacks, GPU stacks gpuplane did not make) get the
workload rules and the rules over their GPU Operator / HAMi installs
(gpuplane.policy.foreign), with cluster facts from the policy config.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpuplane.core.findings import Finding, Severity
from gpuplane.policy.collect import (
    Located,
    View,
    intent_from_config,
    stack_findings,
)
from gpuplane.policy.facts import FACTS_SCHEMA
from gpuplane.policy.props import plain
from gpuplane.rules import RULES

PACK_NAME = "gpuplane"
# FM05 (another installer rewrites the config later) cannot be seen at preview time;
# the node agent's `status` and the doctor find it.
COVERED = tuple(r for r in RULES if r != "FM05")
# Cluster facts for stacks without gpuplane's intent (gpuplane.policy.facts).
CONFIG_SCHEMA = PolicyConfigSchema(properties=FACTS_SCHEMA)

_memo: list[tuple[tuple[int, str], list[PolicyResource], list[Located]]] = []


def findings_of(resources: list[PolicyResource],
                config: Mapping[str, Any] | None) -> list[Located]:
    """The stack's findings, computed once per validation however many policies ask."""
    key = (id(resources), json.dumps(config or {}, sort_keys=True))
    if _memo and _memo[0][0] == key and _memo[0][1] is resources:
        return _memo[0][2]
    views = [View(r.resource_type, r.name, r.urn, plain(r.props),
                  tuple(d.urn for d in r.dependencies or ()),
                  parent=r.parent.urn if r.parent is not None else (r.opts.parent or ""),
                  provider=r.provider.urn if r.provider is not None else "")
             for r in resources]
    located = stack_findings(views, intent_from_config(config), config).items
    _memo[:] = [(key, resources, located)]
    return located


def violation_text(f: Finding) -> str:
    """The violation message; the offline runner reads `where` and `fix` back from it."""
    state = f"\nstate: {f.state}" if f.state else ""
    return f"{f.message}\nwhere: {f.where}\nfix: {f.fix}{state}"


def _validator(rule_id: str, severity: Severity) -> Callable[..., None]:
    def validate(args: StackValidationArgs, report_violation: Callable[..., None]) -> None:
        for item in findings_of(args.resources, args.get_config()):
            f = item.finding
            matches = f.severity is severity or (
                severity is Severity.WARNING and f.severity is Severity.INFO)
            if f.id == rule_id and matches:
                report_violation(violation_text(f), item.urn)
    return validate


def policy_name(rule_id: str, severity: Severity) -> str:
    base = f"gpuplane-{rule_id.lower()}"
    return base if severity is Severity.ERROR else f"{base}-advisory"


def policy_names() -> list[str]:
    """Every policy of the pack, mandatory and advisory."""
    return [policy_name(r, sev) for r in COVERED for sev in (Severity.ERROR, Severity.WARNING)]


def build_policies() -> list[StackValidationPolicy]:
    policies = []
    for rule_id in COVERED:
        rule = RULES[rule_id]
        for severity, level in ((Severity.ERROR, EnforcementLevel.MANDATORY),
                                (Severity.WARNING, EnforcementLevel.ADVISORY)):
            suffix = "" if severity is Severity.ERROR else " (advice)"
            policies.append(StackValidationPolicy(
                name=policy_name(rule_id, severity),
                description=f"{rule_id}: {rule.title}{suffix}. Fix: {rule.fix}",
                enforcement_level=level,
                validate=_validator(rule_id, severity),
                config_schema=CONFIG_SCHEMA,
            ))
    return policies


__all__ = ["COVERED", "PACK_NAME", "build_policies", "findings_of", "policy_name", "policy_names",
           "violation_text"]
