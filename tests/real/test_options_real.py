"""How each containerd line matches runtime option keys, held against real daemons.

`config dump` shows options as written, so only a running container tells which key the
runc shim got. One daemon per line holds one runtime per key spelling:
- BinaryName spellings point at the logging nvidia stand-in: the sandbox goes through it
  exactly when the model (gpuplane.containerd.options) says that spelling is decoded;
- SystemdCgroup spellings set true: this sandbox has a cgroupfs parent and no systemd, so
  the sandbox fails exactly when the spelling is decoded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle

from gpuplane.containerd import ContainerdVersion, LocalFiles, effective_config
from gpuplane.containerd.options import decoded

CRI = '"io.containerd.grpc.v1.cri"'
BINARY_SPELLINGS = ("BinaryName", "binaryName", "binaryname", "BINARYNAME", "BinaryNAME")
SYSTEMD_SPELLINGS = ("SystemdCgroup", "systemdCgroup", "systemdcgroup", "SystemdCGroup")


def _layout(tmp: Path) -> tuple[Path, dict[str, Path]]:
    """A v2 config with runtimes b0.. (BinaryName spellings), s0.. (SystemdCgroup
    spellings) and `both` (BinaryName = runc beside binaryName = stand-in)."""
    wrappers: dict[str, Path] = {}
    text = f'version = 2\n[plugins.{CRI}.containerd]\ndefault_runtime_name = "runc"\n'
    text += f'[plugins.{CRI}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
    for i, key in enumerate(BINARY_SPELLINGS):
        wrappers[f"b{i}"] = oracle.nvidia_wrapper(tmp / f"b{i}")
        text += (f'[plugins.{CRI}.containerd.runtimes.b{i}]\n'
                 'runtime_type = "io.containerd.runc.v2"\n'
                 f'[plugins.{CRI}.containerd.runtimes.b{i}.options]\n'
                 f'{key} = "{wrappers[f"b{i}"]}"\n')
    for i, key in enumerate(SYSTEMD_SPELLINGS):
        text += (f'[plugins.{CRI}.containerd.runtimes.s{i}]\n'
                 'runtime_type = "io.containerd.runc.v2"\n'
                 f'[plugins.{CRI}.containerd.runtimes.s{i}.options]\n{key} = true\n')
    wrappers["both"] = oracle.nvidia_wrapper(tmp / "both")
    text += (f'[plugins.{CRI}.containerd.runtimes.both]\n'
             'runtime_type = "io.containerd.runc.v2"\n'
             f'[plugins.{CRI}.containerd.runtimes.both.options]\n'
             f'BinaryName = "{oracle.RUNC}"\nbinaryName = "{wrappers["both"]}"\n')
    config = tmp / "config.toml"
    config.write_text(text)
    return config, wrappers


@pytest.mark.real
def test_option_key_matching_matches_real_containerd(
    containerd_line: str, start_daemon, tmp_short: Path
) -> None:
    config, wrappers = _layout(tmp_short / "node")
    line = ContainerdVersion.parse(containerd_line)
    eff = effective_config(str(config), LocalFiles(), line)
    daemon = start_daemon(containerd_line, config)
    daemon.require_started()
    assert daemon.plugin_status() == "ok", daemon.plugin_error()
    went_through: dict[str, bool] = {}
    for name, wrapper in wrappers.items():
        result = oracle.run_sandbox(daemon, name)
        assert result.ok, (name, result.error)
        went_through[name] = bool(oracle.wrapper_calls(wrapper))
    modelled = {name: decoded(eff.runtimes[name].options, "BinaryName", line) == str(w)
                for name, w in wrappers.items()}
    assert went_through == modelled
    systemd_failed = {f"s{i}": not oracle.run_sandbox(daemon, f"s{i}").ok
                      for i in range(len(SYSTEMD_SPELLINGS))}
    modelled_systemd = {f"s{i}": decoded(eff.runtimes[f"s{i}"].options, "SystemdCgroup", line)
                        is True for i in range(len(SYSTEMD_SPELLINGS))}
    assert systemd_failed == modelled_systemd
    # The lines really differ where the model says they do.
    if line.major >= 2:
        assert went_through["b4"] and went_through["both"] and systemd_failed["s3"]
    else:
        assert not went_through["b4"] and not went_through["both"]
        assert not systemd_failed["s3"]
    assert went_through["b1"] and systemd_failed["s1"]   # Kubespray's spelling, everywhere
