"""The SSH key from the stack's Pulumi secret, for a capture run given no --identity.

`gpuplane:sshPrivateKey` is stored encrypted in the stack file; only the Pulumi CLI (with
the stack's secrets provider: passphrase, cloud KMS or the Pulumi service) can decrypt it,
so capture asks it: `pulumi config get gpuplane:sshPrivateKey --stack NAME`, run in the
project root where Pulumi.yaml names the stack directory.

The key is handed to the system `ssh` as `-i FILE`: a file created 0600 (O_EXCL) in a
fresh 0700 directory and removed when capture ends, whatever happens. A pipe
(`-i /dev/fd/N`) does not work: ssh reads an identity file more than once (the public
half when it starts, the private half when it authenticates) and runs once per node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KEY = "gpuplane:sshPrivateKey"
CLI_TIMEOUT_S = 60
WHAT_TO_DO = ("pass the key yourself: --identity FILE, or let ssh use your ssh-agent and "
              "~/.ssh keys: --ssh-agent")


class StackKeyError(Exception):
    """The secret could not be read: the message says why and what to do instead."""


def pulumi_argv(stack: str) -> list[str]:
    """The command line that prints the decrypted key (argv after the executable)."""
    return ["config", "get", KEY, "--stack", stack]


def read_stack_key(stack: str, project_root: Path) -> str:
    """The private key text from the Pulumi CLI, or StackKeyError."""
    exe = shutil.which("pulumi")
    if exe is None:
        raise StackKeyError(f"{KEY} is a Pulumi secret and the `pulumi` CLI, which decrypts "
                            f"it, is not on PATH; {WHAT_TO_DO}")
    shown = " ".join(["pulumi", *pulumi_argv(stack)])
    try:
        done = subprocess.run([exe, *pulumi_argv(stack)], cwd=project_root,
                              capture_output=True, timeout=CLI_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise StackKeyError(f"`{shown}` gave no answer within {CLI_TIMEOUT_S}s (a "
                            f"passphrase prompt? set PULUMI_CONFIG_PASSPHRASE); "
                            f"{WHAT_TO_DO}") from None
    except OSError as exc:
        raise StackKeyError(f"`{shown}` could not run ({exc}); {WHAT_TO_DO}") from None
    if done.returncode != 0:
        err = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = err[-1].strip() if err else f"exit status {done.returncode}"
        raise StackKeyError(f"`{shown}` failed: {why}; {WHAT_TO_DO}")
    key = done.stdout.decode("utf-8", "replace").strip()
    if not (key.startswith("-----BEGIN ") and "PRIVATE KEY-----" in key):
        raise StackKeyError(f"`{shown}` did not print a private key (PEM/OpenSSH "
                            "`-----BEGIN ... PRIVATE KEY-----`); set it with `pulumi config "
                            f"set --secret {KEY} < ~/.ssh/id_ed25519`, or {WHAT_TO_DO}")
    return key + "\n"


@contextmanager
def key_file(key: str) -> Iterator[Path]:
    """`key` in a 0600 file in a private 0700 directory, removed on leaving."""
    folder = Path(tempfile.mkdtemp(prefix="gpuplane-capture-key-"))   # mode 0700
    path = folder / "id"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(key)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["KEY", "StackKeyError", "key_file", "pulumi_argv", "read_stack_key"]
