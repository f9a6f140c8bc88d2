"""Capture every node of a stack: read over SSH, compare with the stack, store the copies,
then update the stack file once, after every node has answered."""

from __future__ import annotations

import hashlib
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from gpuplane.capture.record import record_name, record_text
from gpuplane.capture.remote import NodeReport, capture_script, parse_answer
from gpuplane.capture.ssh import Target, run_script
from gpuplane.capture.stackedit import updated_text, write_atomically
from gpuplane.capture.stackkey import KEY as STACK_KEY
from gpuplane.capture.stackkey import StackKeyError, key_file, read_stack_key
from gpuplane.config import NAMESPACE, StackConfig, parse_stack_config
from gpuplane.config.stackfile import StackFile, load_stack_file, project_root
from gpuplane.kube.client import ClusterClient
from gpuplane.rules.kubelet_node import (
    NodeRole,
    StatedDriver,
    node_role,
    restart_unit_note,
    stated_driver,
)
from gpuplane.rules.nodecheck import VersionUnknown, parse_version_output

PARALLEL = 8


@dataclass(frozen=True)
class KubeAccess:
    """The way in without SSH: a capture pod per node through this API client."""

    client: ClusterClient
    namespace: str = "kube-system"
    image: str = "busybox:1.36"
    poll_s: float = 2.0


@dataclass
class NodeResult:
    name: str
    host: str
    version: str = ""
    # node path -> local copy; None: the node has no such file (its top-level config)
    files: dict[str, str | None] = field(default_factory=dict)
    new_copies: int = 0
    missing: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)
    role: NodeRole | None = None          # None: the node did not answer
    cgroup_driver: StatedDriver | None = None
    notes: list[str] = field(default_factory=list)   # worth knowing, not a failure
    # Each absolute BinaryName the files name -> on the node (capture.record).
    binaries: dict[str, bool] = field(default_factory=dict)
    record: Path | None = None    # where that record was written


@dataclass
class CaptureResult:
    stack: StackFile
    nodes: list[NodeResult]
    out_dir: Path
    stack_changed: bool = False

    @property
    def failed(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.problems]


class CaptureError(Exception):
    """The stack cannot be captured at all (bad input): the message says which key."""


def copy_name(node_path: str, text: str) -> str:
    """`<sha256[:12]>-<basename>`: nodes with the same content share one copy, and a rerun
    finds the copy it wrote before."""
    return f"{hashlib.sha256(text.encode()).hexdigest()[:12]}-{posixpath.basename(node_path)}"


def disagreements(cfg: StackConfig, report: NodeReport) -> tuple[str, list[str]]:
    """(the containerd version found, every disagreement with the stack, naming its key).

    The node's role is not compared: the stack has no per-node role key (the agent picks
    the active unit on the node itself), so capture only reports it."""
    found, problem = version_problem(cfg, report.version_output, report.distros)
    problems = [problem] if problem else []
    stated = stated_driver(cfg.cluster.distro, report.kubelet_files, report.kubelet_unreadable)
    driver = stated.driver
    if driver and driver != cfg.kubelet_cgroup_driver:
        how = "set" if cfg.cluster.kubelet_cgroup_driver else "assumed for the distribution"
        problems.append(f"{NAMESPACE}:cluster.kubeletCgroupDriver is {cfg.kubelet_cgroup_driver} "
                        f"({how}) but the node's kubelet uses {driver} ({stated.source}); "
                        f"set cluster.kubeletCgroupDriver: {driver}")
    return found, problems


def version_problem(cfg: StackConfig, output: str,
                    distros: tuple[str, ...] = ()) -> tuple[str, str | None]:
    """(the version found, a problem naming the stack key, or None)."""
    binary = cfg.profile.containerd_binary
    if output.startswith("FAILED:"):
        stack_distro = cfg.cluster.distro.value
        if distros and stack_distro not in distros:
            return "", (f"{NAMESPACE}:cluster.distro is {stack_distro} but the node has no "
                        f"{binary}; it has the containerd of {', '.join(distros)}: set "
                        f"cluster.distro: {distros[0]}")
        return "", (f"`{binary} --version` failed on the node ({output[7:].strip()}); is "
                    f"this a {stack_distro} node? ({NAMESPACE}:cluster.distro)")
    try:
        found = parse_version_output(output)
    except (VersionUnknown, ValueError) as exc:
        return "", f"`{binary} --version`: {exc}"
    shown = output.split()[2] if len(output.split()) > 2 else str(found)
    if found != cfg.containerd:
        return shown, (f"{NAMESPACE}:cluster.containerdVersion is "
                       f"\"{cfg.cluster.containerd_version}\" but the node runs containerd "
                       f"{shown} (`{binary} --version`); set cluster.containerdVersion: "
                       f"\"{found}\" or upgrade the node")
    return shown, None


