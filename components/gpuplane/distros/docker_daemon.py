"""Docker's nvidia runtime: the new `/etc/docker/daemon.json` of a node, planned from the
one it has (or none).

GPU hosts often run Docker beside Kubernetes (NIM containers, development), and Docker
reaches the GPUs through its own `runtimes` table, not containerd's. This module is pure:
text in, text out, so the plan shows the exact bytes the node agent writes, and a second
plan over its own result changes nothing.

The entry is the one `nvidia-ctk runtime configure --runtime=docker` writes
(NVIDIA/nvidia-container-toolkit pkg/config/engine/docker/docker.go@v1.20.0, `AddRuntime`:
`runtimes[name] = {"path": <path>, "args": []}`, `default-runtime` set only when asked),
so a node configured by either tool reads the same and neither rewrites the other's work.
dockerd itself reads `path` and `runtimeArgs` (moby/moby api/types/system/runtime.go@
api/v1.56.0); `args` is NVIDIA's spelling, which dockerd ignores, as it is empty anyway.
Unlike nvidia-ctk (which re-marshals the whole file with Go's sorted map keys), every
other key keeps its place and the file keeps its indentation: the diff a reviewer sees is
the nvidia entry and nothing else.

Restore needs no inverse: the agent keeps the original bytes and puts them back (or
removes the file when the node had none).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

DAEMON_JSON = "/etc/docker/daemon.json"
RUNTIME_NAME = "nvidia"
RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
# Docker's systemd unit (docker-ce and Debian's docker.io both ship docker.service).
DOCKER_RESTART = "systemctl restart docker"
_BOM = "\ufeff"
_DEFAULT_INDENT = "    "   # what nvidia-ctk writes (json.MarshalIndent(c, "", "    "))
_INDENT = re.compile(r'^\{[ \t]*\r?\n([ \t]+)\S')


class DaemonJsonError(ValueError):
    """A daemon.json gpuplane cannot build on: names the file, line and column, and the fix."""


@dataclass(frozen=True)
class DockerSettings:
    """What the stack asks of Docker on each node (`gpuplane:docker`)."""

    set_as_default: bool = False
    runtime_path: str = RUNTIME_PATH


@dataclass(frozen=True)
class DockerPlan:
    """Docker's part of a node plan: daemon.json as planned from (None: absent) and as
    the agent writes it, and how Docker is restarted (once, only when the file changes)."""

    path: str
    original: str | None
    text: str
    restart_command: str = DOCKER_RESTART

    @property
    def changes(self) -> bool:
        return self.text != self.original


def plan_docker(current: str | None, settings: DockerSettings,
                source: str = DAEMON_JSON) -> DockerPlan:
    """The node's Docker plan: :func:`plan_daemon_json` with where and how it applies."""
    return DockerPlan(DAEMON_JSON, current, plan_daemon_json(current, settings, source))


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def parse_daemon_json(text: str, source: str = DAEMON_JSON) -> dict[str, Any]:
    """The settings of a daemon.json, as dockerd reads them: an empty file is no settings
    (dockerd returns early on one: moby/moby daemon/config/config.go@v2.0.0-beta.24
    `getConflictFreeConfiguration`), a UTF-8 byte order mark is allowed, anything but a
    JSON object is refused with `source:line:col`."""
    body = text.removeprefix(_BOM)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise DaemonJsonError(
            f"{source}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); dockerd would "
            "refuse to start on it. Fix the file on the node (`dockerd --validate "
            f"--config-file {DAEMON_JSON}` shows the same), then capture it again") from None
    if not isinstance(data, dict):
        first = len(body) - len(body.lstrip())
        line, col = _position(body, first)
        raise DaemonJsonError(
            f"{source}:{line}:{col}: a daemon.json must be one JSON object ({{...}}), not "
            f"a {type(data).__name__}; dockerd refuses it. Fix the file on the node, then "
            "capture it again")
    runtimes = data.get("runtimes")
    if runtimes is not None and not isinstance(runtimes, dict):
        found = re.search(r'"runtimes"\s*:', body)
        line, col = _position(body, found.start() if found else 0)
        raise DaemonJsonError(
            f"{source}:{line}:{col}: `runtimes` must be an object of runtime name -> "
            f"{{\"path\": ...}}, not a {type(runtimes).__name__}; fix it on the node")
    return data


def _indent(body: str) -> str:
    """The indentation of the file's first key (nvidia-ctk's four spaces for a new or
    one-line file), so that a rewrite does not reformat every line."""
    found = _INDENT.match(body.lstrip())
    return found.group(1) if found else _DEFAULT_INDENT


def _wanted(data: dict[str, Any], settings: DockerSettings) -> dict[str, Any]:
    """`data` with the nvidia runtime (and the default when asked); an existing nvidia
    entry with the right path is kept as it is, whatever its arguments."""
    out = dict(data)
    runtimes = dict(out.get("runtimes") or {})
    entry = runtimes.get(RUNTIME_NAME)
    if not (isinstance(entry, dict) and entry.get("path") == settings.runtime_path):
        runtimes[RUNTIME_NAME] = {"args": [], "path": settings.runtime_path}
    out["runtimes"] = runtimes
    if settings.set_as_default:
        out["default-runtime"] = RUNTIME_NAME
    return out


def plan_daemon_json(current: str | None, settings: DockerSettings,
                     source: str = DAEMON_JSON) -> str:
    """The daemon.json the node should have: `current` (None: the node has none) with the
    nvidia runtime merged in. Returns `current` itself, byte for byte, when it already has
    what the settings ask, so planning again over the result changes nothing. Raises
    DaemonJsonError (naming `source`, line and column) for a file dockerd would refuse."""
    text = current or ""
    data = parse_daemon_json(text, source)
    wanted = _wanted(data, settings)
    if current is not None and wanted == data:
        return current
    body = text.removeprefix(_BOM)
    newline = "\r\n" if "\r\n" in body else "\n"
    rendered = json.dumps(wanted, indent=_indent(body), ensure_ascii=False)
    bom = _BOM if text.startswith(_BOM) else ""
    end = newline if current is None or body.endswith(("\n", "\r\n")) or not body.strip() \
        else ""
    return bom + rendered.replace("\n", newline) + end


__all__ = [
    "DAEMON_JSON",
    "DOCKER_RESTART",
    "RUNTIME_NAME",
    "RUNTIME_PATH",
    "DaemonJsonError",
    "DockerPlan",
    "DockerSettings",
    "parse_daemon_json",
    "plan_daemon_json",
    "plan_docker",
]
