"""RKE2/K3s with the GPU Operator's toolkit, the way RKE2's docs recommend (issue #29,
"detected mode"): toolkit.env holds the socket only, gpuplane writes no node file, and the
distribution's own detection adds the runtimes once the toolkit has installed its
binaries in /usr/local/nvidia/toolkit (gpuplane.distros.rancher_mode). The plan chooses between
that and the template path, and says which and why. The real cases hold the predicted
rendered config against real containerd and the real toolkit installer."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout
from support.operator_env import operator_env
from test_differential import assert_same

from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros import rancher_mode, rancher_render
from gpuplane.distros.profiles import PROFILES, Distro, DistroProfile
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.node import plan_node
from gpuplane.rules.operator import check_operator_values
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

STACKS = Path(__file__).resolve().parents[2] / "stacks"
RKE2, K3S = PROFILES[Distro.RKE2], PROFILES[Distro.K3S]
OPERATOR_BIN = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
# The toolkit each chart ships (gpuplane.toolkit.operator CHART_TOOLKITS).
CHARTS = {"v25.3.4": "1.17.8", "v25.10.1": "1.18.1"}


def _options(chart: str = "v25.10.1", **extra: Any) -> PlanOptions:
    return PlanOptions(toolkit=ToolkitMode.OPERATOR, operator_chart=chart,
                       toolkit_version=CHARTS[chart], runtime_setup="detected",
                       writes_files=False, **extra)


def _stack(**changes: Any) -> dict[str, Any]:
    """The bundled rke2-operator stack's config, with `changes` ({section: {key: value}})."""
    raw = yaml.safe_load((STACKS / "Pulumi.rke2-operator.yaml").read_text())["config"]
    data = {key.removeprefix("gpuplane:"): value for key, value in raw.items()}
    for section, keys in changes.items():
        data[section] = {**data.get(section, {}), **keys}
    return data


def _runtimes(plan: Any) -> dict[str, Any]:
    return plan.effective.to_dict()["runtimes"]


# -- the choice ---------------------------------------------------------------------------


def test_auto_takes_the_detected_path_where_detection_gives_what_is_asked() -> None:
    cfg = parse_stack_config(_stack())
    options = cfg.plan_options()
    assert options.runtime_setup == "detected" and options.detected
    assert "no node file is written" in options.runtime_setup_why[0]
    assert cfg.intent().runtime_setup == "detected"


@pytest.mark.parametrize(("changes", "key"), [
    ({"runtime": {"nvidiaDefault": True}}, "gpuplane:runtime.nvidiaDefault"),
    ({"runtime": {"name": "gpu"}}, "gpuplane:runtime.name"),
    ({"runtime": {"systemdCgroup": True}}, "gpuplane:runtime.systemdCgroup"),
    ({"cluster": {"kubernetesVersion": "1.31.1", "containerdVersion": "1.7"}},
     "gpuplane:cluster.kubernetesVersion"),
    ({"cluster": {"kubernetesVersion": "1.29.9", "containerdVersion": "1.7"}},
     "gpuplane:cluster.kubernetesVersion"),
])
def test_what_detection_cannot_give_takes_the_template_path_and_says_why(
        changes: dict[str, Any], key: str) -> None:
    options = parse_stack_config(_stack(**changes)).plan_options()
    assert options.runtime_setup == "template"
    assert any(why.startswith(key) for why in options.runtime_setup_why), \
        options.runtime_setup_why


@pytest.mark.parametrize("version", ["1.28.15", "1.29.10", "1.30.6", "1.31.2", "1.32.0",
                                     "1.35.1"])
def test_the_october_2024_releases_and_later_detect_the_operators_dir(version: str) -> None:
    assert rancher_mode.detects_operator_toolkit(version)
    major, minor, patch = map(int, version.split("."))
    if (major, minor) < (1, 32):
        assert not rancher_mode.detects_operator_toolkit(f"{major}.{minor}.{patch - 1}")


def test_detected_where_detection_cannot_serve_is_a_stack_error() -> None:
    with pytest.raises(StackConfigError) as err:
        parse_stack_config(_stack(runtime={"nvidiaDefault": True},
                                 gpuOperator={"runtimeSetup": "detected"}))
    text = str(err.value)
    assert "gpuOperator.runtimeSetup" in text and "nvidiaDefault" in text
    assert "runtimeSetup: template" in text


def test_runtime_setup_is_refused_where_there_is_no_choice() -> None:
    data = _stack(cluster={"distro": "kubeadm", "kubernetesVersion": "1.31.6"},
                  gpuOperator={"runtimeSetup": "detected"})
    with pytest.raises(StackConfigError, match="applies to distro rke2 or k3s"):
        parse_stack_config(data)


