"""Reading a node command's `stdin` back: the planned files, the bases and the captured
originals an `apply_stdin` program carries. The policy pack and a preview judge exactly
what would be sent to the node, so they read it from there, checked against the sha256
the agent itself checks."""

from __future__ import annotations

import hashlib
import re
import shlex

from gpuplane.agent.script import ABSENT, BASE_TEXT_HEAD, BASE_TEXT_LINE


def payload_files(stdin: str) -> dict[str, str] | None:
    """The planned files inside an :func:`apply_stdin` program (what a policy or a preview
    reads back from a node command's `stdin`); None when it is not one. Each file's
    sha256 is checked, as the agent itself does before writing."""
    if "\ngp_end\n" not in stdin:
        return None
    files: dict[str, str] = {}
    lines = iter(_after_agent(stdin).split("\n"))
    for line in lines:
        if not line.startswith("gp_file "):
            continue
        head, _, delim = line.partition(" <<")
        path, digest, newline = shlex.split(head)[1:4]
        delim = delim.strip("'")
        body: list[str] = []
        for text in lines:
            if text == delim:
                break
            body.append(text)
        content = "\n".join(body) + ("\n" if newline == "1" and body else "")
        if hashlib.sha256(content.encode()).hexdigest() != digest:
            raise ValueError(f"agent payload: {path} does not match its sha256")
        files[path] = content
    return files


def payload_docker_config(stdin: str) -> str | None:
    """The path of Docker's daemon.json among an :func:`apply_stdin` program's files
    (None: the plan leaves Docker alone): a policy judges the others as containerd's."""
    for line in _after_agent(stdin).split("\n"):
        if line.startswith("gp_plan docker_config "):
            return shlex.split(line)[2]
    return None


def payload_bases(stdin: str) -> dict[str, str | None] | None:
    """The bases inside an :func:`apply_stdin` program (node path -> sha256, None: planned
    as absent); None when it is not one."""
    if "\ngp_end\n" not in stdin:
        return None
    bases: dict[str, str | None] = {}
    for line in _after_agent(stdin).split("\n"):
        if line.startswith("gp_plan base "):
            digest, _, path = shlex.split(line)[2].partition(" ")
            bases[path] = None if digest == ABSENT else digest
    return bases


def payload_base_texts(stdin: str) -> dict[str, str]:
    """The captured originals an :func:`apply_stdin` program carries (node path -> text),
    each checked against its base's sha256."""
    bases = payload_bases(stdin) or {}
    texts: dict[str, str] = {}
    path: str | None = None
    lines: list[str] = []
    plan_part = _after_agent(stdin).split("\ngp_file ")[0]   # the blocks precede the files
    for line in [*plan_part.split("\n"), ""]:
        if path is not None and line.startswith(BASE_TEXT_LINE):
            lines.append(line[len(BASE_TEXT_LINE):])
            continue
        if path is not None:
            texts[path] = "\n".join(lines)
            if bases.get(path) != hashlib.sha256(texts[path].encode()).hexdigest():
                raise ValueError(f"agent payload: base {path} does not match its sha256")
            path = None
        if line.startswith(BASE_TEXT_HEAD + " "):
            path, lines = shlex.split(line[len(BASE_TEXT_HEAD):])[0], []
    return texts


_AGENT_HEREDOC = re.compile(r"^cat <<'(GPUPLANE_AGENT_\w+)'$", re.MULTILINE)


def _after_agent(stdin: str) -> str:
    """The plan part of a stdin program: what follows the embedded agent's heredoc (which
    is most of the text and holds no files)."""
    head = _AGENT_HEREDOC.search(stdin, 0, 4096)
    if head is None:
        return stdin
    end = stdin.find(f"\n{head.group(1)}\n", head.end())
    return stdin if end < 0 else stdin[end:]


__all__ = ["payload_base_texts", "payload_bases", "payload_docker_config", "payload_files"]
