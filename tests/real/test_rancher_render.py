"""RKE2/K3s: gpuplane builds on what the distribution renders itself (issue #26, "K3s
templates"): runtime detection, the base template and the drop-in dir
(gpuplane.distros.rancher_render), never a frozen copy of the rendered config where the
distribution's own mechanisms suffice. The real-containerd cases hold the rendered
results against the daemon."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomlkit
from support import oracle
from support.layouts import host_path, write_layout
from test_differential import assert_same

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import PROFILES, Distro
from gpuplane.plan.edits import GPUPLANE_DROPIN
from gpuplane.plan.node import plan_node
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

K3S = PROFILES[Distro.K3S]
HOST = PlanOptions(toolkit=ToolkitMode.HOST)
DEFAULT = PlanOptions(toolkit=ToolkitMode.HOST, nvidia_default=True)
ETC = "/var/lib/rancher/k3s/agent/etc/containerd"


def _v(line: str) -> ContainerdVersion:
    return ContainerdVersion.parse(line)


def _rendered(line: str) -> str:
    return K3S.baseline(_v(line))[K3S.config_path]


def _with_dropin_import(line: str) -> str:
    """The rendered config of a K3s with PR #13680: its base imports the drop-in dir."""
    doc = tomlkit.parse(_rendered(line))
    name = "config-v3.toml.d" if line.startswith("2.") else "config.toml.d"
    doc["imports"] = [f"{ETC}/{name}/*.toml"]
    return tomlkit.dumps(doc)


# -- the model --------------------------------------------------------------------------