def test_template_asked_for_keeps_the_template_path() -> None:
    data = _stack(cluster={"nodeAccess": "ssh"}, gpuOperator={"runtimeSetup": "template"})
    data |= {"nodes": [{"name": "n1", "host": "10.0.0.1"}], "sshPrivateKey": "k"}
    options = parse_stack_config(data).plan_options()
    assert options.runtime_setup == "template"
    assert options.runtime_setup_why[0].startswith(rancher_mode.KEY)


# -- the plan -----------------------------------------------------------------------------


@pytest.mark.parametrize("prof", [RKE2, K3S], ids=["rke2", "k3s"])
@pytest.mark.parametrize("line", ["1.7", "2.0"])
@pytest.mark.parametrize("chart", list(CHARTS))
def test_the_detected_plan_writes_nothing_and_predicts_the_detected_runtimes(
        prof: DistroProfile, line: str, chart: str) -> None:
    plan = plan_node(prof, ContainerdVersion.parse(line), _options(chart))
    assert plan.files == {}
    assert not plan.restarts
    env = {e["name"]: e["value"] for e in plan.toolkit_env}
    expected = {"CONTAINERD_SOCKET": "/run/k3s/containerd/containerd.sock"}
    if chart == "v25.3.4":   # RKE2's docs, v25.3.x tab
        expected |= {"ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false",
                     "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS": "true"}
    assert env == expected
    # The toolkit's own edit lands in /etc/containerd, which the distribution never reads.
    assert plan.toolkit_files and all(p.startswith("/etc/containerd/")
                                      for p in plan.toolkit_files)
    runtimes = _runtimes(plan)
    assert runtimes["nvidia"]["options"]["BinaryName"] == OPERATOR_BIN
    assert runtimes["nvidia-cdi"]["options"]["BinaryName"] == OPERATOR_BIN + ".cdi"
    assert "nvidia-legacy" not in runtimes
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] == \
        runtimes["runc"]["options"]["SystemdCgroup"]
    assert plan.effective.default_runtime == "runc"
    assert [f for f in plan.findings if f.severity != Severity.INFO] == [], plan.findings


def test_a_node_whose_own_template_replaces_the_built_in_one_is_an_error() -> None:
    """Detection renders only where the built-in template does: a node with a whole
    template of its own gets no nvidia runtime, and the plan says so."""
    version = ContainerdVersion.parse("2.0")
    baseline = RKE2.baseline(version)
    own = baseline[RKE2.config_path]
    node = {**baseline, RKE2.edit_path(version): own}
    plan = plan_node(RKE2, version, _options(), current=node)
    assert "nvidia" not in _runtimes(plan)
    assert [f for f in plan.findings if f.id == "FM01" and f.severity == Severity.ERROR]


