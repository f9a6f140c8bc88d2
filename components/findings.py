"""The one finding type every rule returns, at plan, deploy and diagnosis time."""

from __future__ import annotations

from dataclasses import asdict, dataclass
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

    def to_dict(self) -> dict[str, str]:
        data = asdict(self)
        data["severity"] = str(self.severity)
        return data


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)
