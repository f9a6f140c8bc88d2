"""Run the capture script on one node with the system `ssh` client.

The system client, not a Python SSH library: it already knows the user's agent, keys,
`~/.ssh/config` (bastions, aliases) and known hosts. BatchMode makes a missing key or an
unknown host a prompt-free failure that is reported per node.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CONNECT_TIMEOUT_S = 10
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class Target:
    """How to reach one node: the stack's ssh.* settings with the node's overrides."""

    host: str
    user: str
    port: int
    sudo: bool


def ssh_argv(target: Target, identity: Path | None = None,
             ssh_config: Path | None = None) -> list[str]:
    """The `ssh` command line that runs `sh -s` (under `sudo -n` when asked) on the node."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-p", str(target.port), "-l", target.user]
    if ssh_config is not None:
        argv += ["-F", str(ssh_config)]
    if identity is not None:
        argv += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
    remote = "sudo -n sh -s" if target.sudo else "sh -s"
    return [*argv, "--", target.host, remote]


def run_script(target: Target, script: str, identity: Path | None = None,
               ssh_config: Path | None = None) -> tuple[str | None, str]:
    """(the script's stdout, "") or (None, why the node could not be read)."""
    argv = ssh_argv(target, identity, ssh_config)
    try:
        done = subprocess.run(argv, input=script.encode(), capture_output=True,
                              timeout=RUN_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return None, "no `ssh` client on PATH (install openssh-client)"
    except subprocess.TimeoutExpired:
        return None, f"no answer within {RUN_TIMEOUT_S}s"
    err = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode == 255:   # ssh's own failure: connection, authentication, host key
        return None, f"ssh {target.user}@{target.host}:{target.port}: {_last(err)}"
    if done.returncode != 0:
        why = _last(err) or f"exit status {done.returncode}"
        if target.sudo and "sudo" in err:
            why += " (ssh.sudo needs passwordless sudo for this user: `sudo -n`)"
        return None, f"remote script failed: {why}"
    return done.stdout.decode("utf-8", "replace"), ""


def _last(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("Warning:")]
    return lines[-1] if lines else err


__all__ = ["Target", "run_script", "ssh_argv"]
