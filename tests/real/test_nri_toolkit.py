"""The toolkit installer a v26.3 chart ships (1.19.0) and the v26.7 one (1.20.0), run for
real on gpuplane's NRI plan: with the operator's NRI env (`ENABLE_NRI_PLUGIN`,
`NRI_NAMESPACE`, controllers/object_controls.go@v26.3.0 `transformToolkitCtrForCDI`) it
writes nothing into containerd's config, which is what the plan models (no toolkit files,
no nvidia runtime after the toolkit). The same run without NRI writes the runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import toolkit_oracle
from support.operator_env import operator_env

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, plan_node


@pytest.mark.real
@pytest.mark.parametrize(("chart", "toolkit"), [("v26.3.0", "1.19.0"), ("v26.7.0", "1.20.0")])
@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_fm27_nri_mode_toolkit_writes_no_runtime(chart: str, toolkit: str, line: str,
                                                 tmp_path: Path) -> None:
    version = ContainerdVersion.parse(line)
    kubeadm = profile(Distro.KUBEADM)
    nri = plan_node(kubeadm, version, PlanOptions(cdi=True, nri=True, operator_chart=chart,
                                                  toolkit_version=toolkit))
    assert nri.toolkit_files == {} and "nvidia" not in nri.effective.runtimes
    node = {**nri.baseline, **nri.files}
    env = operator_env(chart, nri.toolkit_env, cdi=True, runtime_class="nvidia")
    real = toolkit_oracle.run_toolkit(
        toolkit, node, {**env, "ENABLE_NRI_PLUGIN": "true", "NRI_NAMESPACE": "gpu-operator"},
        tmp_path / "nri", containerd=(line, kubeadm.containerd_binary))
    assert not [p for p in real.written if p.startswith("/etc/containerd")], real.written
    # Without NRI the same installer on the same node writes the nvidia runtime.
    plain = toolkit_oracle.run_toolkit(toolkit, node, env, tmp_path / "plain",
                                       containerd=(line, kubeadm.containerd_binary))
    assert [p for p in plain.written if p.startswith("/etc/containerd")], plain.log
