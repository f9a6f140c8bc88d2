"""`gpuplane plan`: stack file → the project's program under mocks → policies → report.

The program is the project's own (gpuplane.cli.plan.project): gpuplane's bundled
`__main__.py` or a user's program that builds a `GpuCluster` among its own resources.
A stacks dir outside any Pulumi project runs gpuplane's bundled program.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuplane.cli.plan.engine import Registered, no_full_gc, run_program
from gpuplane.cli.plan.policies import run_policies
from gpuplane.cli.plan.project import Project, find_project, program_failure, project_at
from gpuplane.cli.plan.report import build_report, program_report
from gpuplane.config import NAMESPACE, StackConfigError
from gpuplane.config.stackfile import StackFile, load_stack_file, project_root
from gpuplane.containerd.errors import ConfigError
from gpuplane.core.findings import Finding
from gpuplane.stack.cluster import GpuCluster, recorded_clusters
from gpuplane.stack.refusal import PlanRejected, held_refusals


def plan_stack(name: str, stacks_dir: Path, pack_config: dict[str, Any] | None = None,
               project: Project | None = None) -> dict[str, Any]:
    """The plan report of one stack of `project` (default: the Pulumi project at or above
    `stacks_dir`, else gpuplane's bundled program: also for a `gpuplane` project without
    its `__main__.py`, gpuplane.cli.plan.project.project_at). Raises StackFileError /
    StackConfigError on bad input, ProjectError / ProgramFailed when the program cannot
    run or fails."""
    if project is None:
        found = find_project(stacks_dir)
        project = project_at(found) if found is not None else None
    stack = load_stack_file(name, stacks_dir)
    if stack.values:   # gpuplane:* keys: checked before the program runs, file:line named
        stack.config()
    # The registrations stay alive until the report is built: full collections would
    # re-scan them during the policies and the report too (half their time at 2000 nodes).
    with no_full_gc():
        return _plan(name, stack, stacks_dir, pack_config, project)


def _plan(name: str, stack: StackFile, stacks_dir: Path, pack_config: dict[str, Any] | None,
          project: Project | None) -> dict[str, Any]:
    from gpuplane.stack import program

    runner: Callable[[], Any] = project.runner() if project else program.run
    options: dict[str, Any] = dict(
        project=project.name if project else NAMESPACE, stack=name,
        config=stack.pulumi_config(), secret_keys=stack.secret_keys,
        root_directory=project.root if project else project_root(stacks_dir))
    recorded: list[Registered] = []
    with recorded_clusters() as clusters, program.plain_errors():
        try:
            _, resources = run_program(runner, recorded=recorded, **options)
        except StackConfigError as exc:   # e.g. a captured node file that cannot be read
            raise stack.located(exc) from None
        except ConfigError as exc:        # a captured file the containerd model cannot read
            raise stack.located(program.captured_file_problem(exc)) from None
        except PlanRejected as exc:
            if not isinstance(exc.component, GpuCluster):
                raise _failed(exc, project) from None
            return _rejected(name, exc, exc.component, recorded, runner, options,
                             pack_config)
        except Exception as exc:   # the program's own failure, in its own words
            raise _failed(exc, project) from None
    findings = run_policies(resources, pack_config)
    if not clusters:
        return program_report(name, resources, findings)
    cluster = clusters[0]
    return build_report(name, cluster.config, cluster, resources,
                        _merged(findings, cluster.plan_findings))


def _rejected(name: str, exc: PlanRejected, cluster: GpuCluster, recorded: list[Registered],
              runner: Callable[[], Any], options: dict[str, Any],
              pack_config: dict[str, Any] | None) -> dict[str, Any]:
    """The component refused before its first child, as it does under `pulumi up`: the
    report holds what was registered, every finding, and what the program would have
    created, as withheld."""
    findings = _merged(run_policies(recorded, pack_config), exc.findings)
    with held_refusals():
        _, withheld = run_program(runner, **options)
    kept = {r.urn for r in recorded}
    return build_report(name, cluster.config, cluster, recorded, findings,
                        withheld=[r for r in withheld if r.urn not in kept])


def _failed(exc: BaseException, project: Project | None) -> Exception:
    from gpuplane.cli.plan.project import ProgramFailed

    if project is None:
        return ProgramFailed(f"gpuplane's program failed: {type(exc).__name__}: {exc}")
    return program_failure(exc, project)


def _merged(found: list[Finding], more: list[Finding]) -> list[Finding]:
    """`found`, then each finding of `more` that says something new."""
    seen = {(f.id, f.message) for f in found}
    return found + [f for f in more if (f.id, f.message) not in seen]


__all__ = ["plan_stack"]
