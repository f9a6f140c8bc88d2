"""Cluster-level rules over GPU Operator and HAMi Helm values, live nodes and the field
incidents: for every rule condition a violating and a passing case."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rulecheck import ids, only, well_formed

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.distros.profiles import PROFILES, Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, toolkit_env_for
from gpuplane.rules import (
    RULES,
    check_hami_nodes,
    check_hami_values,
    check_operator_values,
    explain,
)

OP = "Release gpu-operator"
HAMI = "Release hami"
CHART = "v25.10.1"
OLD_CHART = "v25.3.4"
SNAP_BASE = "/var/lib/k8s-containerd"


def intent(**kw: Any) -> ClusterIntent:
    kw.setdefault("nodes", (NodeIntent("gpu-a1", gpus=8), NodeIntent("gpu-a2", gpus=4)))
    return ClusterIntent(**kw)


def planned_env(i: ClusterIntent, *, cdi: bool | None = None, dropin: bool = True,
                ) -> list[dict[str, str]]:
    """toolkit.env exactly as gpuplane's planner renders it for the intent."""
    prof = profile(i.distro, i.containerd_base_dir)
    opts = PlanOptions(toolkit=ToolkitMode.OPERATOR, nvidia_default=i.nvidia_default,
                       cdi=i.cdi if cdi is None else cdi, runtime_name=i.runtime_class,
                       toolkit_version="1.18.1" if dropin else "1.17.8")
    return toolkit_env_for(prof, ContainerdVersion.parse(i.containerd_version), opts)


def good_values(i: ClusterIntent, **extra: Any) -> dict[str, Any]:
    """Values that fit the intent (what gpuplane renders), with `extra` merged on top."""
    values: dict[str, Any] = {
        "driver": {"enabled": not i.driver_preinstalled},
        "cdi": {"enabled": i.cdi},
        "toolkit": {"enabled": i.toolkit == "operator", "env": planned_env(i),
                    "version": "v1.18.1"},
        "devicePlugin": {"enabled": i.device_plugin != "hami"},
        "operator": {"runtimeClass": i.runtime_class},
    }
    if i.time_slicing_replicas:
        values["devicePlugin"]["config"] = {"name": i.time_slicing_configmap,
                                            "default": i.time_slicing_profile}
    for key, value in extra.items():
        values[key] = {**values.get(key, {}), **value} if isinstance(value, dict) else value
    return values


def op(values: dict[str, Any], i: ClusterIntent, chart: str | None = CHART):
    """The operator rules' findings, less FM28: these intents keep CDI off (the
    ClusterIntent default) on chart v25.10.1, which turns it on, and FM28's warning about
    that is test_rules_nri.py's."""
    found = well_formed(check_operator_values(values, i, chart_version=chart, where=OP), OP)
    return [f for f in found if f.id != "FM28"]


def env_of(values: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in values["toolkit"]["env"]}


