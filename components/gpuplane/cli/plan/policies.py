"""The offline policy runner: the pack's policies over the mock engine's registrations,
called with the same `StackValidationArgs` the Pulumi engine builds, honouring a
`--policy-pack-config` file the way `pulumi preview` does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from gpuplane.cli.plan.engine import Registered
from gpuplane.core.findings import Finding, Severity
from gpuplane.policy.pack import build_policies

_SEVERITY = {EnforcementLevel.MANDATORY: Severity.ERROR,
             EnforcementLevel.ADVISORY: Severity.WARNING}


def policy_resources(resources: list[Registered]) -> list[PolicyResource]:
    """PolicyResources with parents and dependencies linked, as the engine sends them: the
    inputs behind the policy SDK's read-only proxies, as `pulumi preview` hands them.

    What the policies only read and most resources share is made once: the options of
    resources with the same ones (a rollout's node commands), each provider, the custom
    timeouts, and an empty tuple for a property without dependencies (at 10,000 nodes a
    fresh object each was about 30 MB of the plan's peak)."""
    by_urn: dict[str, PolicyResource] = {}
    timeouts = PolicyCustomTimeouts(0, 0, 0)
    options: dict[tuple[Any, ...], PolicyResourceOptions] = {}
    providers: dict[str, PolicyProviderResource] = {}
    for r in resources:
        key = (r.protect, tuple(r.ignore_changes or ()), r.delete_before_replace,
               tuple(r.additional_secret_outputs or ()), r.parent)
        opts = options.get(key)
        if opts is None:
            opts = options[key] = PolicyResourceOptions(
                protect=r.protect, ignore_changes=r.ignore_changes,
                delete_before_replace=r.delete_before_replace, aliases=[],
                custom_timeouts=timeouts,
                additional_secret_outputs=r.additional_secret_outputs,
                parent=r.parent or None)
        # The provider as the engine names it: its URN (`<URN>::<id>` in the registration).
        provider = None
        if r.provider:
            provider = providers.get(r.provider)
            if provider is None:
                provider = providers[r.provider] = PolicyProviderResource(
                    "", {}, r.provider.rsplit("::", 1)[0], "")
        by_urn[r.urn] = _Resource(r.type, r.inputs, r.urn, r.name, opts, provider, None,
                                  [], {})
    for r in resources:
        res = by_urn[r.urn]
        res.parent = by_urn.get(r.parent)
        res.dependencies = [by_urn[d] for d in r.dependencies if d in by_urn]
        res.property_dependencies = {
            k: [by_urn[d] for d in v if d in by_urn] if v else _NO_DEPENDENCIES
            for k, v in r.property_dependencies.items()}
    return list(by_urn.values())


_NO_DEPENDENCIES: Any = ()


class _Resource(PolicyResource):
    """A PolicyResource that proxies its inputs when they are read rather than holding
    them proxied: the SDK's proxy copies every mapping and list of the inputs
    (`unknown_checking_proxy`, pulumi_policy/proxy.py, pulumi-policy 1.21.0), and the pack
    reads each resource's inputs once (gpuplane.policy.pack `findings_of`), so the copies
    of 20,000 resources' inputs need not be alive together (about 15 MB of the peak at
    10,000 nodes)."""

    _inputs: dict[str, Any]

    @property
    def props(self) -> Mapping[str, Any]:
        return unknown_checking_proxy(self._inputs)

    @props.setter
    def props(self, inputs: Mapping[str, Any]) -> None:
        self._inputs = inputs if isinstance(inputs, dict) else dict(inputs)


def _settings(pack_config: Mapping[str, Any], name: str,
              default: EnforcementLevel) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Enforcement and properties of one policy: its own entry, else `all`, else default."""
    level = default
    if "all" in pack_config:
        value = pack_config["all"]
        level = EnforcementLevel(value if isinstance(value, str)
                                 else value.get("enforcementLevel", default.value))
    entry = pack_config.get(name)
    props: dict[str, Any] = {}
    if isinstance(entry, str):
        level = EnforcementLevel(entry)
    elif isinstance(entry, Mapping):
        props = {k: v for k, v in entry.items() if k != "enforcementLevel"}
        level = EnforcementLevel(entry.get("enforcementLevel", level.value))
    return level, props


def run_policies(resources: list[Registered],
                 pack_config: Mapping[str, Any] | None = None) -> list[Finding]:
    """Every policy over one stack; violations come back as findings with rule id and fix."""
    stack = policy_resources(resources)
    out: list[Finding] = []
    for policy in build_policies():
        # The SDK's own default for a policy constructed without a level.
        default = policy.enforcement_level or EnforcementLevel.ADVISORY
        level, props = _settings(pack_config or {}, policy.name, default)
        if level is EnforcementLevel.DISABLED:
            continue
        rule_id = policy.name.split("-")[1].upper()
        args = StackValidationArgs(stack, config=props)

        def report(message: str, urn: str | None = None, _id: str = rule_id,
                   _level: EnforcementLevel = level) -> None:
            text, _, rest = message.partition("\nwhere: ")
            where, _, fix = rest.partition("\nfix: ")
            fix, _, state = fix.partition("\nstate: ")
            out.append(Finding(_id, _SEVERITY[_level], text, where or (urn or ""), fix, state))

        policy.validate(args, report)
    return out


__all__ = ["policy_resources", "run_policies"]
