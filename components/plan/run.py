"""`gpuplane plan`: stack file → config → program under mocks → policies → report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.config import NAMESPACE
from components.plan.engine import run_program
from components.plan.policies import run_policies
from components.plan.report import build_report
from components.plan.stackfile import load_stack_file


def plan_stack(name: str, stacks_dir: Path,
               pack_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan report of one stack. Raises StackFileError / StackConfigError on bad input."""
    from components import program

    stack = load_stack_file(name, stacks_dir)
    cfg = stack.config()
    cluster, resources = run_program(program.run, project=NAMESPACE, stack=name,
                                     config=stack.pulumi_config(),
                                     secret_keys=stack.secret_keys)
    findings = run_policies(resources, pack_config)
    # The planner's own findings cover a plan the components refused to roll out.
    seen = {(f.id, f.message) for f in findings}
    findings += [f for f in cluster.plan.findings if (f.id, f.message) not in seen]
    return build_report(name, cfg, cluster, resources, findings)


__all__ = ["plan_stack"]
