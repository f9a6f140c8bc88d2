"""`gpuplane plan`: stack file → config → program under mocks → policies → report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplane.config import NAMESPACE, StackConfig, StackConfigError
from gpuplane.containerd.errors import ConfigError
from gpuplane.plan.engine import no_full_gc, run_program
from gpuplane.plan.policies import run_policies
from gpuplane.plan.report import build_report
from gpuplane.plan.stackfile import StackFile, load_stack_file


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
    from gpuplane import program

    try:
        cluster, resources = run_program(program.run, project=NAMESPACE, stack=name,
                                         config=stack.pulumi_config(),
                                         secret_keys=stack.secret_keys,
                                         root_directory=project_root(stacks_dir))
    except StackConfigError as exc:   # e.g. a captured node file that cannot be read
        raise stack.located(exc) from None
    except ConfigError as exc:        # a captured file the containerd model cannot read
        raise stack.located(program.captured_file_problem(exc)) from None
    findings = run_policies(resources, pack_config)
    # The planner's own findings cover a plan the components refused to roll out.
    seen = {(f.id, f.message) for f in findings}
    findings += [f for f in cluster.plan_findings if (f.id, f.message) not in seen]
    return build_report(name, cfg, cluster, resources, findings)


def project_root(stacks_dir: Path) -> Path:
    """The directory with Pulumi.yaml at or above the stacks dir (where `pulumi up` runs
    the program); the stacks dir's parent when there is none."""
    here = stacks_dir.resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return here.parent


__all__ = ["plan_stack", "project_root"]