def test_k3s_searches_the_operators_dir_before_path() -> None:
    rendered = K3S.baseline(ContainerdVersion.parse("2.0"))[K3S.config_path]
    both = (*rancher_render.OPERATOR_TOOLKIT_BINARIES, *rancher_render.HOST_TOOLKIT_BINARIES)
    runtimes = tomllib.loads(rancher_render.detect(rendered, both))["plugins"][
        "io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == OPERATOR_BIN


def test_the_bundled_stack_plans_clean_without_node_access_and_says_why() -> None:
    plan = plan_stack("rke2-operator", STACKS)
    assert plan["cluster"]["nodeAccess"] == "none"
    assert [f for f in plan["findings"]] == []
    assert all(n["files"] == {} for n in plan["nodes"])
    setup = plan["toolkit"]["runtimeSetup"]
    assert setup["path"] == "detected" and setup["why"]
    values = plan["helm"]["gpu-operator"]["values"]
    assert values["toolkit"]["env"] == [
        {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}]
    assert "env" not in values["devicePlugin"]


def test_the_template_stack_says_it_took_the_template_path_and_why() -> None:
    from gpuplane.cli.plan.toolkit_view import toolkit_lines

    lab = plan_stack("rke2-lab", STACKS)["toolkit"]
    assert lab["runtimeSetup"]["path"] == "template"
    assert lab["runtimeSetup"]["why"][0].startswith(rancher_mode.KEY)
    lines = toolkit_lines(plan_stack("rke2-operator", STACKS)["toolkit"])
    assert lines[0].startswith("runtime setup: detected (RKE2 adds the runtimes")
    assert "never reads" in lines[1]


def test_chart_v25_3_gets_the_device_plugins_volume_mounts_strategy() -> None:
    from gpuplane.config.helm_values import operator_values

    cfg = parse_stack_config(_stack(gpuOperator={"chartVersion": "v25.3.4"}))
    values = operator_values(cfg, [])
    assert values["devicePlugin"]["env"] == [
        {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]


# -- the rulebook -------------------------------------------------------------------------


def _rke2_intent(setup: str) -> ClusterIntent:
    return ClusterIntent(distro="rke2", containerd_version="2.0", kubernetes_version="1.31.6",
                         runtime_setup=setup)


def _findings(setup: str, env: list[dict[str, str]]) -> list[Any]:
    values = {"toolkit": {"enabled": True, "env": env}, "operator": {"runtimeClass": "nvidia"}}
    return [f for f in check_operator_values(values, _rke2_intent(setup),
                                             chart_version="v25.10.1", where="gpu-operator")
            if f.id in ("FM17", "FM09", "FM04")]


SOCKET = {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}


def test_the_rulebook_accepts_rke2s_documented_values_in_detected_mode() -> None:
    assert _findings("detected", [SOCKET]) == []
    # The same values without detected mode: the toolkit configures a daemon the kubelet
    # does not use.
    assert "FM17" in [f.id for f in _findings("template", [SOCKET])]


def test_detected_mode_flags_a_toolkit_config_in_etc_containerd_as_unread() -> None:
    env = [SOCKET, {"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"}]
    [found] = _findings("detected", env)
    assert found.severity == Severity.WARNING and "never reads" in found.message
    [template] = [f for f in _findings("template", env) if f.id == "FM17"]
    assert template.severity == Severity.ERROR
    assert "/etc/containerd/config.toml" in template.message


def test_detected_mode_refuses_the_toolkit_pointed_at_rke2s_template() -> None:
    env = [SOCKET, {"name": "CONTAINERD_CONFIG",
                    "value": "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl"}]
    [found] = _findings("detected", env)
    assert found.severity == Severity.ERROR and "replaces the built-in template" in \
        found.message
    assert "runtimeSetup: template" in found.fix


# -- against real containerd and the real toolkit -----------------------------------------


@pytest.mark.real
@pytest.mark.parametrize("prof", [RKE2, K3S], ids=["rke2", "k3s"])
@pytest.mark.parametrize("line", ["1.7", "2.0", "2.1"])
def test_real_containerd_runs_what_the_detected_plan_predicts(
        prof: DistroProfile, line: str, tmp_short: Path) -> None:
    version = ContainerdVersion.parse(line)
    plan = plan_node(prof, version, _options())
    write_layout(plan.layout, tmp_short)
    top = host_path(tmp_short, prof.config_path)
    assert_same(line, top)
    dumped = oracle.dump(line, top)
    assert dumped.ok, dumped.error
    seen = oracle.effective_from_dump(line, dumped.config)
    assert seen == plan.effective.to_dict()
    assert seen["runtimes"]["nvidia"]["options"]["BinaryName"] == OPERATOR_BIN


@pytest.mark.real
@pytest.mark.parametrize("chart", list(CHARTS))
@pytest.mark.parametrize("line", ["1.7", "2.0"])
def test_the_real_toolkit_with_rke2s_documented_env_gives_what_the_plan_predicts(
        chart: str, line: str, tmp_path: Path) -> None:
    """The real installer the chart ships, run with the env RKE2's docs give (the socket
    only): it writes only the files the plan predicts, all outside what RKE2's containerd
    reads, naming the binaries whose detection the plan models; RKE2's render with those
    binaries is the config the plan predicts, to real containerd."""
    toolkit = CHARTS[chart]
    version = ContainerdVersion.parse(line)
    plan = plan_node(RKE2, version, _options(chart))
    env = operator_env(chart, plan.toolkit_env, cdi=False, runtime_class="nvidia")
    real = toolkit_oracle.run_toolkit(toolkit, plan.baseline, env, tmp_path / "toolkit",
                                      containerd=(line, RKE2.containerd_binary))
    assert sorted(real.written) == sorted(plan.toolkit_files), real.log
    for path, text in real.written.items():
        assert tomllib.loads(text) == tomllib.loads(plan.toolkit_files[path]), path
    # Where the binaries are: the paths the real installer gives its own runtimes (in the
    # sandbox it copies no binaries; on a node they are there, RKE2's docs check the first).
    binaries = tuple(sorted({runtime["options"]["BinaryName"]
                             for text in real.written.values()
                             for runtime in _all_runtimes(tomllib.loads(text))}))
    assert set(binaries) == set(rancher_render.OPERATOR_TOOLKIT_BINARIES), binaries
    oracle.require_line(line)
    after = rendered_layout({**plan.baseline, **real.written}, RKE2, version, binaries)
    write_layout(after, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", RKE2.config_path))
    assert dumped.ok, dumped.error
    assert oracle.effective_from_dump(line, dumped.config) == plan.effective.to_dict()


def _all_runtimes(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every runtime table of a containerd config, whatever its CRI plugin name."""
    out: list[dict[str, Any]] = []
    for plugin in data.get("plugins", {}).values():
        runtimes = plugin.get("containerd", {}).get("runtimes", {}) \
            if isinstance(plugin, dict) else {}
        out += [r for r in runtimes.values() if isinstance(r, dict)]
    return out