def test_detection_adds_the_host_toolkits_runtime_with_runcs_cgroup_setting() -> None:
    text = rancher_render.detect(_rendered("2.0"), rancher_render.HOST_TOOLKIT_BINARIES)
    runtimes = tomllib.loads(text)["plugins"]["io.containerd.cri.v1.runtime"][
        "containerd"]["runtimes"]
    assert runtimes["nvidia"] == {"runtime_type": "io.containerd.runc.v2", "options": {
        "BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}}
    assert set(runtimes) == {"runc", "nvidia"}, "only the binaries present are detected"
    assert rancher_render.detect(_rendered("2.0"), ()) == _rendered("2.0")
    assert rancher_render.detect(text, rancher_render.HOST_TOOLKIT_BINARIES) == text


def test_the_operator_install_dir_is_detected_too() -> None:
    text = rancher_render.detect(_rendered("1.7"), (
        "/usr/local/nvidia/toolkit/nvidia-container-runtime",
        "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"))
    runtimes = tomllib.loads(text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"][
        "runtimes"]
    assert runtimes["nvidia-cdi"]["options"]["BinaryName"] == (
        "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi")


def test_a_template_renders_the_base_in_place_and_gives_it_back() -> None:
    template = f"# mine\n{rancher_render.BASE}\n\n[debug]\n  level = \"info\"\n"
    base = _rendered("2.0")
    rendered = rancher_render.render(template, base)
    assert rendered.startswith("# mine\n") and rendered.endswith('level = "info"\n')
    assert rancher_render.base_of(rendered, template).strip() == base.strip()
    assert rancher_render.base_of(base, template) == base, "not rendered from it yet"
    assert rancher_render.extends_base('{{- template "base" . -}}\n')
    assert not rancher_render.extends_base(base)


def test_an_appended_table_the_base_defines_is_refused_like_containerd_does() -> None:
    """k3s-io/docs#566: `{{ template "base" . }}` plus a runc table fails to parse."""
    template = (f"{rancher_render.BASE}\n[plugins.'io.containerd.cri.v1.runtime'."
                "containerd.runtimes.runc]\n  cgroup_writable = true\n")
    problem = rancher_render.loads_ok(rancher_render.render(template, _rendered("2.0")))
    assert problem is not None


# -- the plan ---------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["1.7", "2.0", "2.1"])
def test_host_mode_writes_only_the_base_and_lets_k3s_detect_the_runtime(line: str) -> None:
    plan = plan_node(K3S, _v(line), HOST)
    target = K3S.edit_path(_v(line))
    assert plan.files == {target: rancher_render.BASE + "\n"}
    assert plan.effective.runtimes["nvidia"].options["BinaryName"] == (
        "/usr/bin/nvidia-container-runtime")
    assert plan.restarts and not plan.findings


def test_a_node_that_already_runs_the_detected_runtime_gets_nothing() -> None:
    current = {K3S.config_path: rancher_render.detect(_rendered("2.0"),
                                                      rancher_render.HOST_TOOLKIT_BINARIES)}
    plan = plan_node(K3S, _v("2.0"), HOST, current)
    assert plan.files == {} and not plan.restarts and not plan.findings


@pytest.mark.parametrize("line", ["1.7", "2.0"])
def test_a_k3s_that_imports_its_drop_in_dir_gets_gpuplanes_drop_in(line: str) -> None:
    current = {K3S.config_path: _with_dropin_import(line)}
    plan = plan_node(K3S, _v(line), DEFAULT, current)
    name = "config-v3.toml.d" if line.startswith("2.") else "config.toml.d"
    assert set(plan.files) == {f"{ETC}/{name}/{GPUPLANE_DROPIN}"}
    assert plan.effective.default_runtime == "nvidia"
    assert not [f for f in plan.findings if f.severity is Severity.ERROR]


def test_the_default_runtime_on_1x_falls_back_to_the_whole_template_and_says_so() -> None:
    """K3s's version-2 base renders `[plugins."io.containerd.grpc.v1.cri".containerd]`
    (the snapshotter), so `default_runtime_name` cannot be appended after it."""
    plan = plan_node(K3S, _v("1.7"), DEFAULT)
    target = K3S.edit_path(_v("1.7"))
    assert not rancher_render.extends_base(plan.files[target])
    assert plan.effective.default_runtime == "nvidia"
    warned = [f for f in plan.findings if f.id == "FM04"]
    assert [f.severity for f in warned] == [Severity.WARNING]
    assert "default-runtime: nvidia" in warned[0].fix


def test_the_default_runtime_on_2x_is_appended_to_the_base() -> None:
    plan = plan_node(K3S, _v("2.0"), DEFAULT)
    text = plan.files[K3S.edit_path(_v("2.0"))]
    assert text.startswith(rancher_render.BASE)
    assert "default_runtime_name" in text and "nvidia.options" not in text
    assert plan.effective.default_runtime == "nvidia" and not plan.findings


def test_a_users_base_template_is_kept_and_extended() -> None:
    target = K3S.edit_path(_v("2.0"))
    own = f"{rancher_render.BASE}\n\n[debug]\n  level = \"debug\"\n"
    current = {target: own, K3S.config_path: rancher_render.render(own, _rendered("2.0"))}
    plan = plan_node(K3S, _v("2.0"), DEFAULT, current)
    text = plan.files[target]
    assert text.startswith(own.rstrip("\n")) and "default_runtime_name" in text
    assert plan.effective.default_runtime == "nvidia"


# -- against real containerd ------------------------------------------------------------


@pytest.mark.real
@pytest.mark.parametrize("line", ["2.0", "2.1"])
def test_real_containerd_refuses_a_table_appended_twice_as_the_model_does(
        line: str, tmp_short: Path) -> None:
    oracle.require_line(line)
    template = (f"{rancher_render.BASE}\n[plugins.'io.containerd.cri.v1.runtime'."
                "containerd.runtimes.runc]\n  cgroup_writable = true\n")
    config = tmp_short / "config.toml"
    config.write_text(rancher_render.render(template, _rendered(line)))
    result = oracle.dump(line, config)
    assert not result.ok and "already exists" in result.error


@pytest.mark.real
@pytest.mark.parametrize(("line", "options"), [
    ("1.7", HOST), ("1.7", DEFAULT), ("2.0", HOST), ("2.0", DEFAULT), ("2.1", DEFAULT)])
def test_real_containerd_reads_what_the_model_predicts_from_k3s_render(
        line: str, options: PlanOptions, tmp_short: Path) -> None:
    """Base template, detection and the whole-template fallback: the config K3s renders
    from gpuplane's files (the model) is what real containerd runs."""
    plan = plan_node(K3S, _v(line), options)
    seen, _ = _real_view(line, plan.layout, tmp_short)
    assert seen["default_runtime"] == plan.effective.default_runtime
    assert seen["runtimes"]["nvidia"]["options"]["BinaryName"] == (
        "/usr/bin/nvidia-container-runtime")


@pytest.mark.real
@pytest.mark.parametrize("line", ["1.7", "2.0", "2.1"])
def test_real_containerd_merges_gpuplanes_drop_in_under_k3s_import(
        line: str, tmp_short: Path) -> None:
    plan = plan_node(K3S, _v(line), DEFAULT, {K3S.config_path: _with_dropin_import(line)})
    seen, dumped = _real_view(line, plan.layout, tmp_short)
    assert seen["default_runtime"] == "nvidia"
    assert set(seen["runtimes"]) >= {"runc", "nvidia"}
    assert oracle.sandbox_image_from_dump(line, dumped) == "rancher/mirrored-pause:3.6"


def _real_view(line: str, layout: dict[str, str], root: Path) -> tuple[dict, dict]:
    """Real containerd `line` on `layout` (K3s's rendered config and what it imports):
    the model's view must be the daemon's (test_differential.assert_same); returns the
    daemon's normalised runtime view and its whole dump."""
    oracle.require_line(line)
    write_layout(layout, root)
    top = host_path(root, K3S.config_path)
    assert_same(line, top)
    result = oracle.dump(line, top)
    assert result.ok, result.error
    assert result.config is not None
    return oracle.effective_from_dump(line, result.config), result.config


def test_a_capture_reads_k3s_drop_ins_and_the_plan_keeps_them(tmp_path: Path) -> None:
    """A K3s node with a drop-in of its own in config-v3.toml.d (e.g. a wasm runtime):
    `gpuplane nodes capture` reads it, the stack accepts it as a baseline file, and the
    plan from the capture keeps its runtime beside nvidia."""
    import subprocess

    from gpuplane.capture.remote import capture_script, parse_answer
    from gpuplane.config.baselines import plannable_paths

    own = f"{ETC}/config-v3.toml.d/10-wasm.toml"
    layout = {K3S.config_path: _with_dropin_import("2.0"),
              own: "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes."
                   "spin]\n  runtime_type = \"io.containerd.spin.v2\"\n"}
    for path, text in layout.items():
        host_path(tmp_path, path).parent.mkdir(parents=True, exist_ok=True)
        host_path(tmp_path, path).write_text(text)
    answer = subprocess.run(["sh", "-s"], input=capture_script(K3S, str(tmp_path)),
                            capture_output=True, text=True, check=True).stdout
    captured = parse_answer(answer).files
    assert captured == layout
    assert f"{ETC}/config-v3.toml.d/" in plannable_paths(K3S)
    plan = plan_node(K3S, _v("2.0"), DEFAULT, captured)
    assert {"runc", "spin", "nvidia"} <= set(plan.effective.runtimes)
    assert plan.effective.default_runtime == "nvidia"
    assert set(plan.files) == {f"{ETC}/config-v3.toml.d/{GPUPLANE_DROPIN}"}
