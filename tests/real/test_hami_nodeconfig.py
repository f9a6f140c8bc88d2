"""HAMi's per-node config from `gpuplane:sharing` (issue #47) through Helm's own engine on
every HAMi chart gpuplane supports: the `nodeconfig` gpuplane renders reaches the device
plugin's ConfigMap as `config.json`, the one the device plugin's DaemonSet mounts at
/config (the plugin reads /config/config.json and picks the entry whose name is its
NODE_NAME, Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go
at v2.8.3, v2.9.0, v2.10.0), every key of an entry is one the chart's own example entry
at that version spells, and a stack without HAMi pools keeps the chart's example. Beside
the GPU Operator, a pool in HAMi's MIG mode turns MIG Manager off in the rendered
ClusterPolicy (else the operator labels the nodes nvidia.com/mig.config=all-disabled)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import charts
from support.stack_cases import config_of

from gpuplane.config import StackConfig
from gpuplane.config.helm_values import hami_values, operator_values

VERSIONS = list(charts.chart_dirs("hami"))
EXPECTED = [
    {"name": "a100-01", "operatingmode": "mig"},
    {"name": "l4-01", "operatingmode": "hami-core", "devicesplitcount": 20,
     "devicememoryscaling": 1.5},
    {"name": "l4-02", "operatingmode": "hami-core", "devicesplitcount": 20,
     "devicememoryscaling": 1.5},
]


def _stack(version: str) -> StackConfig:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-pools").items()}
    cfg["hami"]["chartVersion"] = version
    cfg["sharing"]["pools"]["inference"]["deviceMemoryScaling"] = 1.5
    return StackConfig.model_validate(cfg)


def _kind(docs: list[dict[str, Any]], kind: str, component: str) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind and (d.get("metadata", {}).get(
        "labels") or {}).get("app.kubernetes.io/component") == component]
    assert len(found) == 1, [(d.get("kind"), d.get("metadata", {}).get("name")) for d in docs]
    return found[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_modes_reach_the_device_plugins_config_json(version: str) -> None:
    folder = charts.chart_dirs("hami")[version]
    docs = charts.render(folder, hami_values(_stack(version)), namespace="kube-system")
    cm = _kind(docs, "ConfigMap", "hami-device-plugin")
    assert json.loads(cm["data"]["config.json"]) == {"nodeconfig": EXPECTED}

    ds = _kind(docs, "DaemonSet", "hami-device-plugin")
    pod = ds["spec"]["template"]["spec"]
    volume = next(v["name"] for v in pod["volumes"]
                  if (v.get("configMap") or {}).get("name") == cm["metadata"]["name"])
    plugin = next(c for c in pod["containers"] if c["name"] == "device-plugin")
    assert {"name": volume, "mountPath": "/config"} in [
        {k: m[k] for k in ("name", "mountPath")} for m in plugin["volumeMounts"]]
    node_name = next(e for e in plugin["env"] if e["name"] == "NODE_NAME")
    assert node_name["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"

    # Every key of an entry is one the chart's own example entry at this version spells
    # (its values.yaml lists what the plugin reads there).
    example = json.loads(charts.lookup(charts.values(folder),
                                       "devicePlugin.nodeConfiguration.config"))
    known = set(example["nodeconfig"][0])
    for entry in EXPECTED:
        assert set(entry) <= known, (version, set(entry) - known)

    # A stack without HAMi pools leaves the chart's example config as it is.
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-shared").items()}
    cfg["hami"]["chartVersion"] = version
    plain = charts.render(folder, hami_values(StackConfig.model_validate(cfg)),
                          namespace="kube-system")
    entries = json.loads(_kind(plain, "ConfigMap", "hami-device-plugin")["data"]["config.json"])
    assert [e["name"] for e in entries["nodeconfig"]] == ["your-node-name"]


OPERATOR = list(charts.chart_dirs("gpu-operator"))


@pytest.mark.parametrize("chart", [OPERATOR[0], OPERATOR[-1]])
def test_mig_manager_off_in_the_cluster_policy_beside_hamis_mig_mode(chart: str) -> None:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-pools").items()}
    cfg["gpuOperator"]["chartVersion"] = chart
    docs = charts.render(charts.chart_dirs("gpu-operator")[chart],
                         operator_values(StackConfig.model_validate(cfg), []),
                         namespace="gpu-operator")
    [policy] = [d for d in docs if d.get("kind") == "ClusterPolicy"]
    assert policy["spec"]["migManager"]["enabled"] is False
    assert policy["spec"]["devicePlugin"]["enabled"] is False
