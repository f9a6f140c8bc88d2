"""`gpuplane plan`: stack file → the project's program under mocks → policies → report.

The program is the project's own (gpuplane.cli.plan.project): gpuplane's bundled
`__main__.py` or a user's program that builds a `GpuCluster` among its own resources.
A stacks dir outside any Pulumi project runs gpuplane's bundled program.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuplane.cli.plan.engine import Registered, no_full_gc, run_program
from gpuplane.cli.plan.policies import run_policies
from gpuplane.cli.plan.project import Project, find_project, in_dir, program_failure, project_at
from gpuplane.cli.plan.report import build_report, cluster_view, program_report
from gpuplane.config import NAMESPACE, StackConfigError
from gpuplane.config.stackfile import StackFile, load_stack_file, project_root
from gpuplane.containerd.errors import ConfigError
from gpuplane.core.findings import Finding
from gpuplane.policy.collect import cluster_label, named
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
    # The stack file's node tree and the registrations stay alive until the report is
    # built: full collections would re-scan them while the file is read (half of its
    # 0.9 s at 10,000 nodes) and during the policies and the report (half their time at
    # 2000 nodes).
    with no_full_gc():
        # Keys without a namespace are the project's, as the Pulumi CLI reads them.
        stack = load_stack_file(name, stacks_dir, project.name if project else NAMESPACE)
        for warning in stack.warnings:   # keys gpuplane will not read: said, never dropped
            print(f"gpuplane: warning: {warning}", file=sys.stderr)
        if stack.values:   # gpuplane:* keys: checked before the program runs (file:line)
            stack.config()
        report = _plan(name, stack, stacks_dir, pack_config, project)
    # Stack-file warnings in the report too, so `--format json` readers see them.
    report["warnings"] = list(stack.warning_entries)
    return report


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
    with in_dir(project.pwd if project else None):
        findings = run_policies(resources, pack_config)
    if not clusters:
        return program_report(name, resources, findings)
    # Every cluster's own findings; the report's cluster facts and nodes are the first's,
    # and with several clusters `clusters` holds each one's.
    report = build_report(name, clusters[0].config, clusters[0], resources,
                          _with_clusters(findings, clusters))
    if len(clusters) > 1:
        report["clusters"] = [cluster_view(name, c, resources) for c in clusters]
    return report


def _rejected(name: str, exc: PlanRejected, cluster: GpuCluster, recorded: list[Registered],
              runner: Callable[[], Any], options: dict[str, Any],
              pack_config: dict[str, Any] | None) -> dict[str, Any]:
    """The component refused before its first child, as it does under `pulumi up`: the
    report holds what was registered, every finding, and what the program would have
    created, as withheld."""
    # The rest of the program, as it would have run: every GpuCluster in it is judged,
    # those after the refusing one too.
    with held_refusals(), recorded_clusters() as every:
        _, withheld = run_program(runner, **options)
    found = run_policies(recorded, pack_config)
    findings = _with_clusters(found, every) if len(every) > 1 \
        else _merged(found, exc.findings)
    kept = {r.urn for r in recorded}
    return build_report(name, cluster.config, cluster, recorded, findings,
                        withheld=[r for r in withheld if r.urn not in kept])


def _failed(exc: BaseException, project: Project | None) -> Exception:
    from gpuplane.cli.plan.project import ProgramFailed

    if project is None:
        return ProgramFailed(f"gpuplane's program failed: {type(exc).__name__}: {exc}")
    return program_failure(exc, project)


def _merged(found: list[Finding], more: list[Finding], label: str = "") -> list[Finding]:
    """`found`, then each finding of `more` that says something new (with `label`: about
    that cluster, `more` named after it)."""
    if label:
        seen = {(f.id, f.message) for f in found if f.where.startswith(f"{label}: ")}
        return found + [named(f, label) for f in more if (f.id, f.message) not in seen]
    seen = {(f.id, f.message) for f in found}
    return found + [f for f in more if (f.id, f.message) not in seen]


def _with_clusters(found: list[Finding], clusters: list[GpuCluster]) -> list[Finding]:
    """The pack's findings and every GpuCluster's own (its node plans, what only it
    sees); with several clusters, each finding names its cluster, as the pack's do."""
    if len(clusters) == 1:
        return _merged(found, clusters[0].plan_findings)
    for cluster in clusters:
        found = _merged(found, cluster.plan_findings,
                        cluster_label(cluster.pulumi_resource_name))
    return found


__all__ = ["plan_stack"]
