"""`gpuplane plan`: stack file → config → program under mocks → policies → report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplane.cli.plan.engine import Registered, no_full_gc, run_program
from gpuplane.cli.plan.policies import run_policies
from gpuplane.cli.plan.report import build_report
from gpuplane.config import NAMESPACE, StackConfig, StackConfigError
from gpuplane.config.stackfile import StackFile, load_stack_file, project_root
from gpuplane.containerd.errors import ConfigError
from gpuplane.core.findings import Finding
from gpuplane.stack.cluster import GpuCluster
from gpuplane.stack.refusal import PlanRejected, held_refusals


def plan_stack(name: str, stacks_dir: Path,
               pack_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan report of one stack. Raises StackFileError / StackConfigError on bad input."""
    stack = load_stack_file(name, stacks_dir)
    cfg = stack.config()
    # The registrations stay alive until the report is built: full collections would
    # re-scan them during the policies and the report too (half their time at 2000 nodes).
    with no_full_gc():
        return _plan(name, stack, cfg, stacks_dir, pack_config)


def _plan(name: str, stack: StackFile, cfg: StackConfig, stacks_dir: Path,
          pack_config: dict[str, Any] | None) -> dict[str, Any]:
    from gpuplane.stack import program

    recorded: list[Registered] = []
    try:
        cluster, resources = run_program(program.run, project=NAMESPACE, stack=name,
                                         config=stack.pulumi_config(),
                                         secret_keys=stack.secret_keys,
                                         root_directory=project_root(stacks_dir),
                                         recorded=recorded)
    except StackConfigError as exc:   # e.g. a captured node file that cannot be read
        raise stack.located(exc) from None
    except ConfigError as exc:        # a captured file the containerd model cannot read
        raise stack.located(program.captured_file_problem(exc)) from None
    except PlanRejected as exc:
        if not isinstance(exc.component, GpuCluster):
            raise
        # The component refused before its first child, as it does under `pulumi up`:
        # the report holds what was registered (the component alone), every finding, and
        # what the stack would have created, as withheld.
        findings = _merged(run_policies(recorded, pack_config), exc.findings)
        with held_refusals():
            _, withheld = run_program(program.run, project=NAMESPACE, stack=name,
                                      config=stack.pulumi_config(),
                                      secret_keys=stack.secret_keys,
                                      root_directory=project_root(stacks_dir))
        kept = {r.urn for r in recorded}
        return build_report(name, cfg, exc.component, recorded, findings,
                            withheld=[r for r in withheld if r.urn not in kept])
    findings = run_policies(resources, pack_config)
    return build_report(name, cfg, cluster, resources,
                        _merged(findings, cluster.plan_findings))


def _merged(found: list[Finding], more: list[Finding]) -> list[Finding]:
    """`found`, then each finding of `more` that says something new."""
    seen = {(f.id, f.message) for f in found}
    return found + [f for f in more if (f.id, f.message) not in seen]


__all__ = ["plan_stack"]
