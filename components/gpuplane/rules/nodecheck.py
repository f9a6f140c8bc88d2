"""Check one node's containerd config from files: load, find unread drop-ins, run the
rules. Shared by `gpuplane containerd check` and anything else holding a node's files."""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplane.containerd import (
    ContainerdVersion,
    EffectiveConfig,
    FileSource,
    effective_config,
)
from gpuplane.containerd.files import LocalFiles, dir_exists, has_meta
from gpuplane.containerd.options import decoded
from gpuplane.core.findings import Finding, has_errors
from gpuplane.rules import ContainerdFacts, check_containerd

# Toolkit 1.18.0 wrote its drop-in to config.d/, which nothing imported; conf.d/ is the
# usual drop-in directory. Both are scanned next to the top-level config.
DROP_IN_DIRS = ("conf.d", "config.d")
_VERSION_OUTPUT = re.compile(r"^containerd\s+\S+\s+v?(\d+\.\d+(?:\.\d+)?\S*)")


class VersionUnknown(Exception):
    """The containerd release line could not be determined; the user must pass it."""


@dataclass
class NodeCheck:
    """The effective config of one node and the findings about it."""

    config: str
    effective: EffectiveConfig
    findings: list[Finding]
    # (RuntimeClass, handler) judged as used; RuntimeClass None: a handler named by hand.
    runtime_classes: tuple[tuple[str | None, str], ...] = ()

    @property
    def failed(self) -> bool:
        return has_errors(self.findings)


def check_node_config(
    files: FileSource, config: str, version: ContainerdVersion, facts: dict[str, Any] | None = None,
    *, runtime_name: str | None = None,
    runtime_classes: Sequence[tuple[str | None, str]] = (),
    binaries: Mapping[str, bool] | None = None,
) -> NodeCheck:
    """Run every containerd rule on `config` (a node path) read through `files`.

    `facts` are extra ContainerdFacts fields (expected runtimes, kubelet driver, ...).
    `runtime_name`: the GPU runtime pods use (`gpuplane containerd check` passes
    `nvidia`): judged as used, like a plan's runtime (FM01, FM07 are errors on it). A
    missing `config` is containerd's built-in defaults, judged as such.
    `runtime_classes`: (RuntimeClass, handler) of the node's cluster (RuntimeClass None:
    a handler named by hand); every handler is judged as used too, and the findings on it
    name its RuntimeClasses.
    `binaries`: node path -> present, as a capture recorded it (see binary_states).
    Raises gpuplane.containerd.ConfigError for a file that cannot be parsed.
    """
    effective = effective_config(config, files, version, missing_ok=True)
    unread = find_unread_files(files, effective)
    extra = dict(facts or {})
    classes = tuple((name, handler) for name, handler in runtime_classes)
    used = {handler for _, handler in classes} | ({runtime_name} if runtime_name else set())
    if used:
        extra["expected_runtimes"] = frozenset(extra.get("expected_runtimes", ())) | used
        if "missing_binaries" not in extra:
            missing, unchecked = binary_states(files, effective, binaries)
            extra["missing_binaries"], extra["unchecked_binaries"] = missing, unchecked
    named = tuple((name, handler) for name, handler in classes if name is not None)
    if named:
        extra["runtime_classes"] = tuple(extra.get("runtime_classes", ())) + named
    findings = check_containerd(ContainerdFacts(effective, unread_files=unread, **extra))
    return NodeCheck(config, effective, findings, classes)


def runtime_binaries(effective: EffectiveConfig) -> tuple[tuple[str, str], ...]:
    """(runtime, BinaryName) for each runtime whose BinaryName is an absolute path (a bare
    name is looked up on containerd's PATH, not judged here)."""
    out = []
    for name, view in sorted(effective.runtimes.items()):
        path = decoded(view.options, "BinaryName", effective.containerd_version)
        if isinstance(path, str) and posixpath.isabs(path):
            out.append((name, path))
    return tuple(out)


def binary_states(files: FileSource, effective: EffectiveConfig,
                  recorded: Mapping[str, bool] | None = None,
                  ) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(missing, not checked): (runtime, BinaryName) for each absolute BinaryName.

    What a capture `recorded` (node path -> present) decides first. Otherwise a binary is
    judged only where `files` shows its directory: the node's own filesystem always does;
    a copy under --root (often only the config files a user or a bug report kept) only
    where it holds that directory. Anything else is not checked, never called missing.
    """
    whole_node = isinstance(files, LocalFiles) and files.root is None
    missing, unchecked = [], []
    for name, path in runtime_binaries(effective):
        directory, base = posixpath.split(posixpath.normpath(path))
        if recorded is not None and path in recorded:
            present = recorded[path]
        elif whole_node or dir_exists(files, directory):
            present = base in files.listdir(directory)
        else:
            unchecked.append((name, path))
            continue
        if not present:
            missing.append((name, path))
    return tuple(missing), tuple(unchecked)


def find_unread_files(files: FileSource, effective: EffectiveConfig) -> tuple[str, ...]:
    """TOML files in drop-in directories containerd does not read.

    Looks in conf.d/ and config.d/ next to the top-level config, in the directories of the
    files it imports, and in the literal directories of its import globs.
    """
    top = effective.files[0].path
    base = posixpath.dirname(top)
    dirs = [posixpath.join(base, d) for d in DROP_IN_DIRS]
    dirs += [posixpath.dirname(f.path) for f in effective.files[1:]]
    for f in effective.files:
        for raw in f.imports:
            parent = posixpath.dirname(raw)
            if raw and not has_meta(parent):
                dirs.append(posixpath.normpath(posixpath.join(posixpath.dirname(f.path), parent)))
    read = {f.path for f in effective.files}
    unread: list[str] = []
    for directory in dict.fromkeys(dirs):
        for name in files.listdir(directory):
            path = posixpath.join(directory, name)
            if (name.endswith(".toml") and path not in read and path not in unread
                    and files.read(path) is not None):
                unread.append(path)
    return tuple(unread)


def parse_version_output(text: str) -> ContainerdVersion:
    """The release line from `containerd --version` output.

    e.g. "containerd github.com/containerd/containerd 1.7.24~ds1 ..." or
    "containerd github.com/containerd/containerd/v2 2.1.9+unknown".
    """
    match = _VERSION_OUTPUT.match(text.strip())
    if not match:
        raise VersionUnknown(f"cannot read a version from {text.strip()!r}")
    return ContainerdVersion.parse(match.group(1))


def detect_containerd_version() -> ContainerdVersion:
    """Ask the `containerd` on PATH. Raises VersionUnknown when there is none."""
    binary = shutil.which("containerd")
    if binary is None:
        raise VersionUnknown("no `containerd` on PATH")
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VersionUnknown(f"`{binary} --version` failed: {exc}") from exc
    return parse_version_output(done.stdout)