def with_env(values: dict[str, Any], **changes: str | None) -> dict[str, Any]:
    env = env_of(values)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    values["toolkit"]["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return values


# ---------------------------------------------------------------- baseline: clean values

_DISTRO_CASES = [
    (d, line, base)
    for d in Distro for line in ("1.7", "2.1")
    for base in ((None, SNAP_BASE) if d is Distro.K8S_SNAP else (None,))
]


@pytest.mark.parametrize(("distro", "line", "base"), _DISTRO_CASES)
@pytest.mark.parametrize("nvidia_default", [False, True])
@pytest.mark.parametrize(("chart", "toolkit"), [(CHART, "v1.18.1"),
                                                (OLD_CHART, "v1.17.8-ubi8")])
def test_values_gpuplane_renders_pass_for_every_distro(distro: Distro, line: str,
                                                       base: str | None, nvidia_default: bool,
                                                       chart: str, toolkit: str) -> None:
    i = intent(distro=distro.value, containerd_version=line, containerd_base_dir=base,
               nvidia_default=nvidia_default, cdi=False)
    values = good_values(i, toolkit={"version": toolkit})
    values["toolkit"]["env"] = planned_env(i, dropin=toolkit >= "v1.18")
    assert op(values, i, chart=chart) == []


def test_clean_values_pass_with_time_slicing_and_hami() -> None:
    ts = intent(time_slicing_replicas=4)
    assert op(good_values(ts), ts) == []
    hami = intent(device_plugin="hami", nvidia_default=True)
    assert op(good_values(hami), hami) == []


# ---------------------------------------------------------------- incident 1: FM17

def test_incident_1_k8s_snap_custom_base_dir_without_toolkit_env_is_fm17() -> None:
    i = intent(distro="k8s-snap", containerd_base_dir=SNAP_BASE, containerd_version="1.7")
    values = good_values(i, toolkit={"env": []})
    f = only(op(values, i), "FM17")
    assert f.severity is Severity.ERROR
    root = f"{SNAP_BASE}/k8s-containerd"
    for text in (f"{root}/etc/containerd/config.toml", f"{root}/run/containerd/containerd.sock",
                 f"{root}/etc/containerd/conf.d/99-nvidia.toml",
                 "CONTAINERD_CONFIG is not set"):
        assert text in f.message
    assert "gpuplane:cluster.containerdBaseDir" in f.where
    assert f"{{name: CONTAINERD_SOCKET, value: {root}/run/containerd/containerd.sock}}" in f.fix
    assert f"value: file={root}/etc/containerd/config.toml" in f.fix


def test_incident_1_toolkit_env_naming_dockers_containerd_is_fm17() -> None:
    i = intent(distro="k8s-snap", containerd_base_dir=SNAP_BASE)
    values = with_env(good_values(i), CONTAINERD_SOCKET="/run/containerd/containerd.sock")
    f = only(op(values, i), "FM17")
    assert "CONTAINERD_SOCKET is /run/containerd/containerd.sock" in f.message
    assert "CONTAINERD_CONFIG" not in f.message  # only what is wrong is reported


def test_fm17_runtime_config_counts_as_config_and_runtime_socket_is_overwritten() -> None:
    i = intent(distro="k0s")
    env = env_of(good_values(i))
    values = with_env(good_values(i), CONTAINERD_CONFIG=None,
                      RUNTIME_CONFIG=env["CONTAINERD_CONFIG"])
    assert op(values, i) == []  # RUNTIME_CONFIG is the operator's second choice
    values = with_env(good_values(i), CONTAINERD_SOCKET=None,
                      RUNTIME_SOCKET=env["CONTAINERD_SOCKET"])
    assert "operator overwrites RUNTIME_SOCKET" in only(op(values, i), "FM17").message


def test_fm17_kubeadm_needs_no_env_at_all() -> None:
    i = intent(distro="kubeadm", nvidia_default=True)  # the toolkit's default too
    assert op(good_values(i, toolkit={"env": []}), i) == []


def test_fm17_config_source_alone_is_a_warning() -> None:
    i = intent(distro="k0s")
    values = with_env(good_values(i), RUNTIME_CONFIG_SOURCE=None)
    f = only(op(values, i), "FM17")
    assert f.severity is Severity.WARNING and "RUNTIME_CONFIG_SOURCE is not set" in f.message
    values = with_env(good_values(i), RUNTIME_CONFIG_SOURCE="file=/etc/containerd/config.toml")
    assert only(op(values, i), "FM17").severity is Severity.WARNING
    # Bare `file` reads CONTAINERD_CONFIG: on k0s the drop-in k0s's docs name
    # (/etc/k0s/containerd.d/nvidia.toml), not the CRI file k0s generates (issue #39) ...
    values = with_env(good_values(i), RUNTIME_CONFIG_SOURCE="file")
    assert only(op(values, i), "FM17").severity is Severity.WARNING
    # ... on kubeadm the top-level config, which is right.
    k = intent(distro="kubeadm")
    assert op(with_env(good_values(k), RUNTIME_CONFIG_SOURCE="file"), k) == []


def test_fm17_drop_in_only_checked_where_the_toolkit_writes_one() -> None:
    i = intent(distro="k8s-snap", containerd_base_dir=SNAP_BASE)
    values = with_env(good_values(i), RUNTIME_DROP_IN_CONFIG=None)
    assert "RUNTIME_DROP_IN_CONFIG is not set" in only(op(values, i), "FM17").message
    values["toolkit"]["version"] = "v1.17.8-ubuntu20.04"  # 1.17 rewrites the top-level file
    assert op(values, i) == []


def test_fm17_malformed_env_and_value_from() -> None:
    i = intent(distro="k0s")
    f = only(op(good_values(i, toolkit={"env": {"CONTAINERD_CONFIG": "/x"}}), i), "FM17")
    assert "not a list" in f.message
    values = with_env(good_values(i), CONTAINERD_SOCKET=None)
    values["toolkit"]["env"].append({"name": "CONTAINERD_SOCKET",
                                     "valueFrom": {"configMapKeyRef": {"name": "x"}}})
    assert op(values, i) == []  # a valueFrom cannot be judged from the values


def test_fm17_only_when_the_operator_runs_the_toolkit() -> None:
    i = intent(distro="k0s", toolkit="host")
    values = good_values(i, toolkit={"env": []})
    assert "FM17" not in ids(op(values, i))


# ---------------------------------------------------------------- incident 4 / FM04

def test_incident_4_rke2_toolkit_pointed_at_generated_config_is_fm04() -> None:
    i = intent(distro="rke2", containerd_version="1.7")
    generated = PROFILES[Distro.RKE2].config_path
    f = only(op(with_env(good_values(i), CONTAINERD_CONFIG=generated), i), "FM04")
    assert "generates from" in f.message and f.fix.count("config.toml.tmpl") >= 1
    wrong_template = PROFILES[Distro.RKE2].template_v3_path
    assert ids(op(with_env(good_values(i), CONTAINERD_CONFIG=wrong_template), i)) == ["FM04"]


def test_rke2_without_env_is_fm17_with_the_template_as_fix() -> None:
    i = intent(distro="rke2", containerd_version="2.1")
    f = only(op(good_values(i, toolkit={"env": []}), i), "FM17")
    assert "config-v3.toml.tmpl" in f.fix and "/run/k3s/containerd/containerd.sock" in f.fix


# ---------------------------------------------------------------- incident 2 / FM15

def test_incident_2_ubuntu_toolkit_default_on_amazon_linux_2_is_fm15() -> None:
    i = intent(nodes=(NodeIntent("eks-1", 1, os="amzn2"), NodeIntent("eks-2", 1, os="amzn2"),
                      NodeIntent("ubu", 1, os="ubuntu22.04")), nvidia_default=True)
    values = good_values(i)
    del values["toolkit"]["version"]  # the chart's default tag: v1.17.8-ubuntu20.04
    f = only(op(values, i, chart=OLD_CHART), "FM15")
    assert "eks-1, eks-2 run amzn2 (glibc 2.26)" in f.message and "ubu run" not in f.message
    assert "glibc 2.31" in f.message and "-centos7" in f.fix
    assert "gpuplane:gpuOperator.toolkitImage" in f.where
    # v25.10's default toolkit tag has no OS flavour: nothing to judge.
    assert "FM15" not in ids(op(values, i, chart=CHART))


@pytest.mark.parametrize(("tag", "os", "bad"), [
    ("v1.17.8-ubuntu20.04", "amzn2", True),
    ("v1.17.8-ubi8", "amzn2", True),
    ("v1.14.6-centos7", "amzn2", False),
    ("v1.17.8-ubi8", "rhel8", False),
    ("v1.17.8-ubuntu20.04", "ubuntu22.04", False),
    ("v1.17.8-ubuntu20.04", "ubuntu18.04", True),
    ("v1.17.8-ubuntu20.04", "rocky8.9", True),
    ("v1.17.8-ubuntu20.04", "plan9", False),   # unknown OS: not judged
    ("v1.18.1", "amzn2", False),               # no flavour suffix: not judged
])
def test_fm15_flavour_table(tag: str, os: str, bad: bool) -> None:
    i = intent(nodes=(NodeIntent("n", 1, os=os),))
    values = good_values(i, toolkit={"version": tag})
    assert ("FM15" in ids(op(values, i))) is bad


def test_fm15_full_image_reference_and_disabled_toolkit() -> None:
    i = intent(nodes=(NodeIntent("n", 1, os="amzn2"),), toolkit="host")
    values = good_values(i, toolkit={"image": "mirror.local/nvidia/container-toolkit:"
                                              "v1.17.8-ubuntu20.04", "version": None})
    values["toolkit"]["enabled"] = False
    assert "FM15" not in ids(op(values, i))
    values["toolkit"]["enabled"] = True
    assert "FM15" in ids(op(values, i))


# ---------------------------------------------------------------- FM08 driver

def test_fm08_driver_default_enabled_while_preinstalled() -> None:
    i = intent(driver_preinstalled=True)
    values = good_values(i)
    del values["driver"]
    f = only(op(values, i), "FM08")
    assert "not set (chart default: true)" in f.message
    assert f.where == f"{OP} values.driver.enabled (gpuplane:gpuOperator.driver)"
    assert ids(op(good_values(i, driver={"enabled": "true"}), i)) == ["FM08"]
    assert op(good_values(i, driver={"enabled": "false"}), i) == []


def test_fm08_managed_driver_disabled() -> None:
    i = intent(driver_preinstalled=False)
    assert op(good_values(i), i) == []
    assert "nothing installs" in only(op(good_values(i, driver={"enabled": False}), i),
                                      "FM08").message


# ---------------------------------------------------------------- FM12 / FM13 HAMi

def test_fm12_operator_device_plugin_default_with_hami() -> None:
    i = intent(device_plugin="hami", nvidia_default=True)
    values = good_values(i)
    del values["devicePlugin"]["enabled"]
    assert "chart default: true" in only(op(values, i), "FM12").message
    assert "FM12" not in ids(op(good_values(i), i))


@pytest.mark.parametrize(("chart", "set_to", "fires"), [
    (CHART, None, True),        # v25.10 defaults cdi.enabled to true
    (OLD_CHART, None, False),   # v25.3 defaults it to false
    (None, None, True),         # unknown chart: taken as current
    (OLD_CHART, True, True),
    (CHART, False, False),
])
def test_fm13_operator_cdi_with_hami(chart: str | None, set_to: bool | None,
                                     fires: bool) -> None:
    i = intent(device_plugin="hami", nvidia_default=False)
    values = good_values(i)
    values["cdi"] = {} if set_to is None else {"enabled": set_to}
    found = [f for f in op(values, i, chart=chart) if f.id == "FM13" and "CDI" in f.message]
    assert bool(found) is fires, found


# ---------------------------------------------------------------- FM16

def test_fm16_cdi_on_containerd_1_6() -> None:
    i = intent(containerd_version="1.6", cdi=False)
    values = good_values(i)
    values["cdi"] = {}
    f = only(op(values, i), "FM16")
    assert "chart v25.10.1 defaults it to true" in f.message and "containerd 1.6" in f.message
    values["cdi"] = {"enabled": False}
    assert "FM16" not in ids(op(values, i))
    i17 = intent(containerd_version="1.7", cdi=True)
    assert "FM16" not in ids(op(good_values(i17), i17))


def test_bad_containerd_version_names_the_stack_key() -> None:
    with pytest.raises(ValueError, match=r"gpuplane:cluster\.containerdVersion"):
        check_operator_values({}, intent(containerd_version="banana"), chart_version=CHART,
                              where=OP)


# ---------------------------------------------------------------- FM10 plugin config

def test_fm10_plugin_config_name_and_default() -> None:
    i = intent(time_slicing_replicas=4, time_slicing_configmap="ts", time_slicing_profile="any")
    assert op(good_values(i), i) == []
    bad = good_values(i, devicePlugin={"config": {"name": "other", "default": "a100"}})
    found = op(bad, i)
    assert ids(found) == ["FM10", "FM10"]
    assert any("'other'" in f.message and "ts" in f.message for f in found)
    assert any("gpuplane:timeSlicing.profile" in f.where for f in found)
    empty = good_values(i, devicePlugin={"config": {}})
    assert ids(op(empty, i)) == ["FM10", "FM10"]


def test_fm10_plugin_config_create_clashes_with_gpuplanes_configmap() -> None:
    i = intent(time_slicing_replicas=4, time_slicing_configmap="ts")
    profile_yaml = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 4\n")
    values = good_values(i, devicePlugin={"config": {"name": "ts", "default": "any",
                                                     "create": True,
                                                     "data": {"any": profile_yaml}}})
    f = only(op(values, i), "FM10")
    assert "two owners" in f.message


def test_fm10_plugin_config_without_stack_time_slicing() -> None:
    i = intent()
    profile_yaml = "version: v1\nflags:\n  renameByDefault: true\n"
    values = good_values(i, devicePlugin={"config": {"name": "mine", "default": "x",
                                                     "create": True,
                                                     "data": {"any": profile_yaml}}})
    found = op(values, i)
    assert ids(found) == ["FM10", "FM10", "FM10"]
    assert any(f.severity is Severity.WARNING and "does not know" in f.message for f in found)
    assert any("flags.renameByDefault" in f.where for f in found)  # the chart's data checked
    assert any("has only 'any'" in f.message for f in found)
    values = good_values(i, devicePlugin={"config": {"name": "mine", "create": True}})
    assert any("creates nothing" in f.message for f in op(values, i))
    values = good_values(i, devicePlugin={"config": {"name": "", "create": False}})
    assert op(values, i) == []


# ---------------------------------------------------------------- toolkit on/off

def test_fm05_operator_toolkit_beside_host_toolkit() -> None:
    i = intent(toolkit="host")
    values = good_values(i)
    assert op(values, i) == []
    del values["toolkit"]["enabled"]
    f = only(op(values, i), "FM05")
    assert f.severity is Severity.WARNING and "two writers" in f.message


def test_fm01_operator_toolkit_disabled_while_stack_relies_on_it() -> None:
    i = intent(toolkit="operator")
    f = only(op(good_values(i, toolkit={"enabled": False}), i), "FM01")
    assert "nothing writes the nvidia runtime" in f.message


# ---------------------------------------------------------------- runtime class / default

def test_fm11_operator_runtime_class_differs_from_stack() -> None:
    i = intent(runtime_class="nvidia")
    f = only(op(good_values(i, operator={"runtimeClass": "nvidia-gpu"}), i), "FM11")
    assert f.where.endswith("values.operator.runtimeClass (gpuplane:runtime.name)")
    values = good_values(i)
    del values["operator"]
    assert op(values, i) == []  # chart default nvidia


def test_nvidia_default_wanted_but_cdi_mode_forbids_it() -> None:
    i = intent(nvidia_default=True, cdi=False)
    values = good_values(i)
    values["cdi"] = {}  # chart v25.10 default: CDI on, set-as-default forced false
    f = only(op(values, i), "FM11")
    assert "CDI mode" in f.message and "gpuplane:runtime.nvidiaDefault" in f.where
    hami = intent(nvidia_default=True, device_plugin="hami")
    values = good_values(hami)
    values["cdi"] = {}
    assert "FM13" in ids(op(values, hami)) and "FM11" not in ids(op(values, hami))
    # NVIDIA_RUNTIME_SET_AS_DEFAULT in toolkit.env overrides the CDI default.
    values = with_env(good_values(i), NVIDIA_RUNTIME_SET_AS_DEFAULT="true")
    values["cdi"] = {}
    assert "FM11" not in ids(op(values, i))


def test_fm01_fm09_nvidia_default_not_wanted_but_toolkit_default_sets_it() -> None:
    i = intent(nvidia_default=False, cdi=False)
    values = with_env(good_values(i), CONTAINERD_SET_AS_DEFAULT=None)
    f = only(op(values, i), "FM09")
    assert f.severity is Severity.WARNING and "toolkit defaults to true" in f.message
    values = with_env(good_values(i), CONTAINERD_SET_AS_DEFAULT="TRUE")
    assert "FM09" in ids(op(values, i))
    values = with_env(good_values(i), CONTAINERD_SET_AS_DEFAULT="yes please")
    assert "not a boolean" in only(op(values, i), "FM01").message


# ---------------------------------------------------------------- FM18

@pytest.mark.parametrize(("chart", "pinned"), [
    ("v25.10.1", True), ("25.10.1", True), ("v25.10.1-rc.1", True),
    (None, False), ("", False), ("25.10", False), ("~25.10.0", False), ("^25", False),
    (">=25.3.0", False), ("latest", False), ("25.10.x", False),
])
def test_fm18_operator_chart_version(chart: str | None, pinned: bool) -> None:
    i = intent()
    found = [f for f in op(good_values(i), i, chart=chart) if f.id == "FM18"]
    assert (not found) is pinned
    if found:
        assert "gpuplane:gpuOperator.chartVersion" in found[0].where


@pytest.mark.parametrize(("section", "spec", "bad"), [
    ("toolkit", {"version": "latest"}, True),
    ("toolkit", {"version": "v1.18.1"}, False),
    ("driver", {"version": "570.172.08"}, False),
    ("driver", {"version": "stable"}, True),
    ("devicePlugin", {"version": "sha256:" + "a" * 64}, False),
    ("dcgmExporter", {"version": "main"}, True),
    ("gfd", {"repository": "mirror.local/nvidia"}, False),   # chart's pinned default tag
    ("migManager", {"image": "mirror.local/k8s-mig-manager", "version": None}, True),
    ("migManager", {"image": "mirror.local/k8s-mig-manager:v0.15.0"}, False),
    ("operator", {"repository": "nvcr.io/nvidia", "version": ""}, False),  # appVersion
    ("gds", {"repository": "nvcr.io/nvidia", "version": ""}, True),
])
def test_fm18_image_tags(section: str, spec: dict[str, Any], bad: bool) -> None:
    i = intent()
    values = good_values(i)
    values[section] = {**values.get(section, {}), **spec}
    found = [f for f in op(values, i) if f.id == "FM18"]
    assert bool(found) is bad, found
    if section == "toolkit" and found:
        assert "gpuplane:gpuOperator.toolkitImage" in found[0].where


# ---------------------------------------------------------------- HAMi values

def hami_intent(**kw: Any) -> ClusterIntent:
    kw.setdefault("device_plugin", "hami")
    kw.setdefault("kubernetes_version", "1.31.4")
    return intent(**kw)


def hami_good(i: ClusterIntent, **extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "scheduler": {"kubeScheduler": {"image": {"registry": "registry.k8s.io",
                                                  "tag": f"v{i.kubernetes_version}"}},
                      "admissionWebhook": {"failurePolicy": "Fail", "whitelistNamespaces": [
                          "kube-system", i.hami_namespace, i.operator_namespace]},
                      "replicas": 2},
        "devicePlugin": {"runtimeClassName": i.runtime_class, "deviceSplitCount": 10,
                         "deviceMemoryScaling": 1},
    }
    for key, value in extra.items():
        values[key] = {**values.get(key, {}), **value}
    return values


def hv(values: dict[str, Any], i: ClusterIntent, chart: str | None = "2.10.0"):
    return well_formed(check_hami_values(values, i, chart_version=chart, where=HAMI), HAMI)


def test_hami_good_values_pass() -> None:
    i = hami_intent()
    assert hv(hami_good(i), i) == []


def test_incident_5_hami_chart_defaults() -> None:
    i = hami_intent(nvidia_default=False)
    found = hv({}, i)
    tag = [f for f in found if "kubeScheduler.image.tag" in f.where]
    assert tag and "empty" in tag[0].message and tag[0].severity is Severity.ERROR
    rc = [f for f in found if "runtimeClassName" in f.where]
    assert rc and "NVML" in rc[0].message
    policy = [f for f in found if "failurePolicy" in f.where]
    assert policy and policy[0].severity is Severity.WARNING
    assert "chart default: Ignore" in policy[0].message and "Fail" in policy[0].fix
    assert ids(found) == ["FM13", "FM13", "FM13"]


@pytest.mark.parametrize(("tag", "severity"), [
    ("v1.31.4", None), (" v1.31.4 ", None), ("v1.31.2", Severity.WARNING),
    ("v1.30.4", Severity.ERROR), ("1.31.4", Severity.ERROR), ("latest", Severity.ERROR),
])
def test_fm13_scheduler_tag(tag: str, severity: Severity | None) -> None:
    i = hami_intent()
    values = hami_good(i)
    values["scheduler"]["kubeScheduler"]["image"]["tag"] = tag
    found = [f for f in hv(values, i) if "kubeScheduler" in f.where]
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_fm13_fm18_scheduler_tag_key_follows_chart_version() -> None:
    i = hami_intent()
    old = hami_good(i)
    old["scheduler"]["kubeScheduler"] = {"imageTag": "v1.31.4"}
    assert hv(old, i, chart="2.6.0") == []
    # unknown chart (FM18 aside): the values use the old key, so that one is read
    assert ids(hv(old, i, chart=None)) == ["FM18"]
    f = only(hv(old, i, chart="2.10.0"), "FM13")
    assert "this chart reads scheduler.kubeScheduler.image.tag" in f.message
    string_image = hami_good(i)
    string_image["scheduler"]["kubeScheduler"] = {"image": "registry/kube-scheduler",
                                                  "imageTag": ""}
    assert "imageTag is empty" in only(hv(string_image, i, chart=None), "FM13").message


def test_fm13_hami_runtime_class() -> None:
    i = hami_intent(nvidia_default=True)
    values = hami_good(i, devicePlugin={"runtimeClassName": ""})
    assert hv(values, i) == []  # nvidia is the default: no class needed
    i = hami_intent(nvidia_default=False)
    assert ids(hv(values, i)) == ["FM13"]
    values = hami_good(i, devicePlugin={"runtimeClassName": "nvidia-legacy"})
    assert "'nvidia-legacy'" in only(hv(values, i), "FM13").message


@pytest.mark.parametrize(("selector", "severity"), [
    ({"gpu": "on"}, None),
    ({"gpu": True}, Severity.ERROR),
    ({"gpu": "yes"}, Severity.ERROR),
    ({"gpu": "on", "pool": "a100"}, Severity.WARNING),
    ({}, Severity.WARNING),
    ("gpu=on", Severity.ERROR),
])
def test_fm13_hami_node_selector(selector: Any, severity: Severity | None) -> None:
    i = hami_intent()
    values = hami_good(i, devicePlugin={"nvidiaNodeSelector": selector})
    found = [f for f in hv(values, i) if "nvidiaNodeSelector" in f.where]
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_fm13_hami_webhook() -> None:
    i = hami_intent()
    one = hami_good(i)
    one["scheduler"]["replicas"] = 1
    f = only(hv(one, i), "FM13")
    assert f.severity is Severity.WARNING and "gpuplane:hami.schedulerReplicas" in f.where
    no_leader = hami_good(i)
    no_leader["scheduler"]["leaderElect"] = False
    assert "leaderElect is false" in only(hv(no_leader, i), "FM13").message
    odd = hami_good(i)
    odd["scheduler"]["admissionWebhook"]["failurePolicy"] = "Retry"
    assert only(hv(odd, i), "FM13").severity is Severity.ERROR
    off = hami_good(i)
    off["scheduler"]["admissionWebhook"]["enabled"] = False
    assert "nothing sends GPU pods" in only(hv(off, i), "FM13").message


@pytest.mark.parametrize(("key", "value", "bad"), [
    ("deviceSplitCount", 0, True), ("deviceSplitCount", 1, False),
    ("deviceSplitCount", 2.5, True), ("deviceSplitCount", "ten", True),
    ("deviceMemoryScaling", 0, True), ("deviceMemoryScaling", -1, True),
    ("deviceMemoryScaling", 1.5, False), ("deviceCoreScaling", 0, True),
])
def test_fm14_hami_split_settings(key: str, value: Any, bad: bool) -> None:
    i = hami_intent()
    found = hv(hami_good(i, devicePlugin={key: value}), i)
    assert ids(found) == (["FM14"] if bad else [])
    if bad:
        assert f"gpuplane:hami.{key}" in found[0].where


def test_fm18_hami_chart_and_images() -> None:
    i = hami_intent()
    assert ids(hv(hami_good(i), i, chart="~2.10")) == ["FM18"]
    assert ids(hv(hami_good(i), i, chart=None)) == ["FM18"]
    values = hami_good(i, devicePlugin={"image": {"tag": "latest"}})
    f = only(hv(values, i), "FM18")
    assert "gpuplane:hami.values.devicePlugin.image.tag" in f.where
    values = hami_good(i, devicePlugin={"image": {"tag": ""}})  # falls back to global tag
    assert hv(values, i) == []


def test_fm12_hami_release_on_an_operator_stack() -> None:
    i = intent(device_plugin="gpu-operator")
    assert ids(hv({}, i)) == ["FM12"]
    assert hv({"devicePlugin": {"enabled": False}}, i) == []


# ---------------------------------------------------------------- HAMi nodes

def node(name: str, labels: dict[str, str] | None = None, gpus: str | None = None) -> dict:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": labels or {}}, "status": {}}
    if gpus is not None:
        obj["status"]["capacity"] = {"nvidia.com/gpu": gpus, "cpu": "64"}
    return obj


def test_incident_5_gpu_nodes_without_gpu_on() -> None:
    i = hami_intent(nodes=(NodeIntent("gpu-a1", 8),))
    nodes = [
        node("gpu-a1"),                                                   # stack node
        node("gpu-b1", {"feature.node.kubernetes.io/pci-10de.present": "true"}),
        node("gpu-c1", {"gpu": "off"}, gpus="4"),                         # capacity
        node("gpu-d1", {"gpu": "on"}, gpus="4"),                          # fine
        node("cpu-1", {"kubernetes.io/os": "linux"}, gpus="0"),           # not a GPU node
        node("cpu-2", gpus="lots"),                                       # junk capacity
    ]
    found = well_formed(check_hami_nodes(nodes, i))
    assert sorted(f.where.split()[1] for f in found) == ["gpu-a1", "gpu-b1", "gpu-c1"]
    assert any("gpu=off" in f.message for f in found)
    assert all("kubectl label node" in f.fix for f in found)
    assert check_hami_nodes(nodes, intent(device_plugin="gpu-operator")) == []


# ---------------------------------------------------------------- robustness, catalogue

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["enabled", "env", "version", "image", "repository", "config",
                         "name", "default", "create", "data", "tag", "failurePolicy",
                         "nvidiaNodeSelector", "runtimeClassName", "deviceSplitCount",
                         "kubeScheduler", "admissionWebhook", "replicas", "value"]),
        inner, max_size=4),
    max_leaves=12)
_SECTIONS = st.dictionaries(
    st.sampled_from(["driver", "toolkit", "devicePlugin", "cdi", "operator", "scheduler",
                     "gfd", "global"]), _JSON, max_size=5)


@settings(max_examples=150, deadline=None)
@given(values=_SECTIONS, hami=st.booleans(), chart=st.sampled_from([None, CHART, OLD_CHART,
                                                                     "2.6.0", "junk"]))
def test_arbitrary_values_never_crash_and_are_deterministic(values: dict, hami: bool,
                                                             chart: str | None) -> None:
    i = hami_intent(device_plugin="hami" if hami else "gpu-operator",
                    distro="k8s-snap", containerd_base_dir=SNAP_BASE)
    first = op(values, i, chart=chart)
    assert first == op(values, i, chart=chart)
    assert hv(values, i, chart=chart) == hv(values, i, chart=chart)


def test_explain_covers_every_rule() -> None:
    for rule_id in RULES:
        text = explain(rule_id)
        assert text.startswith(f"{rule_id}:") and "Fix:" in text
