"""MicroK8s: its template holds placeholders the snap's launcher substitutes at every
start (canonical/microk8s `microk8s-resources/wrappers/run-containerd-with-args`@v1.35),
and a plan is made from the node's own template, never from gpuplane's model of one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion, MemoryFiles
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.rules.nodecheck import check_node_config

MK = profile(Distro.MICROK8S)
CRI = '"io.containerd.grpc.v1.cri"'
# A node's template as MicroK8s ships it (placeholders) with the runtimes it adds itself.
TEMPLATE = f"""version = 2
oom_score = 0
[plugins.{CRI}]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins.{CRI}.containerd]
    snapshotter = "${{SNAPSHOTTER}}"
    default_runtime_name = "${{RUNTIME}}"
    [plugins.{CRI}.containerd.runtimes.runc]
      runtime_type = "${{RUNTIME_TYPE}}"
    [plugins.{CRI}.containerd.runtimes.nvidia-container-runtime]
      runtime_type = "${{RUNTIME_TYPE}}"
      [plugins.{CRI}.containerd.runtimes.nvidia-container-runtime.options]
        BinaryName = "nvidia-container-runtime"
    [plugins.{CRI}.containerd.runtimes.kata]
      runtime_type = "io.containerd.kata.v2"
  [plugins.{CRI}.cni]
    bin_dir = "${{SNAP_DATA}}/opt/cni/bin"
    conf_dir = "${{SNAP_DATA}}/args/cni-network"
  [plugins.{CRI}.registry]
    config_path = "${{SNAP_DATA}}/args/certs.d"