def platform_problems(cfg: StackConfig, client: ClusterClient, node: str,
                      files: dict[str, str]) -> list[str]:
    """The node's platform (its Node object: labels, osImage, providerID) against
    `cluster.platform`, naming the value to set; the default runtime of its captured
    containerd config tells the EKS AL2023 NVIDIA AMI from the standard one."""
    from gpuplane.containerd import ConfigError, MemoryFiles, effective_config
    from gpuplane.kube.client import ApiError
    from gpuplane.platforms.detect import detect_platform

    try:
        obj = client.get(f"/api/v1/nodes/{node}")
    except ApiError as exc:
        return [f"cannot read Node {node} to check {NAMESPACE}:cluster.platform: {exc}"]
    default = None
    if cfg.profile.config_path in files:
        try:
            default = effective_config(cfg.profile.config_path, MemoryFiles(files),
                                       cfg.containerd).default_runtime
        except ConfigError:
            default = None
    configured = cfg.cluster.platform.value if cfg.cluster.platform else None
    advice = detect_platform(obj, default).advice(configured)
    return [advice] if advice else []


def capture_stack(name: str, stacks_dir: Path, identity: Path | None = None,
                  ssh_config: Path | None = None, out_dir: Path | None = None,
                  remote_root: str = "", kube: KubeAccess | None = None,
                  use_agent: bool = False) -> CaptureResult:
    """Capture every node over SSH, or through the Kubernetes API when `kube` is given;
    `remote_root` (may hold `{node}`) stands in for / on the nodes (SSH only).

    Over SSH without `identity`, the key is the stack's `gpuplane:sshPrivateKey` secret
    read through the Pulumi CLI (capture.stackkey), unless `use_agent` leaves it to ssh's
    agent and ~/.ssh keys, or the stack has no such secret."""
    stack = load_stack_file(name, stacks_dir)
    cfg = stack.config()
    if not cfg.nodes:
        raise CaptureError(f"{stack.path}: {NAMESPACE}:nodes lists no nodes; list the GPU "
                           "nodes to capture (name: the Kubernetes node name)")
    key: AbstractContextManager[Path | None] = nullcontext(identity)
    if kube is None and cfg.cluster.node_access != "ssh":
        raise CaptureError(f"{stack.path}: {NAMESPACE}:cluster.nodeAccess is "
                           f"{cfg.cluster.node_access}: capture over SSH needs ssh; capture "
                           "through the Kubernetes API: --via kubernetes, or set "
                           "cluster.nodeAccess: ssh with the nodes' hosts")
    if kube is None:
        if identity is not None and not identity.is_file():
            raise CaptureError(f"--identity {identity}: no such file")
        if identity is None and not use_agent and STACK_KEY in stack.secret_keys:
            try:
                key = key_file(read_stack_key(name, project_root(stacks_dir)))
            except StackKeyError as exc:
                raise CaptureError(f"{stack.path}: {exc}") from None
    with key as ident:
        nodes = _capture_nodes(cfg, remote_root, kube, ident, ssh_config)
    return _store(stack, cfg, name, nodes, stacks_dir, out_dir)


