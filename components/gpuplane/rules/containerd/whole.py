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

from typing import Any

from gpuplane.containerd.effective import EffectiveConfig
from gpuplane.containerd.settings import file_settings
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import Analysis, Loss, at, runtime_at


def _kept(effective: Any, intended: Any) -> bool:
    if isinstance(intended, dict) and isinstance(effective, dict):
        return all(effective.get(k) == v for k, v in intended.items())
    return bool(effective == intended)


def v2_setting_losses(eff: EffectiveConfig) -> list[Loss]:
    """2.x: settings a file made (read by its own version) that are not in effect."""
    line = eff.containerd_version
    if not line.deep_merges or eff.no_file:
        return []
    intended: dict[str, tuple[Any, Any, str, str]] = {}
    for f in eff.files:
        for name, (value, key, path) in file_settings(f, line).items():
            intended[name] = (value, f, key, path)
    own = _defaults_v2(line)
    return [Loss("setting", None, path, value, f, key)
            for name, (value, f, key, path) in intended.items()
            if not _kept(eff.settings.get(name), value) and own.get(name) != value]


def _defaults_v2(line: Any) -> dict[str, Any]:
    """containerd 2.x's own values (its `config dump` of an empty file: 2.0.11, 2.1.9,
    2.2.7): restating one loses nothing. The CNI bin dirs differ between builds and are
    left out, as on 1.x (gpuplane.rules.containerd.facts.cri_defaults)."""
    return {"cni.conf_dir": "/etc/cni/net.d",
            "sandbox_image": "registry.k8s.io/pause:3.10.1" if line.minor >= 2
            else "registry.k8s.io/pause:3.10"}


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
    (`exec: ...: no such file or directory`). An error for a runtime pods use."""
    used = {a.eff.default_runtime, *a.facts.expected_runtimes}
    out = []
    for name, path in a.facts.missing_binaries:
        out.append(Finding(
            "FM01", Severity.ERROR if name in used else Severity.WARNING,
            f"runtime {name} runs BinaryName = \"{path}\", which does not exist on the node: "
            f"every pod of runtime {name} fails to start (`{path}: no such file or "
            "directory`).",
            a.where(runtime_at(a, name, "BinaryName")),
            f"Install the binary at {path} (for nvidia: the NVIDIA Container Toolkit, "
            "`nvidia-container-runtime`), or set BinaryName in runtime "
            f"{name}'s options to where it is installed.")
        )
    return out
