"""Combination checks for settings the rest of the stack turns off: a block or key that
nothing would read (`gpuplane:hami` without HAMi, `gpuplane:nodePod` without pod access,
SSH settings without SSH access, a rollout without node access) is an error naming the
key and the fix, so nothing the user wrote is dropped in silence. The StackConfig
registers them with its other combination checks (gpuplane.config.stack)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set
from typing import TYPE_CHECKING

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from gpuplane.config.errors import Problem, stack_key

if TYPE_CHECKING:
    from gpuplane.config.stack import StackConfig

UnusedCheck = Callable[["StackConfig"], Iterator[Problem]]
UNUSED_CHECKS: list[tuple[tuple[str, ...], UnusedCheck]] = []
"""(the StackConfig fields a check reads, the check)."""


def _unused(*needs: str) -> Callable[[UnusedCheck], UnusedCheck]:
    def register(run: UnusedCheck) -> UnusedCheck:
        UNUSED_CHECKS.append((needs, run))
        return run
    return register


def _at(path: str, message: str) -> Problem:
    return Problem(stack_key(path), message)


@_unused("device_plugin", "hami")
def hami_unused(cfg: StackConfig) -> Iterator[Problem]:
    """A `gpuplane:hami` block HAMi never reads (it is not installed) is an error, as
    `hami.values` is: nothing the user wrote is dropped in silence."""
    if cfg.device_plugin == "hami" or "hami" not in cfg.model_fields_set:
        return
    if cfg.hami.values:
        yield _at("hami.values", f"HAMi is not installed (devicePlugin is "
                                 f"{cfg.device_plugin}), so these raw values would be "
                                 "ignored; set devicePlugin: hami or remove hami.values")
    written = keys_written(cfg.hami, skip={"values"})
    if written:
        yield _at("hami", f"{', '.join(written)} set, but HAMi is not installed (devicePlugin "
                          f"is {cfg.device_plugin}), so they would be ignored; set "
                          "gpuplane:devicePlugin: hami or remove gpuplane:hami")


@_unused("cluster", "node_pod")
def node_pod_unused(cfg: StackConfig) -> Iterator[Problem]:
    """`gpuplane:nodePod` configures the agent's pods, which only `nodeAccess: pod` runs."""
    written = keys_written(cfg.node_pod) if "node_pod" in cfg.model_fields_set else []
    if written and cfg.cluster.node_access != "pod":
        yield _at("nodePod", f"{', '.join(written)} set, but cluster.nodeAccess is "
                             f"{cfg.cluster.node_access}, which runs no node-agent pods, so "
                             "they would be ignored; set gpuplane:cluster.nodeAccess: pod or "
                             "remove gpuplane:nodePod")


@_unused("cluster", "ssh", "ssh_private_key", "rollout", "nodes")
def node_access_unused(cfg: StackConfig) -> Iterator[Problem]:
    """SSH settings (`gpuplane:ssh`, a node's `user`/`port`) without `nodeAccess: ssh`, a
    rollout without node access: read by nothing (`nodes capture` over SSH needs
    `nodeAccess: ssh` too)."""
    access = cfg.cluster.node_access
    if access != "ssh":
        unused = f"cluster.nodeAccess is {access}, which reaches no node over SSH"
        written = keys_written(cfg.ssh) if "ssh" in cfg.model_fields_set else []
        if written:
            yield _at("ssh", f"{', '.join(written)} set, but {unused}, so they would be "
                             "ignored; set gpuplane:cluster.nodeAccess: ssh or remove "
                             "gpuplane:ssh")
        for i, node in enumerate(cfg.nodes):
            for key in ("user", "port"):
                if key in node.model_fields_set:
                    yield _at(f"nodes[{i}].{key}", f"set, but {unused}, so it would be "
                              f"ignored; remove {key} from node {node.name} or set "
                              "gpuplane:cluster.nodeAccess: ssh")
        if cfg.ssh_private_key is not None:
            yield _at("sshPrivateKey", f"set, but cluster.nodeAccess is {access}, which "
                                       "reaches no node over SSH, so the key is never used; "
                                       "set gpuplane:cluster.nodeAccess: ssh or remove it "
                                       "(`pulumi config rm gpuplane:sshPrivateKey`)")
    written = keys_written(cfg.rollout) if "rollout" in cfg.model_fields_set else []
    if access == "none" and written:
        yield _at("rollout", f"{', '.join(written)} set, but cluster.nodeAccess is none: "
                             "gpuplane changes no node files, so nothing is rolled out; set "
                             "gpuplane:cluster.nodeAccess: ssh or pod, or remove "
                             "gpuplane:rollout")


def keys_written(section: BaseModel, skip: Set[str] = frozenset()) -> list[str]:
    """The keys of `section` the stack wrote, as spelt there (camelCase)."""
    fields = type(section).model_fields
    return [fields[name].alias or to_camel(name)
            for name in sorted(section.model_fields_set - skip)]


__all__ = ["UNUSED_CHECKS", "keys_written"]
