"""What `GpuCluster` reads beside its `StackConfig`, the same for gpuplane's bundled program
and a user's own: the files captured from the nodes (`baselineFiles`, relative to the
project root), the local charts, and the SSH key (`gpuplane:sshPrivateKey`).

Read by the component itself, so `GpuCluster("gpu", GpuClusterArgs(config=...))` in one's
own program plans and rolls out exactly what the bundled program would from the same
stack: a plan that names captured files is a plan made from them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import pulumi

from gpuplane.config import NAMESPACE, ChartRelease, StackConfig, StackConfigError
from gpuplane.config.baselines import node_baselines
from gpuplane.core.chartsource import local_chart_problem

# Set only by the offline plan (`plain_errors`): it locates bad input in the stack file
# (file:line) itself, so the structured errors go through as they are.
_PLAIN_ERRORS: ContextVar[bool] = ContextVar("gpuplane_plain_errors", default=False)


@contextmanager
def plain_errors() -> Iterator[None]:
    token = _PLAIN_ERRORS.set(True)
    try:
        yield
    finally:
        _PLAIN_ERRORS.reset(token)


def invalid_stack(exc: StackConfigError) -> Exception:
    """Bad input as `pulumi preview`/`up` show it: one clean error naming each key and its
    fix (`pulumi.RunError` is reported as its message alone, no Python traceback); under
    the offline plan, the structured error it locates in the stack file."""
    if _PLAIN_ERRORS.get():
        return exc
    return pulumi.RunError(f"the stack config is invalid (nothing was changed):\n{exc}")


# What a node planned from `GpuClusterArgs.baselines` (not from `baselineFiles`) shows as
# the key and the local copy of each of its files.
GIVEN_KEY = "GpuClusterArgs.baselines"
GIVEN_SOURCE = "given by the program (GpuClusterArgs.baselines)"

# node path -> (stack key, local copy or None for "absent on the node")
Sources = dict[str, tuple[str, str | None]]


@dataclass(frozen=True)
class NodeInputs:
    """The captured files each node is planned from, and where each came from."""

    baselines: Mapping[str, Mapping[str, str]]   # node -> {node path: content}
    sources: dict[str, Sources]                  # node -> {node path: (key, local copy)}


def project_root() -> Path:
    """The project root (Pulumi.yaml's folder), which `baselineFiles` and a local `chart`
    are relative to, as Pulumi and Helm read them when Pulumi runs the program there."""
    return Path(pulumi.get_root_directory() or ".")


def node_inputs(cfg: StackConfig, given: Mapping[str, Mapping[str, str]] | None,
                root: Path) -> NodeInputs:
    """`given` (the program's own `baselines`) wins; else the stack's `baselineFiles`.
    StackConfigError naming every bad key (the local charts' too) otherwise."""
    problems: list[tuple[str, str]] = []
    try:
        check_local_charts(cfg, root)
    except StackConfigError as exc:
        problems += exc.problems
    baselines: Mapping[str, Mapping[str, str]] = {}
    sources: dict[str, Sources] = {}
    if given is not None:
        baselines = given
        sources = {node: {path: (GIVEN_KEY, GIVEN_SOURCE) for path in files}
                   for node, files in given.items()}
    else:
        try:
            baselines = node_baselines(cfg, root)
        except StackConfigError as exc:
            problems += exc.problems
        sources = {node.name: cfg.baseline_files_of(index)
                   for index, node in enumerate(cfg.nodes) if node.name in baselines}
    if problems:
        raise StackConfigError(problems)
    return NodeInputs(baselines, sources)


def ssh_key(given: pulumi.Input[str] | None) -> pulumi.Input[str] | None:
    """The program's own key, else the stack's `gpuplane:sshPrivateKey` secret."""
    if given is not None:
        return given
    return pulumi.Config(NAMESPACE).get_secret("sshPrivateKey")


def missing_key_problem(name: str) -> StackConfigError:
    """The SSH rollout has no key: the stack key to set, and the other way out."""
    return StackConfigError([(
        f"{NAMESPACE}:sshPrivateKey",
        f"GpuCluster {name}: gpuplane:cluster.nodeAccess is ssh and files are to be written, "
        "but no SSH key is set; fix: `pulumi config set --secret gpuplane:sshPrivateKey "
        "< ~/.ssh/id_ed25519` (or pass GpuClusterArgs(private_key=...)), or set "
        "gpuplane:cluster.nodeAccess: pod; nothing was changed")])


def check_local_charts(cfg: StackConfig, root: Path) -> None:
    """A local `chart` (relative to the project root, as Helm reads it when Pulumi runs
    the program there) must be that chart at `chartVersion`; StackConfigError naming the
    key and the fix otherwise."""
    releases: list[tuple[str, ChartRelease]] = (
        [("gpuOperator", cfg.gpu_operator)] if cfg.gpu_operator is not None else [])
    if cfg.device_plugin == "hami":
        releases.append(("hami", cfg.hami))
    if cfg.dra_driver is not None:
        releases.append(("draDriver", cfg.dra_driver))
    problems = []
    for key, section in releases:
        problem = local_chart_problem(section.chart_source, root, section.chart_name,
                                      section.chart_version, f"{key}.chartVersion")
        if problem:
            problems.append((f"{NAMESPACE}:{key}.chart", problem))
    if problems:
        raise StackConfigError(problems)


__all__ = ["GIVEN_KEY", "GIVEN_SOURCE", "NodeInputs", "check_local_charts", "invalid_stack",
           "missing_key_problem", "node_inputs", "plain_errors", "project_root", "ssh_key"]
