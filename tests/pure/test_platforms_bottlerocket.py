"""Bottlerocket: the device-plugin settings gpuplane hands the user (issue #29).

The settings are rendered into the plugin config the way Bottlerocket's template does
(core-kit `nvidia-k8s-device-plugin-conf.in`), and that config is judged by gpuplane's
own time-slicing rule (FM10): what the plugin reads must be what the stack asked for.
"""

from __future__ import annotations

import tomllib

import pytest
import yaml

from gpuplane.config import TimeSlicingConfig
from gpuplane.platforms.native import DevicePluginIntent, PlatformInputError, bottlerocket_settings
from gpuplane.platforms.native.bottlerocket import rendered_plugin_config, settings_toml
from gpuplane.rules.timeslicing import check_profile

NVIDIA = ("settings", "kubelet-device-plugins", "nvidia")


def _nvidia(text: str) -> dict:
    data = tomllib.loads(text)
    for key in NVIDIA:
        data = data[key]
    return data


def _judge(nvidia: dict, intent: DevicePluginIntent) -> list:
    config = yaml.safe_dump(rendered_plugin_config(nvidia))
    return check_profile("bottlerocket", config, where="Bottlerocket user data",
                         expected_replicas=intent.time_slicing_replicas or None,
                         expected_rename=intent.rename_by_default)


@pytest.mark.parametrize("rename", [False, True])
@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("replicas", [2, 4, 64])
def test_time_slicing_settings(replicas: int, rename: bool, fail: bool) -> None:
    intent = DevicePluginIntent(time_slicing_replicas=replicas, rename_by_default=rename,
                                fail_requests_greater_than_one=fail)
    nvidia = _nvidia(settings_toml(intent))
    assert nvidia == {"device-sharing-strategy": "time-slicing", "time-slicing": {
        "replicas": replicas, "rename-by-default": rename,
        "fail-requests-greater-than-one": fail}}
    assert _judge(nvidia, intent) == []
    ts = rendered_plugin_config(nvidia)["sharing"]["timeSlicing"]
    assert ts["resources"] == [{"name": "nvidia.com/gpu", "replicas": replicas}]
    assert ts["failRequestsGreaterThanOne"] is fail


def test_bottlerockets_defaults_differ_from_the_stacks() -> None:
    """Bottlerocket defaults rename-by-default to true: settings without it would give a
    renamed resource the stack did not ask for, and FM10 says so. That is why gpuplane
    always writes all three keys."""
    intent = DevicePluginIntent(time_slicing_replicas=4)
    nvidia = _nvidia(settings_toml(intent))
    del nvidia["time-slicing"]["rename-by-default"]
    findings = _judge(nvidia, intent)
    assert [f.id for f in findings] == ["FM10"], findings
    assert "renameByDefault" in findings[0].message


def test_off_means_no_sharing() -> None:
    intent = DevicePluginIntent()
    nvidia = _nvidia(settings_toml(intent))
    assert nvidia == {"device-sharing-strategy": "none"}
    assert "sharing" not in rendered_plugin_config(nvidia)
    assert _judge(nvidia, intent) == []


def test_from_the_stacks_time_slicing_section() -> None:
    ts = TimeSlicingConfig(replicas=3, rename_by_default=True)
    intent = DevicePluginIntent.from_time_slicing(ts)
    assert (intent.time_slicing_replicas, intent.rename_by_default,
            intent.fail_requests_greater_than_one) == (3, True, False)
    assert _nvidia(settings_toml(intent))["time-slicing"]["replicas"] == 3


def test_optional_plugin_settings() -> None:
    intent = DevicePluginIntent(device_list_strategy=("volume-mounts", "cdi-cri"),
                                device_id_strategy="uuid", pass_device_specs=False,
                                mig_strategy="single")
    nvidia = _nvidia(settings_toml(intent))
    assert nvidia["device-list-strategy"] == ["volume-mounts", "cdi-cri"]
    assert nvidia["device-partitioning-strategy"] == "mig"
    plugin = rendered_plugin_config(nvidia)
    assert plugin["flags"]["migStrategy"] == "single"
    assert plugin["flags"]["plugin"]["deviceIDStrategy"] == "uuid"


@pytest.mark.parametrize(("intent", "key", "words"), [
    (DevicePluginIntent(device_plugin="hami"), "gpuplane:devicePlugin", "no key that turns"),
    (DevicePluginIntent(time_slicing_replicas=1), "gpuplane:timeSlicing.replicas", "2 or more"),
    (DevicePluginIntent(time_slicing_replicas=-2), "gpuplane:timeSlicing.replicas", "2 or more"),
    (DevicePluginIntent(time_slicing_replicas=2, per_gpu_replicas={"a100": 4}),
     "gpuplane:timeSlicing.replicas", "one replicas count"),
    (DevicePluginIntent(resource_name="nvidia.com/gpu.shared"),
     "gpuplane:timeSlicing.resourceName", "shares only"),
    (DevicePluginIntent(mig_strategy="mixed"), "gpuplane:platform.migStrategy", "mixed"),
    (DevicePluginIntent(mig_strategy="single", time_slicing_replicas=2),
     "gpuplane:timeSlicing.replicas", "MIG"),
    (DevicePluginIntent(device_list_strategy="cdi-annotations"),
     "gpuplane:platform.deviceListStrategy", "cdi-annotations"),
    (DevicePluginIntent(device_id_strategy="serial"), "gpuplane:platform.deviceIdStrategy",
     "serial"),
])
def test_what_bottlerocket_cannot_express_is_refused(intent: DevicePluginIntent, key: str,
                                                      words: str) -> None:
    with pytest.raises(PlatformInputError) as err:
        bottlerocket_settings(intent)
    assert err.value.key == key
    assert words in str(err.value) and "Fix:" in str(err.value)


def test_platform_input() -> None:
    p = bottlerocket_settings(DevicePluginIntent(time_slicing_replicas=4))
    assert p.kind == "bottlerocket-settings" and p.document_format == "toml"
    assert p.fields["settings.kubelet-device-plugins.nvidia.time-slicing.replicas"] == 4
    assert tomllib.loads(p.document or "") == tomllib.loads(settings_toml(
        DevicePluginIntent(time_slicing_replicas=4)))
    assert any("device plugin" in item for item in p.will_not_touch)