"""
LINE = ContainerdVersion.parse("1.7")


def _node() -> dict[str, str]:
    template = MK.template_path or ""
    return {template: TEMPLATE, MK.config_path: MK.render(TEMPLATE)}


def test_the_launcher_substitutes_the_placeholders() -> None:
    rendered = MK.render(TEMPLATE)
    assert "${" not in rendered
    assert 'default_runtime_name = "runc"' in rendered
    assert 'runtime_type = "io.containerd.runc.v2"' in rendered
    assert 'bin_dir = "/var/snap/microk8s/current/opt/cni/bin"' in rendered


def test_a_healthy_microk8s_node_is_healthy_as_found() -> None:
    plan = plan_node(MK, LINE, PlanOptions(toolkit=ToolkitMode.NONE), current=_node())
    assert plan.before.starts and plan.before.default_runtime == "runc"
    assert plan.before.runtimes["runc"].runtime_type == "io.containerd.runc.v2"
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    checked = check_node_config(MemoryFiles(rendered_layout(_node(), MK, LINE)),
                                MK.config_path, LINE)
    assert not [f for f in checked.findings if f.severity is Severity.ERROR]


@pytest.mark.parametrize("mode", [ToolkitMode.HOST, ToolkitMode.OPERATOR])
def test_the_plan_edits_the_nodes_own_template(mode: ToolkitMode) -> None:
    plan = plan_node(MK, LINE, PlanOptions(toolkit=mode, systemd_cgroup=True),
                     current=_node())
    written = plan.files[MK.template_path or ""]
    # The node's placeholders and its own runtimes stay; the launcher still fills them.
    for kept in ('default_runtime_name = "${RUNTIME}"', "${SNAP_DATA}/args/certs.d",
                 "nvidia-container-runtime", "kata"):
        assert kept in written, written
    assert {"runc", "kata", "nvidia-container-runtime"} <= set(plan.effective.runtimes)
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings


def test_only_the_rendered_file_captured_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The template is the file gpuplane edits: planning without it would write gpuplane's
    model template over the node's. The plan refuses and says what to capture."""
    from gpuplane.cli.main import main

    stacks = Path(__file__).resolve().parents[2] / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(stacks, tmp_path / "stacks")
    (tmp_path / "rendered.toml").write_text(MK.render(TEMPLATE))
    (tmp_path / "template.toml").write_text(TEMPLATE)
    stack = tmp_path / "stacks" / "Pulumi.microk8s-edge.yaml"
    original = stack.read_text()
    assert "    distro: microk8s\n" in original
    args = ["plan", "--stack", "microk8s-edge", "--stacks-dir", str(tmp_path / "stacks"),
            "--format", "json"]
    stack.write_text(original.replace("    distro: microk8s\n", "    distro: microk8s\n"
                                      f"    baselineFiles: {{{MK.config_path}: rendered.toml}}\n"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{MK.template_path} is not captured" in err and "baselineFiles" in err
    stack.write_text(original.replace(
        "    distro: microk8s\n", "    distro: microk8s\n    baselineFiles: "
        f"{{{MK.config_path}: rendered.toml, {MK.template_path}: template.toml}}\n"))
    code = main(args)
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    files = report["nodes"][0]["files"]
    assert "${RUNTIME}" in files[MK.template_path or ""]   # the node's own template


@pytest.mark.real
def test_the_rendered_template_loads_in_real_containerd(tmp_path: Path) -> None:
    line = "1.7"
    oracle.require_line(line)
    layout = rendered_layout(_node(), MK, LINE)
    write_layout(layout, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", MK.config_path))
    assert dumped.ok, dumped.error
    plan = plan_node(MK, LINE, PlanOptions(toolkit=ToolkitMode.NONE), current=_node())
    assert oracle.effective_from_dump(line, dumped.config) == plan.before.to_dict()


# A node on cgroup v1 whose snap data sits on zfs, at snap revision 8145: what the launcher
# put in (run-containerd-with-args@v1.35; `snapshotter` in actions/common/utils.sh).
V1_ZFS = (("${SNAP}", "/snap/microk8s/8145"), ("${SNAP_DATA}", "/var/snap/microk8s/8145"),
          ("${SNAPSHOTTER}", "native"), ("${RUNTIME}", "runc"),
          ("${RUNTIME_TYPE}", "io.containerd.runc.v1"))


def _v1_zfs_node() -> dict[str, str]:
    rendered = TEMPLATE
    for placeholder, value in V1_ZFS:
        rendered = rendered.replace(placeholder, value)
    return {MK.template_path or "": TEMPLATE, MK.config_path: rendered}


def test_the_plan_learns_the_launchers_values_from_the_nodes_rendered_file() -> None:
    learned = MK.learn_substitutions(TEMPLATE, _v1_zfs_node()[MK.config_path])
    # Every placeholder the template holds is learned (it has no ${SNAP}: the model's stays).
    assert dict(learned.render_substitutions) == {**dict(V1_ZFS),
                                                  "${SNAP}": "/snap/microk8s/current"}
    plan = plan_node(MK, LINE, PlanOptions(toolkit=ToolkitMode.HOST), current=_v1_zfs_node())
    assert plan.before.runtimes["runc"].runtime_type == "io.containerd.runc.v1"
    rendered = plan.layout[MK.config_path]
    assert 'snapshotter = "native"' in rendered and "/var/snap/microk8s/8145/args" in rendered
    assert "/current/" not in rendered
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings


def test_a_rendered_file_that_is_not_the_template_rendered_keeps_the_models_values() -> None:
    node = _v1_zfs_node()
    node[MK.config_path] += "# edited by hand\n"
    assert MK.learn_substitutions(TEMPLATE, node[MK.config_path]) == MK


@pytest.mark.real
def test_real_containerd_runs_the_learned_rendering_as_the_model_says(tmp_path: Path) -> None:
    line = "1.7"
    oracle.require_line(line)
    plan = plan_node(MK, LINE, PlanOptions(toolkit=ToolkitMode.HOST), current=_v1_zfs_node())
    write_layout(plan.layout, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", MK.config_path))
    assert dumped.ok, dumped.error
    assert dumped.config is not None
    assert oracle.effective_from_dump(line, dumped.config) == plan.effective.to_dict()
    assert oracle.snapshotter_from_dump(line, dumped.config) == "native"