def _capture_nodes(cfg: StackConfig, remote_root: str, kube: KubeAccess | None,
                   identity: Path | None, ssh_config: Path | None) -> list[NodeResult]:
    """Every node's answer, read in parallel, compared with the stack; nothing stored."""
    if kube is not None:
        def runner(index: int, script: str) -> tuple[str | None, str]:
            from gpuplane.capture.pod import run_in_pod

            return run_in_pod(kube.client, cfg.nodes[index].name, script,
                              namespace=kube.namespace, image=kube.image, poll_s=kube.poll_s)
    else:
        def runner(index: int, script: str) -> tuple[str | None, str]:
            node = cfg.nodes[index]
            target = Target(host=node.host or node.name, user=node.user or cfg.ssh.user,
                            port=node.port or cfg.ssh.port, sudo=cfg.ssh.sudo)
            return run_script(target, script, identity, ssh_config)
    script_for: dict[str, str] = {}

    def one(index: int) -> NodeResult:
        node = cfg.nodes[index]
        result = NodeResult(node.name, node.name if kube else node.host or node.name)
        root = "" if kube else remote_root.replace("{node}", node.name)
        script = script_for.setdefault(root, capture_script(cfg.profile, root,
                                                            in_pod=kube is not None))
        answer, why = runner(index, script)
        if answer is None:
            result.problems.append(why)
            return result
        report: NodeReport = parse_answer(answer)
        result.problems += report.problems
        result.missing = report.missing
        result.version, problems = disagreements(cfg, report)
        result.problems += problems
        result.cgroup_driver = stated_driver(cfg.cluster.distro, report.kubelet_files,
                                             report.kubelet_unreadable)
        result.role = node_role(cfg.cluster.distro, report.units)
        note = restart_unit_note(cfg.profile.restart_units, result.role)
        if note:
            result.notes.append(note)
        result.files = dict(report.files)   # node path -> text until stored
        result.binaries = dict(report.binaries)
        if kube is not None:
            result.problems += platform_problems(cfg, kube.client, node.name,
                                                 dict(report.files))
        return result

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(one, range(len(cfg.nodes))))


def _store(stack: StackFile, cfg: StackConfig, name: str, nodes: list[NodeResult],
           stacks_dir: Path, out_dir: Path | None) -> CaptureResult:
    """Write the new copies, then the stack file once (only captured nodes change)."""
    out = out_dir or stacks_dir / "captured" / name
    root = project_root(stacks_dir)
    per_node: dict[int, dict[str, str | None]] = {}
    for index, node in enumerate(nodes):
        if node.problems:
            node.files = {}
            continue
        stored: dict[str, str | None] = {}
        for node_path, text in node.files.items():
            if text is None:
                continue
            copy = out / copy_name(node_path, text)
            if not copy.is_file():
                out.mkdir(parents=True, exist_ok=True)
                _write_new(copy, text)
                node.new_copies += 1
            stored[node_path] = Path(os.path.relpath(copy.resolve(), root.resolve())).as_posix()
        if cfg.profile.config_path in node.missing:
            # No top-level config: containerd runs on its defaults. Recorded as null, so
            # the plan starts from that instead of gpuplane's model of the distribution.
            stored[cfg.profile.config_path] = None
        node.files = stored
        per_node[index] = stored
        # Whether the binaries the files name exist: the copies alone cannot say.
        out.mkdir(parents=True, exist_ok=True)
        node.record = out / record_name(node.name)
        text = record_text(node.name, node.binaries)
        if not node.record.is_file() or node.record.read_text(encoding="utf-8") != text:
            _write_new(node.record, text)
    result = CaptureResult(stack, nodes, out)
    if per_node:
        text = stack.path.read_text(encoding="utf-8")
        new = updated_text(text, per_node, len(cfg.nodes))
        _still_valid(stack, new)
        result.stack_changed = write_atomically(stack.path, new)
    return result


def _write_new(path: Path, text: str) -> None:
    """A copy appears whole or not at all (written aside, then renamed)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _still_valid(stack: StackFile, text: str) -> None:
    """The edited stack must still be a valid stack before it replaces the old one."""
    import yaml

    data = yaml.safe_load(text)["config"]
    values = {k.partition(":")[2]: v for k, v in data.items()
              if k.startswith(f"{NAMESPACE}:")}
    for key in stack.secret_keys:
        values[key.partition(":")[2]] = "<secret>"
    parse_stack_config(values)


__all__ = ["CaptureError", "CaptureResult", "KubeAccess", "NodeResult", "capture_stack",
           "copy_name"]
