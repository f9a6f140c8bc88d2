"""Field incident 3 end to end: the distro's runc drop-in plus a minimal nvidia drop-in.

On containerd 1.6 and 1.7 the second file replaces the CRI table, runc is gone and the
CRI plugin refuses to load; on 2.1 both runtimes survive. The model, the rulebook and a
real daemon must agree on all three lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.rules import ContainerdFacts, check_containerd

TOP = "/etc/containerd/config.toml"


def incident_layout(binary: str) -> dict[str, str]:
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd'
    return {
        TOP: 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
        "/etc/containerd/conf.d/00-k8s-runc.toml": (
            f'version = 2\n[{cri}]\ndefault_runtime_name = "runc"\n'
            f'[{cri}.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
            f"[{cri}.runtimes.runc.options]\nSystemdCgroup = false\n"),
        "/etc/containerd/conf.d/99-nvidia.toml": (
            f'version = 2\n[{cri}.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
            f'[{cri}.runtimes.nvidia.options]\nBinaryName = "{binary}"\n'),
    }


@pytest.mark.real
@pytest.mark.parametrize("line", oracle.LINES)
def test_incident_3_model_rules_and_real_daemon_agree(line: str, tmp_short: Path,
                                                      start_daemon) -> None:
    oracle.require_line(line)
    wrapper = oracle.nvidia_wrapper(tmp_short / "bin")
    layout = incident_layout(str(wrapper))
    effective = effective_config(TOP, MemoryFiles(layout), ContainerdVersion.parse(line))
    findings = check_containerd(ContainerdFacts(effective=effective,
                                                expected_runtimes=frozenset({"runc", "nvidia"})))
    root = tmp_short / "node"
    write_layout(layout, root)
    daemon = start_daemon(line, host_path(root, TOP))
    daemon.require_started()
    if line in ("1.6", "1.7"):
        assert not effective.starts and "runc" not in effective.runtimes
        fm02 = [f for f in findings if f.id == "FM02" and f.severity == "error"]
        assert fm02 and any("99-nvidia.toml" in f.message + f.where for f in fm02), findings
        assert daemon.plugin_status() == "error"
        assert "no corresponding runtime configured" in daemon.plugin_error()
    else:
        assert effective.starts and {"runc", "nvidia"} <= set(effective.runtimes)
        assert not [f for f in findings if f.severity == "error"], findings
        assert daemon.plugin_status() == "ok"
        result = oracle.run_sandbox(daemon, "nvidia")
        assert result.ok, result.error
        assert oracle.wrapper_calls(wrapper)
