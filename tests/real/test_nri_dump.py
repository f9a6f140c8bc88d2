"""NRI as a node state, held against real containerd `config dump`: the model's defaults
(1.6: no NRI plugin; 1.7: off; 2.x: on) and gpuplane's NRI drop-in (the GPU Operator's NRI
plugin mode, `gpuplane:gpuOperator.nri`), planned onto each line's baseline, turns NRI on
in what the real daemon merges, keeping the node's own NRI settings on 1.x where a later
file's plugin table replaces an earlier one whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.containerd.nri import NRI_PLUGIN, nri_default, nri_state
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, plan_node

OPTIONS = PlanOptions(cdi=True, nri=True, operator_chart="v26.3.0", toolkit_version="1.19.0")


def _real_nri(line: str, config: Path) -> dict[str, Any] | None:
    real = oracle.dump(line, config)
    assert real.ok, real.error
    table = real.config["plugins"].get(NRI_PLUGIN)
    return table if isinstance(table, dict) else None


@pytest.mark.real
def test_fm27_nri_default_of_each_line(containerd_line: str, tmp_path: Path) -> None:
    line = containerd_line
    version = ContainerdVersion.parse(line)
    top = tmp_path / "config.toml"
    top.write_text(f"version = {version.max_config_version}\n")
    table = _real_nri(line, top)
    default = nri_default(version)
    if default is None:
        assert table is None                      # 1.6: no NRI plugin at all
    else:
        assert table is not None and table["disable"] is (not default)
        assert nri_state({}, version).enabled is default


@pytest.mark.real
def test_fm27_nri_dropin_against_config_dump(containerd_line: str, tmp_path: Path) -> None:
    line = containerd_line
    version = ContainerdVersion.parse(line)
    kubeadm = profile(Distro.KUBEADM)
    if version < ContainerdVersion(1, 7):
        # 1.6 has no NRI plugin (see the dump above): no file can add it, FM27 says so.
        plan = plan_node(kubeadm, version, OPTIONS)
        assert "FM27" in {f.id for f in plan.findings if f.severity is Severity.ERROR}
        assert not [p for p in plan.files if p.endswith("40-gpuplane-nri.toml")]
        return
    base = kubeadm.baseline(version)
    top = kubeadm.config_path
    # The node's own NRI settings beside `disable` (1.x: must survive the drop-in).
    own = base[top] + f'\n[plugins."{NRI_PLUGIN}"]\n  plugin_config_path = "/etc/nri/own.d"\n'
    plan = plan_node(kubeadm, version, OPTIONS, current={**base, top: own})
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    write_layout(plan.layout, tmp_path)
    real = _real_nri(line, host_path(tmp_path, top))
    assert real is not None and real["disable"] is False
    assert real["plugin_config_path"] == "/etc/nri/own.d"
    dropins = [p for p in plan.files if p.endswith("40-gpuplane-nri.toml")]
    assert bool(dropins) is (not version.deep_merges)      # 2.x has NRI on already
    # And the same layout without gpuplane's files is what FM27 refuses on 1.7.
    before = tmp_path / "before"
    write_layout({**base, top: own}, before)
    assert _real_nri(line, host_path(before, top))["disable"] is (not version.deep_merges)
    # The model agrees with the daemon on both layouts.
    assert nri_state(plan.effective.plugins, version).enabled
