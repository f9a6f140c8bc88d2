"""What capture runs on a node and how its answer is read: pure functions, no SSH.

One POSIX `sh` script per node reads every plannable file and `containerd --version`, and
frames each answer on its own line (`FILE path size` + base64 body, `MISSING`, `DENIED`,
`TOOBIG`), so one round trip per node tells apart a file that is absent, unreadable or too
large from one that was read, and nothing of the node's own output is mistaken for content.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from dataclasses import dataclass, field

from gpuplane.distros import PROFILES, DistroProfile

MAX_FILE_BYTES = 1024 * 1024   # a containerd config is a few KiB; more is not a config
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"   # kubeadm's KubeletConfiguration


@dataclass(frozen=True)
class NodeReport:
    """What one node answered: its files by node path, or why it could not be captured."""

    files: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    version_output: str = ""
    problems: tuple[str, ...] = ()
    cgroup_driver: str = ""            # kubelet's cgroupDriver, where its config file says
    distros: tuple[str, ...] = ()      # distributions whose containerd binary is there


def capture_script(profile: DistroProfile, root: str = "") -> str:
    """The script read on the node by `sh -s`. `root` stands in for / (tests, or a node's
    filesystem mounted elsewhere); node paths in the answer never carry it."""
    files = [p for p in (profile.config_path, profile.template_path,
                         profile.template_v3_path) if p]
    lines = [
        "set -u",
        f"R={shlex.quote(root.rstrip('/'))}",
        "emit() {",
        '  f="$R$1"',
        '  if [ ! -e "$f" ]; then echo "MISSING $1"; return; fi',
        '  if [ ! -r "$f" ] || ! n=$(wc -c < "$f" 2>/dev/null); then echo "DENIED $1"; return; fi',
        '  n=$(echo $n)',
        f'  if [ "$n" -gt {MAX_FILE_BYTES} ]; then echo "TOOBIG $1 $n"; return; fi',
        '  if ! body=$(base64 < "$f" 2>/dev/null); then echo "DENIED $1"; return; fi',
        '  echo "FILE $1 $n"; [ -n "$body" ] && echo "$body"; echo "END"',
        "}",
        *(f"emit {shlex.quote(p)}" for p in files),
    ]
    if profile.dropin_dir:
        d = profile.dropin_dir.rstrip("/")
        # containerd imports `<dir>/*.toml`: those are the drop-ins a plan has to keep.
        lines += [f'for f in "$R"{shlex.quote(d)}/*.toml; do',
                  '  [ -f "$f" ] && emit "${f#"$R"}"',
                  "done"]
    # The first of the distribution's candidate binaries that is there (RKE2: `bin` links
    # into `data/<digest>/bin`; gpuplane.distros lists where each distribution puts it).
    lines += ['b=""',
              *(f'[ -z "$b" ] && [ -x "$R"{shlex.quote(c)} ] && b="$R"{shlex.quote(c)}'
                for c in profile.containerd_binaries),
              f'[ -n "$b" ] || b="$R"{shlex.quote(profile.containerd_binary)}']
    lines += ['v=$("$b" --version 2>&1) || v="FAILED: $v"',
              'echo "VERSION $v"',
              # kubeadm-style kubelets name their driver in this file; others are skipped.
              "c=$(sed -n 's/^cgroupDriver:[[:space:]]*\\([a-z]*\\).*/\\1/p' "
              f'"$R"{KUBELET_CONFIG} 2>/dev/null)',
              'echo "CGROUP $c"']
    lines += [f'[ -x "$R"{shlex.quote(c)} ] && echo "DISTRO {name.value}"'
              for name, p in PROFILES.items() for c in p.containerd_binaries]
    return "\n".join([*lines, "exit 0"]) + "\n"


def parse_answer(text: str) -> NodeReport:
    """Read the script's framed answer; each bad file becomes a problem naming its path."""
    files: dict[str, str] = {}
    missing: list[str] = []
    problems: list[str] = []
    version = cgroup = ""
    distros: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "FILE":
            path, _, size = rest.rpartition(" ")
            body = []
            for chunk in lines:
                if chunk == "END":
                    break
                body.append(chunk)
            else:
                problems.append(f"{path}: the answer was cut off")
                break
            problem = _text_of(path, "".join(body), int(size), files)
            if problem:
                problems.append(problem)
        elif word == "MISSING":
            missing.append(rest)
        elif word == "DENIED":
            problems.append(f"{rest}: permission denied (set ssh.sudo: true, or use a user "
                            "that may read it)")
        elif word == "TOOBIG":
            path, _, size = rest.rpartition(" ")
            problems.append(f"{path}: {size} bytes, over the {MAX_FILE_BYTES} byte limit for "
                            "a containerd config; not captured")
        elif word == "VERSION":
            version = rest
        elif word == "CGROUP":
            cgroup = rest.strip()
        elif word == "DISTRO" and rest.strip() not in distros:
            distros.append(rest.strip())
    if not version:
        problems.append("no `containerd --version` answer (the script did not finish)")
    return NodeReport(files, tuple(missing), version, tuple(problems), cgroup,
                      tuple(distros))


def _text_of(path: str, encoded: str, size: int, into: dict[str, str]) -> str | None:
    """Decode one file into `into`, or say why it is not a text config."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return f"{path}: the answer was garbled"
    if len(raw) != size:
        return f"{path}: read {len(raw)} of {size} bytes"
    if b"\0" in raw:
        return f"{path}: binary (NUL bytes), not a containerd config; not captured"
    try:
        into[path] = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return (f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); containerd "
                "reads TOML as UTF-8; not captured")
    return None


__all__ = ["MAX_FILE_BYTES", "NodeReport", "capture_script", "parse_answer"]
