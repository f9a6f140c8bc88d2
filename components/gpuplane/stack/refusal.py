"""How a component refuses: every finding logged on it, then one `pulumi.RunError`,
before its first child. `pulumi.log.error` alone never stops a Pulumi program: the
engine goes on creating resources (pulumi/pulumi#6090, closed by #6573; #5085)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import pulumi

from gpuplane.core.findings import Finding, Severity


class PlanRejected(pulumi.RunError):
    """The rulebook rejects the plan: raised before any child resource is registered, so
    `pulumi preview` and `pulumi up` fail and nothing is created. `findings`: every finding
    (errors and warnings); `component`: the refusing component (a `GpuCluster` carries
    its plans, which `gpuplane plan` reports)."""

    def __init__(self, message: str, findings: list[Finding],
                 component: pulumi.Resource) -> None:
        super().__init__(message)
        self.findings = findings
        self.component = component


# Set only by the offline plan (`held_refusals`), to list what a rejected stack would
# have registered: under `pulumi preview`/`up` a rejection always raises.
_HOLD_REFUSALS: ContextVar[bool] = ContextVar("gpuplane_hold_refusals", default=False)


@contextmanager
def held_refusals() -> Iterator[None]:
    """Within: `refuse` neither logs nor raises, so the offline plan can record the
    resources a rejected stack would have created and show them as withheld."""
    token = _HOLD_REFUSALS.set(True)
    try:
        yield
    finally:
        _HOLD_REFUSALS.reset(token)


def log_findings(component: pulumi.Resource, findings: list[Finding]) -> None:
    """Every finding on the component, where the CLI shows it: errors as errors, the
    rest as warnings (findings the policy pack cannot see, e.g. on the node plan of a
    stack without node access, reach the preview this way)."""
    for f in findings:
        text = f"{f.id} {f.where}: {f.message} Fix: {f.fix}"
        if f.severity is Severity.ERROR:
            pulumi.log.error(text, resource=component)
        else:
            pulumi.log.warn(text, resource=component)


def refuse(component: pulumi.Resource, findings: list[Finding]) -> bool:
    """Stop the program with one error naming the rules when any finding is an error,
    after logging every finding (`log_findings`). `log.error` alone would not stop
    anything. Returns whether the plan is rejected (only within `held_refusals`:
    elsewhere a rejection raises)."""
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if not errors or _HOLD_REFUSALS.get():
        return bool(errors)
    log_findings(component, findings)
    ids = ", ".join(dict.fromkeys(f.id for f in errors))
    raise PlanRejected(
        f"gpuplane refused this plan: the rulebook rejects it ({ids}; {len(errors)} "
        "error(s), each logged above with its fix). Nothing was changed: no resource of "
        "the GPU enablement was created or modified. Fix the stack and run again; "
        "`gpuplane plan` shows the same verdict offline.", findings, component)


__all__ = ["PlanRejected", "held_refusals", "log_findings", "refuse"]
