"""The whole effective config beside the runtimes (#39): CRI settings a layout ignores
today on containerd 2.x, a disabled CRI plugin, and a node without a top-level file.

containerd 2.x reads a merged version-3 config from the version-3 plugins only
(`io.containerd.cri.v1.images`, `io.containerd.cri.v1.runtime`); a version-2 CRI table
is migrated only while the merged config is below 3 (the version of the last file
read; gpuplane.containerd.merge). So a version-3
drop-in over a version-2 root loses the root's registry mirrors, config_path, sandbox
image and CNI dirs now (measured on 2.0.11, 2.1.9 and 2.2.7: tests/real/test_differential.py).
"""

from __future__ import annotations

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import Analysis, at, runtime_at


def cri_disabled(a: Analysis) -> list[Finding]:
    """The CRI plugin disabled (Docker's containerd.io config: `disabled_plugins =
    ["cri"]`): the kubelet's containerd serves no pods at all."""
    eff = a.eff
    if not eff.cri_disabled:
        return []
    setter = next((f for f in reversed(eff.files)
                   if any(n in ("cri", "io.containerd.grpc.v1.cri") for n in f.disabled_plugins)),
                  eff.files[0])
    return [Finding(
        "FM03", Severity.ERROR,
        f"{setter.path} disables the CRI plugin (`disabled_plugins` names "
        f"{'cri' if 'cri' in setter.disabled_plugins else 'io.containerd.grpc.v1.cri'}): "
        f"containerd {eff.containerd_version} serves no CRI, so the kubelet cannot run a "
        "single pod on it (the stock config of Docker's containerd.io package). The "
        "runtimes shown are never used.",
        a.where(at(setter, ("disabled_plugins",))),
        f"Remove the CRI plugin from `disabled_plugins` in {setter.path} (keep the list "
        "otherwise), then restart containerd; if Docker owns that file, give the kubelet "
        "its own containerd config or point Docker at it unchanged.")]


def no_top_level_file(a: Analysis) -> list[Finding]:
    eff = a.eff
    if not eff.no_file:
        return []
    path = eff.files[0].path
    return [Finding(
        "FM01", Severity.INFO,
        f"{path} does not exist: containerd {eff.containerd_version} runs on its built-in "
        "defaults (runc only, no drop-in read: even 2.2, whose defaults list "
        "/etc/containerd/conf.d/*.toml, reads none of them without a config file).",
        a.where(path),
        f"Nothing to do for runc alone; for the nvidia runtime write {path} with "
        "`imports` naming the drop-in directory (e.g. `version = 2` and imports = "
        "[\"/etc/containerd/conf.d/*.toml\"]).")]


def missing_binary(a: Analysis) -> list[Finding]:
    """A runtime whose BinaryName does not exist: every container of it fails to start
    (`exec: ...: no such file or directory`). An error for a runtime pods use. A
    BinaryName nothing could check (a copy of the config files alone) is an info naming
    it, never called missing."""
    used = {a.eff.default_runtime, *a.facts.expected_runtimes}
    out = []
    for name, path in a.facts.missing_binaries:
        out.append(Finding(
            "FM01", Severity.ERROR if name in used else Severity.WARNING,
            f"runtime {name} runs BinaryName = \"{path}\", which does not exist on the node: "
            f"every pod of runtime {name} fails to start (`{path}: no such file or "
            "directory`)." + a.classes_note([name]),
            a.where(runtime_at(a, name, "BinaryName")),
            f"Install the binary at {path} (for nvidia: the NVIDIA Container Toolkit, "
            "`nvidia-container-runtime`), or set BinaryName in runtime "
            f"{name}'s options to where it is installed.")
        )
    unchecked = [(n, p) for n, p in a.facts.unchecked_binaries if n in used]
    if unchecked:
        named = ", ".join(f"runtime {n}: {p}" for n, p in unchecked)
        out.append(Finding(
            "FM01", Severity.INFO,
            f"binaries not checked ({named}): the files given do not show their "
            "directories and no capture recorded them, so whether they exist on the node "
            "is not known.",
            a.where(runtime_at(a, unchecked[0][0], "BinaryName")),
            "Check on the node: `ls -l " + " ".join(p for _, p in unchecked) + "`; or "
            "pass the record `gpuplane nodes capture` wrote (--binaries FILE), or copy "
            "those directories under --root too."))
    return out
