"""The node agent seen from Python: its script, the plan it applies, and the commands that
run it on a node.

The agent (components/gpuplane/data/node-agent.sh) is plain POSIX sh so that a node needs nothing
gpuplane installs. It ships as that one file, joined from its parts in
components/gpuplane/data/agent/ (:mod:`gpuplane.agent.parts`). Pulumi runs it through
pulumi-command `remote.Command`: create and update pipe :func:`apply_stdin` into
:func:`apply_command`, delete runs :func:`restore_command`. The plan travels on stdin, never
in remote environment variables (sshd drops those unless configured), and file contents
travel as plain quoted heredocs, so a `pulumi preview` diff of the stdin shows a file
change line by line.

Each plan also carries its *bases*: the sha256 of every node file it was made from (the
files gpuplane writes and the top-level config). The agent refuses a node whose original
files differ, since writing the plan would replace settings it never saw.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpuplane.agent.parts import SCRIPT
from gpuplane.core.findings import Severity
from gpuplane.distros import rancher_render
from gpuplane.distros.docker_daemon import RUNTIME_NAME
from gpuplane.distros.profiles import EditMode
from gpuplane.plan.layout import renders_dropins
from gpuplane.plan.node import NodeContainerdPlan, ToolkitMode

AGENT_PATH = "/var/lib/gpuplane/agent.sh"
"""Where the agent installs a copy of itself, so that restore runs without stdin."""

_SCRIPT = SCRIPT  # the joined agent, checked in (tests/pure/test_agent_parts.py)
_RUNTIME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
ABSENT = "absent"  # a base the plan assumed missing, on the agent's stdin
BASE_TEXT_HEAD = "# gpuplane: the node's original, as this plan was made from it:"
BASE_TEXT_LINE = "#|"


@cache
def agent_source() -> str:
    """The agent script, as packaged (read once: every node's stdin embeds it)."""
    return _SCRIPT.read_text(encoding="utf-8")


AGENT_DIR = "/var/lib/gpuplane"
"""The agent's state directory on a node; the installed agents live here by digest."""


def agent_script_path() -> Path:
    """The packaged agent (the file a copy resource uploads as a file asset)."""
    return _SCRIPT


@cache
def agent_digest() -> str:
    """sha256 of the agent: names its installed copy and is checked before it runs."""
    return hashlib.sha256(agent_source().encode()).hexdigest()


def agent_file(state_dir: str = AGENT_DIR) -> str:
    """Where the node command's program installs this version of the agent on a node."""
    return f"{state_dir}/agent-{agent_digest()[:16]}.sh"


def staged_agent_path() -> str:
    """Where the upload lands, relative to the SSH user's home (SFTP paths and a remote
    command's working directory both start there): a user who needs sudo cannot write
    AGENT_DIR, so the node command's program copies it in as root."""
    return f".gpuplane-agent-{agent_digest()[:16]}.sh"


def _install_vars(state_dir: str, staged: str) -> str:
    """Shell assignments :func:`_install_lines` reads; `state_dir` is a shell word (a
    quoted path, or `"$var"`)."""
    q = shlex.quote
    return (f"gp_d={agent_digest()} gp_state={state_dir} gp_up={q(staged)} "
            f"gp_dst={state_dir}/{Path(agent_file()).name}")


def _install_lines() -> list[str]:
    """Shell lines (run as root, after :func:`_install_vars`, `set -eu`) that install the
    uploaded agent atomically.

    They copy the upload first and check the sha256 of their own copy (not of the upload,
    which the SSH user could still change), then rename it into place and remove other
    versions' copies and uploads, and the temp copy of an install that was killed.
    """
    return [
        "umask 077", 'mkdir -p "$gp_state"',
        't=$(mktemp "$gp_state/.agent.XXXXXX")', """trap 'rm -f "$t"' EXIT""",
        'cat "$gp_up" >"$t"', 's=$(sha256sum <"$t")',
        '[ "${s%% *}" = "$gp_d" ] || { echo "gpuplane-agent: $gp_up is not agent $gp_d" >&2; '
        "exit 2; }",
        'mv -f "$t" "$gp_dst"',   # 0600: run by `sh FILE` and `. FILE`
        # other versions, and temp copies of an install that was killed (no trap ran)
        'for o in "$gp_state"/agent-*.sh "$gp_state"/.agent.* .gpuplane-agent-*.sh; do '
        'case $o in "$gp_dst" | "$gp_up") ;; *) rm -f "$o" ;; esac; done',
    ]


def install_script(state_dir: str = AGENT_DIR, staged: str | None = None) -> str:
    """The install as a script of its own (run as root in the SSH user's home): what the
    node command's program runs first when this version of the agent is not installed
    yet. `state_dir` and `staged` are parameters for tests."""
    return "; ".join(["set -eu",
                      _install_vars(shlex.quote(state_dir), staged or staged_agent_path()),
                      *_install_lines()])


def uninstall_script(state_dir: str = AGENT_DIR, staged: str | None = None) -> str:
    """Remove this version's installed agent and its upload once gpuplane manages nothing
    on the node (no applied plan, no masked unit left in `state_dir`): what the node
    command's delete runs after the restore. A restore skipped for a successor's plan
    (`--plan-id`) keeps them, since the successor runs that agent."""
    q = shlex.quote
    return (f"if [ ! -f {q(state_dir + '/state')} ] && [ ! -f {q(state_dir + '/units')} ]; then "
            f"rm -f {q(agent_file(state_dir))} {q(staged or staged_agent_path())}; "
            f"rmdir {q(state_dir)} 2>/dev/null || :; fi")


@cache
def _agent_function() -> str:
    """The agent as the shell function `gp_self` that prints it (same for every node)."""
    source = agent_source()
    delim = _delimiter("GPUPLANE_AGENT", source)
    return "\n".join(["gp_self() {", f"cat <<'{delim}'", source + delim, "}"])


@dataclass(frozen=True)
class AgentPlan:
    """What the agent needs from a node plan: where containerd lives, how to restart and
    check it, the files to write and what the merged config must keep."""

    distro: str
    containerd_version: str           # X.Y the plan was made for; the agent compares
    config_path: str                  # the top-level file containerd reads
    template_path: str | None         # template distros: the file the distro renders
    edit_paths: tuple[str, ...]       # files (or dirs, ending in /) gpuplane may write
    socket: str
    containerd_binary: str            # where the distribution puts containerd (first try)
    restart_command: str              # empty when the agent picks one of restart_units
    files: dict[str, str] = field(default_factory=dict)  # node path -> content
    expected_runtimes: frozenset[str] = frozenset({"runc"})
    expected_default: str | None = None  # None: the default runtime must not change
    runtime_name: str | None = None      # the nvidia runtime (restore checks it is no default)
    # node path -> sha256 of the original the plan was made from (None: planned as absent);
    # empty for plans made before bases existed: the agent then checks none
    bases: dict[str, str | None] = field(default_factory=dict)
    # The captured originals among them (not gpuplane's distro model): sent as comments so
    # that a policy judges the files against what the node has, not against the model.
    base_texts: dict[str, str] = field(default_factory=dict)
    # Further places to look for containerd, tried in order after containerd_binary.
    containerd_alternatives: tuple[str, ...] = ()
    # systemd units of which the one active on the node is restarted (RKE2, K3s, k0s: the
    # unit depends on the node's role); empty: run restart_command.
    restart_units: tuple[str, ...] = ()
    # k0s: the distribution renders the config containerd reads from gpuplane's drop-in at
    # its restart, so nothing previews the merged config: the agent checks that containerd
    # reads each written file, restarts, then checks the merged config (rolling back).
    rendered: bool = False
    # Docker's daemon.json (`gpuplane:docker`): one of `files`, checked with dockerd and
    # applied with its own single restart, never with containerd's.
    docker_config: str | None = None
    docker_restart: str = ""
    docker_runtime: str | None = None    # the runtime `docker info` must list afterwards
    # Host systemd units stopped, disabled and masked (85-units.sh; restore puts them back).
    mask_units: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.docker_config is not None and (self.docker_config not in self.files
                                               or not self.docker_restart):
            raise ValueError("agent plan: Docker's config must be one of the files, with a "
                             "restart command")
        for unit in (*self.restart_units, *self.mask_units):
            if not _UNIT.match(unit):
                raise ValueError(f"agent plan: unit {unit!r} must match {_UNIT.pattern}")
        if not self.restart_units and not self.restart_command:
            raise ValueError("agent plan: needs a restart command or restart units")
        for path in (self.config_path, self.socket, *self.files, *self.bases,
                     self.containerd_binary, *self.containerd_alternatives):
            if not path.startswith("/") or any(c in path for c in "\t\n"):
                raise ValueError(f"agent plan: {path!r} must be an absolute path without "
                                 "tabs or newlines")
        for path, text in self.base_texts.items():
            if self.bases.get(path) != hashlib.sha256(text.encode()).hexdigest():
                raise ValueError(f"agent plan: the text of base {path} does not match its "
                                 "sha256")
        for path, digest in self.bases.items():
            if digest is not None and not _SHA256.match(digest):
                raise ValueError(f"agent plan: the base of {path} must be a sha256 (64 "
                                 f"lowercase hex digits) or None (absent), got {digest!r}")
        for name in (*self.expected_runtimes, self.expected_default, self.runtime_name):
            if name is not None and not _RUNTIME_NAME.match(name):
                raise ValueError(f"agent plan: runtime name {name!r} must match "
                                 f"{_RUNTIME_NAME.pattern}")

    @property
    def plan_id(self) -> str:
        """A digest of the whole plan: the agent records it, restore --plan-id compares it."""
        data: dict[str, Any] = {
            "distro": self.distro, "containerd_version": self.containerd_version,
            "config_path": self.config_path, "template_path": self.template_path,
            "edit_paths": list(self.edit_paths), "socket": self.socket,
            "containerd_binary": self.containerd_binary,
            "restart_command": self.restart_command, "files": self.files,
            "expected_runtimes": sorted(self.expected_runtimes),
            "expected_default": self.expected_default, "runtime_name": self.runtime_name,
        }
        if self.bases:  # a plan without bases keeps the id it always had
            data["bases"] = self.bases
        if self.containerd_alternatives:
            data["containerd_alternatives"] = list(self.containerd_alternatives)
        if self.restart_units:
            data["restart_units"] = list(self.restart_units)
        if self.rendered:
            data["rendered"] = True
        if self.docker_config:
            data["docker"] = [self.docker_config, self.docker_restart, self.docker_runtime]
        if self.mask_units:
            data["mask_units"] = list(self.mask_units)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def agent_plan(plan: NodeContainerdPlan) -> AgentPlan:
    """The agent's view of `plan`. A plan with error findings is never rolled out.

    Only what gpuplane's own files guarantee is promised: in operator mode the nvidia
    runtime (and a default switch to it) arrives later from the toolkit, so the agent
    checks runc and an unchanged default; in host mode it also checks the nvidia runtime
    and, with `nvidiaDefault`, that nvidia became the default.
    """
    errors = [f for f in plan.findings if f.severity is Severity.ERROR]
    if errors:
        listed = "; ".join(f"{f.id} {f.where}: {f.message}" for f in errors)
        raise ValueError(f"the node plan has errors and cannot be applied: {listed}")
    profile, options = plan.profile, plan.options
    if profile.edit_mode is EditMode.TEMPLATE:
        edit = profile.edit_path(plan.version)
        template: str | None = edit
        edits: tuple[str, ...] = (edit,)
        if profile.detects_nvidia_runtime:  # RKE2/K3s: also their drop-in dirs
            edits += tuple(rancher_render.dropin_dir(edit, v) + "/" for v in (2, 3))
    else:
        template = None
        assert profile.dropin_dir
        edits = (profile.config_path, profile.dropin_dir.rstrip("/") + "/")
    host = options.toolkit is ToolkitMode.HOST
    files, bases = dict(plan.files), dict(plan.bases)
    base_texts = {path: text for path, text in plan.baseline.items()
                  if path in plan.bases and profile.baseline(plan.version).get(path) != text}
    docker = plan.docker
    if docker is not None:
        files[docker.path] = docker.text
        edits += (docker.path,)
        bases[docker.path] = None if docker.original is None else _sha(docker.original)
        if docker.original is not None:
            base_texts[docker.path] = docker.original
    return AgentPlan(
        distro=profile.name.value,
        containerd_version=str(plan.version),
        config_path=profile.config_path,
        template_path=template,
        edit_paths=edits,
        socket=profile.socket,
        containerd_binary=profile.containerd_binaries[0],
        containerd_alternatives=profile.containerd_binaries[1:],
        restart_command="" if profile.restart_units else profile.restart_command,
        restart_units=profile.restart_units,
        files=files,
        expected_runtimes=frozenset({"runc", options.runtime_name} if host else {"runc"}),
        expected_default=options.runtime_name if host and options.nvidia_default else None,
        runtime_name=None if options.toolkit is ToolkitMode.NONE else options.runtime_name,
        bases=bases,
        rendered=renders_dropins(profile, plan.baseline),
        base_texts=base_texts,
        docker_config=docker.path if docker else None,
        docker_restart=docker.restart_command if docker else "",
        docker_runtime=RUNTIME_NAME if docker else None,
        mask_units=options.mask_units,
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _delimiter(prefix: str, text: str) -> str:
    """A heredoc delimiter no line of `text` equals (derived from its digest, then checked)."""
    delim = f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    lines = set(text.splitlines())
    while delim in lines:
        delim += "_"
    return delim


def _heredoc(text: str) -> tuple[str, bool]:
    """(body, final newline?) for a quoted heredoc that reproduces `text` exactly."""
    if text == "" or text.endswith("\n"):
        return text, True
    return text + "\n", False


def apply_stdin(plan: AgentPlan) -> str:
    """The self-contained program to pipe into :func:`apply_command`: the agent plus the
    plan (tests, the CLI, one-off runs; Pulumi sends :func:`plan_stdin` instead).

    The agent sits in a function so that it can also install itself at AGENT_PATH; each
    base is one `gp_plan base '<sha256|absent> <path>'` line; each planned file follows
    verbatim in a quoted heredoc with its sha256, which the agent verifies before it
    touches anything.
    """
    return "\n".join([
        *_plan_header(plan),
        _agent_function(),
        "GP_EMBEDDED=1", 'eval "$(gp_self)"', 'gp_begin "$@"',
        *_plan_lines(plan)]) + "\n"


def plan_stdin(plan: AgentPlan) -> str:
    """The lean program Pulumi pipes into :func:`apply_command`: only the plan, run by the
    agent installed at :func:`agent_file` (checked by its sha256), which it installs first
    from the upload when this version is not there yet.

    Pulumi keeps every resource's inputs in its state, once per node: the agent (tens of
    KB, the same on every node) travels once per node and agent version as a file asset
    (state holds its path and hash), so a node's command holds only what differs per node.
    `--root DIR` (tests, chroots) is honoured for the agent's path as for everything else.
    """
    return "\n".join([*_plan_header(plan), *_loader(), *_plan_lines(plan)]) + "\n"


def _loader() -> list[str]:
    """:func:`plan_stdin`'s lines between the header and the plan (the same in every
    program): find or install the agent by its digest and start it."""
    return [
        "GP_EMBEDDED=1 gp_r= gp_root=",
        'for gp_a; do [ "$gp_r" = --root ] && gp_root=$gp_a; '
        'case $gp_a in --root=*) gp_root=${gp_a#*=} ;; esac; gp_r=$gp_a; done',
        _install_vars(f'"${{gp_root%/}}{AGENT_DIR}"', staged_agent_path()),
        "GP_AGENT_FILE=$gp_dst",
        'gp_ok() { gp_s=$(sha256sum 2>/dev/null <"$gp_dst") || gp_s=; [ "${gp_s%% *}" = $gp_d ]; }',
        # First run of this agent version on the node: install the upload (the copy
        # resource put it in the SSH user's home, this program's working directory).
        f"gp_ok || [ ! -f \"$gp_up\" ] || ( {'; '.join(['set -eu', *_install_lines()])} ) "
        "|| exit 2",
        'gp_ok || { echo "gpuplane-agent: no agent at $gp_dst (nor its upload $gp_up)" >&2; '
        "exit 2; }",
        '. "$GP_AGENT_FILE"',
        'gp_self() { cat -- "$GP_AGENT_FILE"; }',
        'gp_begin "$@"',
    ]


def embedded_program(program: str) -> str:
    """A :func:`plan_stdin` program made self-contained (the agent embedded as in
    :func:`apply_stdin`): what the node agent's pod runs (`nodeAccess: pod`), which has no
    upload on the node to install from. The plan part is kept as is."""
    loader = "\n".join(_loader())
    if program.count(loader) != 1:
        raise ValueError("not a node agent program (plan_stdin): its loader is missing")
    return program.replace(loader, "\n".join(
        [_agent_function(), "GP_EMBEDDED=1", 'eval "$(gp_self)"', 'gp_begin "$@"']))


def _plan_header(plan: AgentPlan) -> list[str]:
    return [
        "#!/bin/sh",
        f"# gpuplane node agent: apply plan {plan.plan_id} ({plan.distro}, containerd "
        f"{plan.containerd_version}, {plan.config_path}); run as `sh -s -- apply`.",
    ]


def _plan_lines(plan: AgentPlan) -> list[str]:
    """The plan as agent calls: settings, bases (with captured originals as comments), the
    files as quoted heredocs, then `gp_end`."""
    q = shlex.quote
    settings: list[tuple[str, str | None]] = [
        ("id", plan.plan_id),
        ("distro", plan.distro),
        ("containerd_version", plan.containerd_version),
        ("config", plan.config_path),
        ("template", plan.template_path),
        ("rendered", "1" if plan.rendered else None),
        ("socket", plan.socket),
        *(("containerd", p) for p in (plan.containerd_binary, *plan.containerd_alternatives)),
        ("restart", plan.restart_command),
        *(("unit", u) for u in plan.restart_units),
        *(("edit", p) for p in plan.edit_paths),
        *(("runtime", r) for r in sorted(plan.expected_runtimes)),
        ("default", plan.expected_default),
        ("nvidia", plan.runtime_name),
        *(("base", f"{digest or ABSENT} {path}") for path, digest in sorted(plan.bases.items())),
        ("docker_config", plan.docker_config),
        ("docker_restart", plan.docker_restart),
        ("docker_runtime", plan.docker_runtime),
        *(("mask_unit", u) for u in plan.mask_units),
    ]
    out = [f"gp_plan {key} {q(value)}" for key, value in settings if value]
    for path in sorted(plan.base_texts):
        # Shell comments: the agent needs only the sha256; reviewers and policies see
        # what the plan was made from.
        out.append(f"{BASE_TEXT_HEAD} {q(path)}")
        out += [BASE_TEXT_LINE + line for line in plan.base_texts[path].split("\n")]
    for path in sorted(plan.files):
        text = plan.files[path]
        digest = hashlib.sha256(text.encode()).hexdigest()
        delim = _delimiter("GPUPLANE_EOF", text)
        body, newline = _heredoc(text)
        out.append(f"gp_file {q(path)} {digest} {int(newline)} <<'{delim}'")
        out.append(body + delim)
    out.append("gp_end")
    return out


def _sudo(sudo: bool) -> str:
    return "sudo -n " if sudo else ""


def apply_command(sudo: bool) -> str:
    """Run the program on stdin (:func:`apply_stdin`) as root."""
    return f"{_sudo(sudo)}sh -s -- apply"


@cache   # one text per plan, however many nodes run it
def restore_command(sudo: bool, plan_id: str | None = None) -> str:
    """Undo gpuplane's containerd changes with the installed agent (a no-op if none), then,
    when no plan is left applied, remove the agent's install and upload
    (:func:`uninstall_script`). A failed restore exits with the agent's code and removes
    nothing.

    With `plan_id`, only if that plan is still the one applied: Pulumi runs a replaced
    resource's delete after its successor's create, which must not be undone.
    """
    return f"{_sudo(sudo)}sh -c {shlex.quote(restore_script(plan_id))}"


def restore_script(plan_id: str | None = None, *, root: str = "",
                   agent_args: tuple[str, ...] = ()) -> str:
    """The shell script :func:`restore_command` runs (the node agent's pod runs it too).
    `root` and `agent_args` are for sandboxes (tests, benchmarks): the node's / and the
    agent's extra options (`--root` and the like)."""
    q = shlex.quote
    agent = q(root.rstrip("/") + AGENT_PATH)
    args = f" --plan-id {q(plan_id)}" if plan_id else ""
    args += "".join(f" {q(a)}" for a in agent_args)
    return (f"if [ -f {agent} ]; then sh {agent} restore{args} || exit $?; "
            "else echo 'gpuplane-agent: nothing to restore' >&2; fi; "
            f"{uninstall_script(root.rstrip('/') + AGENT_DIR)}")


def status_command(sudo: bool) -> str:
    """Print the node's effective runtimes and config digest as one JSON object."""
    return f"{_sudo(sudo)}sh -c {shlex.quote(status_script())}"


def status_script(*, root: str = "", agent_args: tuple[str, ...] = ()) -> str:
    """The shell script :func:`status_command` runs (the node agent's pod runs it at
    `pulumi refresh`): the installed agent's `status` (drift, drifted files), or
    `applied: false` when no agent is installed. `root` and `agent_args` as for
    :func:`restore_script`."""
    agent = shlex.quote(root.rstrip("/") + AGENT_PATH)
    args = "".join(f" {shlex.quote(a)}" for a in agent_args)
    return (f"if [ -f {agent} ]; then exec sh {agent} status{args}; fi; "
            """echo '{"mode": "status", "applied": false}'""")


__all__ = [
    "AGENT_DIR",
    "AGENT_PATH",
    "AgentPlan",
    "agent_digest",
    "agent_file",
    "agent_plan",
    "agent_script_path",
    "agent_source",
    "apply_command",
    "apply_stdin",
    "embedded_program",
    "install_script",
    "plan_stdin",
    "restore_command",
    "restore_script",
    "staged_agent_path",
    "status_command",
    "status_script",
    "uninstall_script",
]
