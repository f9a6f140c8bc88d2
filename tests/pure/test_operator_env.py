"""What the GPU Operator gives its toolkit container, per chart tag: gpuplane's model
(gpuplane.toolkit.operator) against the suite's own reading (tests/support/operator_env.py), and
the facts that differ between tags, checked on both."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.operator_env import TAGS, operator_env

from gpuplane.toolkit.operator import (
    CHART_TOOLKITS,
    chart_operator_env,
    chart_tuple,
    installer_env,
)
from gpuplane.toolkit.options import PlanOptions

Env = list[dict[str, str]]
Reader = Callable[..., dict[str, str]]


def _product(chart: str, toolkit_env: Env, *, cdi: bool, runtime_class: str) -> dict[str, str]:
    return chart_operator_env(chart_tuple(chart), toolkit_env, cdi=cdi,
                              runtime_class=runtime_class)


READERS = pytest.mark.parametrize("read", [_product, operator_env], ids=["gpuplane", "tests"])


def _e(**env: str) -> Env:
    return [{"name": k, "value": v} for k, v in env.items()]


# What gpuplane renders (k0s-like paths), a user's odd settings, and nothing.
ENVS: dict[str, Env] = {
    "none": [],
    "gpuplane": _e(CONTAINERD_CONFIG="/etc/k0s/containerd.d/00-base.toml",
                   CONTAINERD_SOCKET="/run/k0s/containerd.sock",
                   RUNTIME_CONFIG_SOURCE="file=/etc/k0s/containerd.toml",
                   RUNTIME_EXECUTABLE_PATH="/var/lib/k0s/bin/containerd",
                   CONTAINERD_RUNTIME_CLASS="gpu", CONTAINERD_SET_AS_DEFAULT="false",
                   RUNTIME_DROP_IN_CONFIG="/etc/k0s/containerd.d/99-nvidia.toml"),
    "odd": _e(CONTAINERD_CONFIG="", RUNTIME_CONFIG="/opt/c/config.toml",
              RUNTIME_SOCKET="/x/y.sock", RUNTIME_DROP_IN_CONFIG="",
              NVIDIA_RUNTIME_SET_AS_DEFAULT="true", CDI_ENABLED="false",
              RUNTIME_CONFIG_SOURCE="command,file=/etc/containerd/config.toml",
              RUNTIME="docker"),
}


def test_both_readings_cover_every_chart_gpuplane_supports() -> None:
    assert set(TAGS) == set(CHART_TOOLKITS)


@pytest.mark.parametrize("chart", TAGS)
@pytest.mark.parametrize("env", sorted(ENVS))
@pytest.mark.parametrize("cdi", [False, True], ids=["cdi-off", "cdi-on"])
def test_gpuplane_model_matches_the_suite_reading(chart: str, env: str, cdi: bool) -> None:
    for runtime_class in ("nvidia", "gpu", ""):
        want = operator_env(chart, ENVS[env], cdi=cdi, runtime_class=runtime_class)
        assert _product(chart, ENVS[env], cdi=cdi, runtime_class=runtime_class) == want


# ---------------------------------------------------------------- facts by tag

@READERS
@pytest.mark.parametrize(("chart", "args", "pid"), [
    ("v24.3.0", True, False), ("v24.6.2", True, True), ("v24.9.2", True, True),
    ("v25.3.0", False, True), ("v26.7.0", False, True)])
def test_base_env_of_the_daemonset_asset(read: Reader, chart: str, args: bool,
                                         pid: bool) -> None:
    env = read(chart, [], cdi=False, runtime_class="nvidia")
    assert ("RUNTIME_ARGS" in env) == args
    assert ("TOOLKIT_PID_FILE" in env) == pid
    assert env["ROOT"] == "/usr/local/nvidia" and env["NVIDIA_VISIBLE_DEVICES"] == "void"


@READERS
@pytest.mark.parametrize(("chart", "sets"), [
    ("v24.3.0", False), ("v24.6.2", False), ("v24.9.0", True), ("v25.10.1", True)])
def test_runtime_config_and_socket_are_set_from_v24_9(read: Reader, chart: str,
                                                      sets: bool) -> None:
    env = read(chart, _e(RUNTIME_SOCKET="/x/y.sock", CONTAINERD_SOCKET="/run/k/c.sock"),
               cdi=False, runtime_class="nvidia")
    assert env["CONTAINERD_SOCKET"] == "/run/k/c.sock"
    assert env["RUNTIME_SOCKET"] == ("/run/k/c.sock" if sets else "/x/y.sock")
    assert env.get("RUNTIME_CONFIG") == ("/etc/containerd/config.toml" if sets else None)


@READERS
@pytest.mark.parametrize(("chart", "user_wins"), [
    ("v24.3.0", False), ("v25.3.2", False), ("v25.3.3", True), ("v25.3.4", True),
    ("v26.3.3", True)])
def test_toolkit_env_goes_after_the_cdi_settings_from_v25_3_3(
        read: Reader, chart: str, user_wins: bool) -> None:
    env = read(chart, _e(CDI_ENABLED="false"), cdi=True, runtime_class="nvidia")
    assert env["CDI_ENABLED"] == ("false" if user_wins else "true")


@READERS
@pytest.mark.parametrize(("chart", "new"), [
    ("v24.9.2", False), ("v25.3.4", False), ("v25.10.0", True), ("v26.7.0", True)])
def test_cdi_settings_change_at_v25_10(read: Reader, chart: str, new: bool) -> None:
    env = read(chart, [], cdi=True, runtime_class="nvidia")
    assert env["CDI_ENABLED"] == "true" and env["CRIO_CONFIG_MODE"] == "config"
    assert env.get("NVIDIA_RUNTIME_SET_AS_DEFAULT") == ("false" if new else None)
    assert env.get("NVIDIA_CONTAINER_RUNTIME_MODE") == ("cdi" if new else None)
    assert ("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES" in env) == (not new)
    off = read(chart, [], cdi=False, runtime_class="nvidia")
    assert not {"CDI_ENABLED", "NVIDIA_RUNTIME_SET_AS_DEFAULT", "CRIO_CONFIG_MODE"} & set(off)


@READERS
@pytest.mark.parametrize(("chart", "operator_dropin"), [
    ("v24.3.0", False), ("v25.3.4", False), ("v25.10.0", True), ("v26.3.0", True),
    ("v26.7.0", True)])
def test_drop_in_and_config_source_handled_from_v25_10(
        read: Reader, chart: str, operator_dropin: bool) -> None:
    default = "/etc/containerd/conf.d/99-nvidia.toml"
    bare = read(chart, [], cdi=False, runtime_class="nvidia")
    empty = read(chart, _e(RUNTIME_DROP_IN_CONFIG=""), cdi=False, runtime_class="nvidia")
    mine = read(chart, _e(RUNTIME_DROP_IN_CONFIG="/etc/k/99.toml",
                          RUNTIME_CONFIG_SOURCE="file=/etc/k/c.toml"),
                cdi=False, runtime_class="nvidia")
    assert mine["RUNTIME_DROP_IN_CONFIG"] == "/etc/k/99.toml"
    assert mine["RUNTIME_CONFIG_SOURCE"] == "file=/etc/k/c.toml"   # node paths both ways
    if operator_dropin:
        assert bare["RUNTIME_DROP_IN_CONFIG"] == default == empty["RUNTIME_DROP_IN_CONFIG"]
        assert mine["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/k/99.toml"
    else:
        assert "RUNTIME_DROP_IN_CONFIG" not in bare and empty["RUNTIME_DROP_IN_CONFIG"] == ""
        assert "RUNTIME_DROP_IN_CONFIG_HOST_PATH" not in mine


@READERS
@pytest.mark.parametrize(("chart", "fallback"), [
    ("v24.9.2", False), ("v25.3.4", False), ("v25.10.0", True), ("v26.7.0", True)])
def test_runtime_config_names_the_host_config_from_v25_10(read: Reader, chart: str,
                                                          fallback: bool) -> None:
    env = read(chart, _e(CONTAINERD_CONFIG="", RUNTIME_CONFIG="/opt/c/config.toml"),
               cdi=False, runtime_class="")
    want = "/opt/c/config.toml" if fallback else "/etc/containerd/config.toml"
    assert env["CONTAINERD_CONFIG"] == want == env["RUNTIME_CONFIG"]
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia" and env["RUNTIME"] == "containerd"


# ---------------------------------------------------------------- installer_env

def test_installer_env_follows_the_plan_options_chart() -> None:
    env = _e(CONTAINERD_CONFIG="/etc/containerd/config.toml",
             RUNTIME_DROP_IN_CONFIG="/etc/containerd/conf.d/99-nvidia.toml")
    old = installer_env(env, PlanOptions(cdi=True, toolkit_version="1.17.8",
                                         operator_chart="v25.3.4"))
    assert "NVIDIA_RUNTIME_SET_AS_DEFAULT" not in old and "RUNTIME_DROP_IN_CONFIG" not in old
    new = installer_env(env, PlanOptions(cdi=True, operator_chart="v25.10.1"))
    assert new["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"
    assert new["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/containerd/conf.d/99-nvidia.toml"
    # No chart: the newest chart's behaviour, as before charts were told apart.
    assert installer_env(env, PlanOptions(cdi=True)) == installer_env(
        env, PlanOptions(cdi=True, operator_chart="v26.7.0"))
