"""k0s 1.27-1.35 (containerd 1.7): the layout k0s really writes (k0sproject/k0s
`pkg/component/worker/containerd/component.go` and `configurer.go`@v1.35.1+k0s.0).

`/etc/k0s/containerd.toml` starts with `# k0s_managed=true` and only imports the drop-ins
without a CRI table plus `/run/k0s/containerd-cri.toml`, which k0s builds at every start
from containerd's default CRI config merge-patched with each drop-in of
`/etc/k0s/containerd.d/` that has a CRI table. So drop-ins deep-merge there even on 1.x,
and both generated files are rewritten: gpuplane writes a drop-in, never those."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion, MemoryFiles
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.rules.nodecheck import check_node_config

K0S = profile(Distro.K0S)
LINE = ContainerdVersion.parse("1.7")
CRI = '"io.containerd.grpc.v1.cri"'
DROPINS = {
    "/etc/k0s/containerd.d/10-registry.toml":
        f'version = 2\n[plugins.{CRI}.registry]\nconfig_path = "/etc/containerd/certs.d"\n',
    "/etc/k0s/containerd.d/20-runc.toml":
        f"version = 2\n[plugins.{CRI}.containerd.runtimes.runc.options]\nSystemdCgroup = true\n",
    "/etc/k0s/containerd.d/30-debug.toml": 'version = 2\n[debug]\nlevel = "info"\n',
}


def _node() -> dict[str, str]:
    """What a capture of a k0s worker holds: both generated files and the drop-ins."""
    return rendered_layout({**K0S.baseline(LINE), **DROPINS}, K0S, LINE)


def test_k0s_renders_its_generated_files_from_the_drop_ins() -> None:
    node = _node()
    top = node[K0S.config_path]
    assert top.startswith("# k0s_managed=true\n")
    assert "/run/k0s/containerd-cri.toml" in top and "30-debug.toml" in top
    assert "10-registry.toml" not in top   # merged into the CRI file instead
    cri = node["/run/k0s/containerd-cri.toml"]
    assert "/etc/containerd/certs.d" in cri and "SystemdCgroup = true" in cri


def test_a_k0s_node_as_found_is_healthy() -> None:
    checked = check_node_config(MemoryFiles(_node()), K0S.config_path, LINE)
    assert not [f for f in checked.findings if f.severity is Severity.ERROR], checked.findings
    eff = checked.effective
    assert eff.runtimes["runc"].options == {"SystemdCgroup": True}
    plan = plan_node(K0S, LINE, PlanOptions(toolkit=ToolkitMode.NONE), current=_node())
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings


def test_the_plan_writes_a_drop_in_never_the_files_k0s_generates() -> None:
    plan = plan_node(K0S, LINE, PlanOptions(toolkit=ToolkitMode.HOST), current=_node())
    assert set(plan.files) == {"/etc/k0s/containerd.d/50-gpuplane.toml"}
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    eff = plan.effective
    assert {"runc", "nvidia"} <= set(eff.runtimes)
    assert eff.runtimes["runc"].options == {"SystemdCgroup": True}
    assert eff.runtimes["nvidia"].options["BinaryName"] == "/usr/bin/nvidia-container-runtime"


@pytest.mark.parametrize("toolkit", ["1.17.8", "1.18.1", "1.20.0"])
def test_the_operators_toolkit_writes_into_k0s_drop_in_dir_and_plans_clean(
        toolkit: str) -> None:
    """k0s's docs (docs/runtime.md@v1.35.1+k0s.0, "Using nvidia-container-runtime") point
    the toolkit's CONTAINERD_CONFIG at /etc/k0s/containerd.d/nvidia.toml: the toolkit
    never touches the top-level file k0s marks as its own, and k0s merges what it writes.
    Before, gpuplane rendered CONTAINERD_CONFIG=/etc/k0s/containerd.toml and refused its
    own plan (FM05, the marker lost)."""
    plan = plan_node(K0S, LINE, PlanOptions(
        toolkit=ToolkitMode.OPERATOR, toolkit_version=toolkit,
        operator_chart=toolkit_oracle.chart_of(toolkit)), current=_node())
    env = {e["name"]: e["value"] for e in plan.toolkit_env}
    assert env["CONTAINERD_CONFIG"] == "/etc/k0s/containerd.d/nvidia.toml"
    assert K0S.config_path not in plan.toolkit_files
    assert all(p.startswith("/etc/k0s/containerd.d/") for p in plan.toolkit_files)
    errors = [f.id for f in plan.findings if f.severity is Severity.ERROR]
    eff = plan.effective
    assert eff.runtimes["runc"].options == {"SystemdCgroup": True}
    assert eff.runtimes["nvidia"].options["BinaryName"] == \
        "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    if toolkit.startswith("1.17"):
        # 1.17 edits the (new, empty) nvidia.toml in place: no runc there to copy, so
        # its runtimes lack the SystemdCgroup this node's 20-runc.toml gives runc.
        assert errors == ["FM07"], plan.findings
        assert "SystemdCgroup" not in eff.runtimes["nvidia"].options
    else:
        assert errors == [], plan.findings
        assert eff.runtimes["nvidia"].options["SystemdCgroup"] is True


@pytest.mark.real
@pytest.mark.parametrize("toolkit", ["1.17.8", "1.18.1", "1.20.0"])
def test_the_real_toolkit_on_k0s_writes_what_the_plan_says(toolkit: str,
                                                            tmp_path: Path) -> None:
    from test_toolkit_differential import assert_toolkit_agrees

    plan = plan_node(K0S, LINE, PlanOptions(
        toolkit=ToolkitMode.OPERATOR, toolkit_version=toolkit,
        operator_chart=toolkit_oracle.chart_of(toolkit)), current=_node())
    assert_toolkit_agrees(plan, toolkit, tmp_path)


@pytest.mark.real
def test_the_rendered_k0s_layout_runs_in_real_containerd(tmp_path: Path) -> None:
    oracle.require_line("1.7")
    plan = plan_node(K0S, LINE, PlanOptions(toolkit=ToolkitMode.HOST), current=_node())
    for name, layout, eff in (("found", _node(), plan.before),
                              ("planned", rendered_layout({**_node(), **plan.files}, K0S,
                                                          LINE), plan.effective)):
        write_layout(layout, tmp_path / name)
        dumped = oracle.dump("1.7", host_path(tmp_path / name, K0S.config_path))
        assert dumped.ok, dumped.error
        assert oracle.effective_from_dump("1.7", dumped.config) == eff.to_dict()
