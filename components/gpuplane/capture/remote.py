"""What capture runs on a node and how its answer is read: pure functions, no SSH.

One POSIX `sh` script per node reads every plannable file and `containerd --version`, and
frames each answer on its own line (`FILE path size` + base64 body, `MISSING`, `DENIED`,
`TOOBIG`), so one round trip per node tells apart a file that is absent, unreadable or too
large from one that was read, and nothing of the node's own output is mistaken for content.
The same round trip reads the files that state the kubelet's cgroup driver (`KUBE` frames,
never captured as baselines) and the state of the distribution's units (`UNIT name state`).

How a unit's state is read (`unit_probe`):
- over SSH on the node itself (no `--remote-root`): `systemctl is-active UNIT.service`,
  the init system's own answer;
- otherwise, and where systemctl gives no answer (not booted with systemd, or no bus):
  the unit's control group. systemd runs each service in `system.slice/UNIT.service` of
  the cgroup tree (cgroup v2 at /sys/fs/cgroup, v1's named hierarchy at
  /sys/fs/cgroup/systemd; systemd/systemd docs/CGROUP_DELEGATION.md, not re-read at a
  tag): the unit runs exactly when some `cgroup.procs` below that directory lists a
  process. This is what the pod path uses: the capture pod's `chroot /host` sees the
  host's /sys through the read-only hostPath mount of / (a recursive bind mount, as
  containerd's CRI makes them; not verified on a real cluster here, only against the
  recorded API), while systemctl inside a pod's mount namespace cannot be trusted to
  reach the host's systemd. Reading files also works under a sandboxed `--remote-root`,
  where a fake cgroup tree stands in.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from dataclasses import dataclass, field

from gpuplane.distros.profiles import PROFILES, DistroProfile
from gpuplane.rules.kubelet_node import driver_source_paths, role_units

MAX_FILE_BYTES = 1024 * 1024   # a containerd config is a few KiB; more is not a config
# sed: the absolute path of a `BinaryName = "..."` (or '...') line, the way TOML spells it.
_BINARY_NAME = ("s|^[[:space:]]*BinaryName[[:space:]]*=[[:space:]]*[\"']\\(/[^\"']*\\)"
                "[\"'].*|\\1|p")


@dataclass(frozen=True)
class NodeReport:
    """What one node answered: its files by node path, or why it could not be captured."""

    files: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    version_output: str = ""
    problems: tuple[str, ...] = ()
    distros: tuple[str, ...] = ()      # distributions whose containerd binary is there
    kubelet_files: dict[str, str] = field(default_factory=dict)  # cgroup driver sources
    kubelet_unreadable: dict[str, str] = field(default_factory=dict)  # path -> why
    units: dict[str, str] = field(default_factory=dict)  # unit -> active/inactive/unknown
    # Each absolute `BinaryName` the captured files name -> whether it is on the node.
    binaries: dict[str, bool] = field(default_factory=dict)


def capture_script(profile: DistroProfile, root: str = "", *, in_pod: bool = False) -> str:
    """The script read on the node by `sh -s`. `root` stands in for / (tests, or a node's
    filesystem mounted elsewhere); node paths in the answer never carry it. `in_pod`: the
    script runs in the capture pod (units are read from the cgroup tree, see above)."""
    files = [p for p in (profile.config_path, profile.template_path,
                         profile.template_v3_path) if p]
    lines = [
        "set -u",
        f"R={shlex.quote(root.rstrip('/'))}",
        f"POD={1 if in_pod else 0}",
        "emit() {",
        '  t=FILE x=""; [ "$1" = KUBE ] && { t=KUBE x=KUBE; shift; }',
        '  f="$R$1"',
        '  if [ ! -e "$f" ]; then [ $t = FILE ] && echo "MISSING $1"; return; fi',
        '  if [ ! -r "$f" ] || ! n=$(wc -c < "$f" 2>/dev/null); then',
        '    echo "DENIED$x $1"; return',
        '  fi',
        '  n=$(echo $n)',
        f'  if [ "$n" -gt {MAX_FILE_BYTES} ]; then echo "TOOBIG$x $1 $n"; return; fi',
        '  if ! body=$(base64 < "$f" 2>/dev/null); then echo "DENIED$x $1"; return; fi',
        '  echo "$t $1 $n"; [ -n "$body" ] && echo "$body"; echo "END"',
        "}",
        *_unit_probe(),
        *(f"emit {shlex.quote(p)}" for p in files),
    ]
    for d in profile.read_dropin_dirs:
        # containerd imports `<dir>/*.toml`: those are the drop-ins a plan has to keep.
        lines += [f'for f in "$R"{shlex.quote(d)}/*.toml; do',
                  '  [ -f "$f" ] && emit "${f#"$R"}"',
                  "done"]
    # Each absolute BinaryName those files name, and whether it is there (`BINARY
    # present|absent PATH`): the copies alone cannot tell (capture.record).
    globs = " ".join(f'"$R"{shlex.quote(p)}' for p in files)
    globs += "".join(f' "$R"{shlex.quote(d)}/*.toml' for d in profile.read_dropin_dirs)
    lines += [f"for f in {globs}; do",
              '  [ -f "$f" ] && [ -r "$f" ] && sed -n ' + shlex.quote(_BINARY_NAME) + ' "$f"',
              "done | sort -u | while IFS= read -r p; do",
              '  if [ -e "$R$p" ]; then echo "BINARY present $p"; '
              'else echo "BINARY absent $p"; fi',
              "done"]
    # The first of the distribution's candidate binaries that is there (RKE2: `bin` links
    # into `data/<digest>/bin`; gpuplane.distros.profiles lists where each distribution puts it).
    lines += ['b=""',
              *(f'[ -z "$b" ] && [ -x "$R"{shlex.quote(c)} ] && b="$R"{shlex.quote(c)}'
                for c in profile.containerd_binaries),
              f'[ -n "$b" ] || b="$R"{shlex.quote(profile.containerd_binary)}']
    lines += [f"emit KUBE {shlex.quote(p)}" for p in driver_source_paths(profile.name)]
    lines += [f"unit {shlex.quote(u)}" for u in role_units(profile.name)]
    lines += ['v=$("$b" --version 2>&1) || v="FAILED: $v"',
              'echo "VERSION $v"']
    lines += [f'[ -x "$R"{shlex.quote(c)} ] && echo "DISTRO {name.value}"'
              for name, p in PROFILES.items() for c in p.containerd_binaries]
    return "\n".join([*lines, "exit 0"]) + "\n"


def _unit_probe() -> list[str]:
    """`unit NAME` prints `UNIT NAME active|inactive|unknown` (see the module docstring)."""
    return [
        "unit() {",
        '  s=""',
        '  if [ -z "$R" ] && [ "$POD" = 0 ] && command -v systemctl >/dev/null 2>&1; then',
        '    s=$(systemctl is-active "$1.service" 2>/dev/null | head -n 1)',
        "  fi",
        '  if [ -z "$s" ]; then',
        "    s=unknown",
        '    for g in "$R/sys/fs/cgroup" "$R/sys/fs/cgroup/systemd" "$R/sys/fs/cgroup/unified"; do',
        '      [ -d "$g" ] || continue',
        '      [ "$s" = unknown ] && s=inactive',
        '      d="$g/system.slice/$1.service"',
        '      [ -d "$d" ] || continue',
        '      for p in $(find "$d" -name cgroup.procs 2>/dev/null); do',
        '        [ -n "$(head -n 1 "$p" 2>/dev/null)" ] && s=active',
        "      done",
        "    done",
        "  fi",
        '  echo "UNIT $1 $s"',
        "}",
    ]


def parse_answer(text: str) -> NodeReport:
    """Read the script's framed answer; each bad file becomes a problem naming its path."""
    files: dict[str, str] = {}
    missing: list[str] = []
    problems: list[str] = []
    version = ""
    distros: list[str] = []
    kube: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    units: dict[str, str] = {}
    binaries: dict[str, bool] = {}
    lines = iter(text.splitlines())
    for line in lines:
        word, _, rest = line.partition(" ")
        if word in ("FILE", "KUBE"):
            path, _, size = rest.rpartition(" ")
            body = []
            for chunk in lines:
                if chunk == "END":
                    break
                body.append(chunk)
            else:
                problems.append(f"{path}: the answer was cut off")
                break
            problem = _text_of(path, "".join(body), int(size),
                               files if word == "FILE" else kube)
            if problem and word == "FILE":
                problems.append(problem)
            elif problem:
                unreadable[path] = problem.partition(": ")[2]
        elif word == "DENIEDKUBE":
            unreadable[rest] = "permission denied (ssh.sudo: true reads it)"
        elif word == "TOOBIGKUBE":
            unreadable[rest.rpartition(" ")[0]] = "too large for a kubelet config"
        elif word == "UNIT":
            name, _, state = rest.partition(" ")
            units[name] = state.strip() or "unknown"
        elif word == "MISSING":
            missing.append(rest)
        elif word == "DENIED":
            problems.append(f"{rest}: permission denied (set ssh.sudo: true, or use a user "
                            "that may read it)")
        elif word == "TOOBIG":
            path, _, size = rest.rpartition(" ")
            problems.append(f"{path}: {size} bytes, over the {MAX_FILE_BYTES} byte limit for "
                            "a containerd config; not captured")
        elif word == "BINARY":
            state, _, path = rest.partition(" ")
            if path.startswith("/") and state in ("present", "absent"):
                binaries[path] = state == "present"
        elif word == "VERSION":
            version = rest
        elif word == "DISTRO" and rest.strip() not in distros:
            distros.append(rest.strip())
    if not version:
        problems.append("no `containerd --version` answer (the script did not finish)")
    return NodeReport(files, tuple(missing), version, tuple(problems), tuple(distros),
                      kube, unreadable, units, binaries)


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
