"""The one finding type every rule returns, at plan, deploy and diagnosis time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum


class Severity(StrEnum):
    """Errors block a rollout (mandatory policies, exit 1); warnings advise."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    """What is wrong, where (stack key, node, file:line, resource) and how to fix it."""

    id: str
    severity: Severity
    message: str
    where: str
    fix: str
    # The state of the rollout the finding appears in (STATES); "" when it is not about one
    # node state (Helm values, the rollout order). Left out of to_dict() when empty.
    state: str = ""
    # The fix as stack changes, where it is one: (key, value) pairs, a key being a stack key
    # and a dotted path in it (`gpuplane:gpuOperator.values.toolkit.env`), a value None
    # removing it. Applied, the plan is clean or names the next step
    # (tests/pure/test_fix_convergence.py). Left out of to_dict() when empty.
    changes: tuple[tuple[str, object], ...] = ()

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["severity"] = str(self.severity)
        if not self.state:
            del data["state"]
        if self.changes:
            data["changes"] = [[k, v] for k, v in self.changes]
        else:
            del data["changes"]
        return data


# The states a node passes through, in order: as found, after gpuplane's files, after the
# GPU Operator's toolkit, and after the toolkit is uninstalled while gpuplane's files stay
# (`pulumi destroy` removes the operator before the node agent restores the node).
AS_FOUND, AFTER_GPUPLANE, AFTER_TOOLKIT, AFTER_UNINSTALL = (
    "as found", "after gpuplane", "after toolkit", "after uninstall")
STATES = (AS_FOUND, AFTER_GPUPLANE, AFTER_TOOLKIT, AFTER_UNINSTALL)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)


def levelled(findings: Iterable[Finding],
             levels: Iterable[tuple[str, str]]) -> list[Finding]:
    """The findings with the levels a stack sets (`gpuplane:rules`): a rule set to
    `advisory` reports its errors as warnings, one set to `disabled` reports nothing.
    Applied where the findings are made (the program, the policy pack), so a refusal and
    a preview agree."""
    level = dict(levels)
    out = []
    for f in findings:
        wanted = level.get(f.id)
        if wanted == "disabled":
            continue
        if wanted == "advisory" and f.severity is Severity.ERROR:
            f = replace(f, severity=Severity.WARNING)
        out.append(f)
    return out
