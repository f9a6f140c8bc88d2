"""The check manifests: valid Kubernetes 1.31 objects (strict schema) for every
configuration, and the fields that make each check prove what it claims."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from gpuplane.checks.manifests import (
    FINGERPRINT_ANNOTATION,
    HOLD_SECONDS,
    VECTORADD_IMAGE,
    CheckJob,
    container_command,
    fingerprint,
    job_manifest,
    plan_checks,
    probe_configmap,
    short_name,
    timeslicing_node,
)
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.probe import probe_source

K8S = "1.31.0"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NODES = (NodeIntent("gpu-a1", 8), NodeIntent("gpu-b1", 2), NodeIntent("cpu-1", 0))

CONFIGS = {
    "operator": (ClusterIntent(nodes=NODES), ChecksSettings()),
    "nvidia-default": (ClusterIntent(nodes=NODES, nvidia_default=True), ChecksSettings()),
    "timeslicing": (ClusterIntent(nodes=NODES, time_slicing_replicas=4), ChecksSettings()),
    "hami": (ClusterIntent(nodes=NODES, device_plugin="hami"),
             ChecksSettings(hami_gpumem=2048, hami_gpucores=25)),
    "hami-vectoradd": (ClusterIntent(nodes=NODES, device_plugin="hami"),
                       ChecksSettings(sample="vectoradd")),
    "vectoradd": (ClusterIntent(nodes=NODES, runtime_class="nvidia-legacy"),
                  ChecksSettings(sample="vectoradd", image="registry.local/py:3.12")),
}


def manifests(intent: ClusterIntent, settings: ChecksSettings) -> list[dict]:
    return [job_manifest(j, intent, settings, namespace="gpu-operator",
                         configmap="gpuplane-probe-x", name=f"checks-{j.key}-1a2b3c4d",
                         fingerprint_value="0123abcd",
                         annotations={"pulumi.com/skipAwait": "true"})
            for j in plan_checks(intent, settings)]


def container(m: dict) -> dict:
    return m["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_manifest_is_valid_kubernetes_strict(config: str) -> None:
    intent, settings = CONFIGS[config]
    objects = [*manifests(intent, settings),
               probe_configmap("gpu-operator", probe_source(), name="gpuplane-probe-x")]
    for obj in objects:
        assert kubernetes_validate.validate(obj, K8S, strict=True) == "1.31"
        name = obj["metadata"]["name"]
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        for key, value in obj["metadata"].get("labels", {}).items():
            assert len(value) <= 63 and DNS_LABEL.match(value), (key, value)


def test_strict_validation_catches_a_misspelt_field() -> None:
    intent, settings = CONFIGS["operator"]
    bad = manifests(intent, settings)[0]
    bad["spec"]["template"]["spec"]["runtimeClass"] = "nvidia"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S, strict=True)


def test_one_job_per_gpu_node_pinned_by_hostname() -> None:
    intent, settings = CONFIGS["operator"]
    jobs = plan_checks(intent, settings)
    assert [(j.kind, j.node, j.pods) for j in jobs] == [("node", "gpu-a1", 1),
                                                         ("node", "gpu-b1", 1)]
    for j, m in zip(jobs, manifests(intent, settings), strict=True):
        pod = m["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/hostname": j.node}
        assert pod["runtimeClassName"] == "nvidia"
        assert pod["restartPolicy"] == "Never"
        assert {"key": "nvidia.com/gpu", "operator": "Exists",
                "effect": "NoSchedule"} in pod["tolerations"]
        assert m["spec"]["backoffLimit"] == 0
        assert m["spec"]["activeDeadlineSeconds"] == settings.timeout_seconds
        assert m["spec"]["ttlSecondsAfterFinished"] > 0
        assert "parallelism" not in m["spec"]
        c = container(m)
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert "nvidia.com/gpumem" not in c["resources"]["limits"]
        assert c["image"] == "python:3.12-slim"
        assert c["command"] == ["python3", "/probe/cuda_probe.py"]
        assert c["volumeMounts"] == [{"name": "probe", "mountPath": "/probe", "readOnly": True}]
        assert pod["volumes"][0]["configMap"]["name"] == "gpuplane-probe-x"
        assert m["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        assert m["spec"]["template"]["metadata"]["annotations"] == {
            FINGERPRINT_ANNOTATION: "0123abcd"}


def test_no_runtime_class_when_nvidia_is_the_default() -> None:
    for m in manifests(*CONFIGS["nvidia-default"]):
        assert "runtimeClassName" not in m["spec"]["template"]["spec"]
    for m in manifests(*CONFIGS["vectoradd"]):
        assert m["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia-legacy"


def test_timeslicing_proof_fills_the_smallest_node_at_once() -> None:
    intent, settings = CONFIGS["timeslicing"]
    jobs = plan_checks(intent, settings)
    shared = [j for j in jobs if j.kind == "timeslicing"]
    assert len(shared) == 1
    j = shared[0]
    assert (j.node, j.gpus, j.pods) == ("gpu-b1", 2, 8)      # 2 GPUs x 4 replicas
    m = manifests(intent, settings)[-1]
    assert m["spec"]["parallelism"] == m["spec"]["completions"] == 8
    assert m["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gpu-b1"}
    command = container(m)["command"]
    assert command[:2] == ["sh", "-c"]
    assert f"sleep {HOLD_SECONDS}" in command[2] and "exit $rc" in command[2]
    assert container(m)["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_timeslicing_node_choice() -> None:
    assert timeslicing_node(ClusterIntent(nodes=NODES)) is None
    assert timeslicing_node(ClusterIntent(nodes=NODES, time_slicing_replicas=1)) is None
    one = ClusterIntent(nodes=(NodeIntent("a", 1), NodeIntent("b", 1)),
                        time_slicing_replicas=3)
    assert timeslicing_node(one).name == "a"
    assert [j.pods for j in plan_checks(one, ChecksSettings()) if j.kind != "node"] == [3]


def test_hami_pods_ask_for_a_slice_and_check_their_memory() -> None:
    intent, settings = CONFIGS["hami"]
    jobs = plan_checks(intent, settings)
    assert [j.kind for j in jobs] == ["node", "node"]          # node probes carry the proof
    assert all(j.max_memory_mib == 2048 for j in jobs)
    for m in manifests(intent, settings):
        c = container(m)
        assert c["resources"]["limits"] == {"memory": "1Gi", "nvidia.com/gpu": "1",
                                            "nvidia.com/gpumem": "2048",
                                            "nvidia.com/gpucores": "25"}
        assert c["command"] == ["python3", "/probe/cuda_probe.py", "--max-memory-mib", "2048"]
        assert "schedulerName" not in m["spec"]["template"]["spec"]   # HAMi's webhook sets it


def test_vectoradd_sample_and_the_separate_hami_proof() -> None:
    intent, settings = CONFIGS["hami-vectoradd"]
    jobs = plan_checks(intent, settings)
    assert [(j.kind, j.sample) for j in jobs] == [("node", "vectoradd"), ("node", "vectoradd"),
                                                  ("hami", "probe")]
    ms = manifests(intent, settings)
    for m in ms[:2]:
        c = container(m)
        assert c["image"] == VECTORADD_IMAGE
        assert "command" not in c and "volumeMounts" not in c
        assert "volumes" not in m["spec"]["template"]["spec"]
    hami = container(ms[2])
    assert hami["command"][-2:] == ["--max-memory-mib", "1024"]
    assert hami["resources"]["limits"]["nvidia.com/gpumem"] == "1024"


def test_probe_job_needs_the_configmap() -> None:
    intent, settings = CONFIGS["operator"]
    with pytest.raises(ValueError, match="ConfigMap"):
        job_manifest(plan_checks(intent, settings)[0], intent, settings,
                     namespace="x", configmap=None)


def test_configmap_carries_the_probe_verbatim() -> None:
    cm = probe_configmap("gpu-operator", probe_source())
    assert cm["data"] == {"cuda_probe.py": probe_source()}
    assert cm["metadata"]["namespace"] == "gpu-operator"


def test_disabled_or_gpu_less_plans_are_empty() -> None:
    assert plan_checks(ClusterIntent(nodes=NODES), ChecksSettings(enabled=False)) == ()
    assert plan_checks(ClusterIntent(nodes=(NodeIntent("c", 0),)), ChecksSettings()) == ()


def test_fingerprint_follows_intent_settings_and_probe() -> None:
    intent, settings = CONFIGS["operator"]
    base = fingerprint(intent, settings, "probe")
    assert base == fingerprint(intent, settings, "probe")
    assert base != fingerprint(intent, ChecksSettings(timeout_seconds=60), "probe")
    assert base != fingerprint(ClusterIntent(nodes=NODES[:1]), settings, "probe")
    assert base != fingerprint(intent, settings, "probe v2")


def test_short_names_are_dns_labels() -> None:
    long = "n" * 80
    name = short_name(f"checks-probe-{long}")
    assert len(name) == 54 and DNS_LABEL.match(name)
    assert short_name(f"checks-probe-{long}") != short_name(f"checks-probe-{long}x")
    assert short_name("Checks_Probe.A") == "checks-probe-a"


def test_container_command_hold() -> None:
    assert container_command("probe", None, 0) == ["python3", "/probe/cuda_probe.py"]
    held = container_command("probe", 512, 7)
    assert held[0:2] == ["sh", "-c"] and "sleep 7" in held[2]
    assert held[-2:] == ["--max-memory-mib", "512"]
    assert container_command("vectoradd", None, 0) == []


def test_settings_reject_bad_values_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"gpuplane:checks.sample"):
        ChecksSettings(sample="cuda")
    with pytest.raises(ValueError, match=r"gpuplane:checks.hamiGpuCores"):
        ChecksSettings(hami_gpucores=150)
    with pytest.raises(ValueError, match=r"gpuplane:checks.timeoutSeconds"):
        ChecksSettings(timeout_seconds=0)
    with pytest.raises(ValueError, match="unknown key"):
        ChecksSettings.from_config({"timeout": 5})
    s = ChecksSettings.from_config({"enabled": True, "image": "py:3", "sample": "vectoradd",
                                    "timeoutSeconds": 120, "hamiGpuMem": 512,
                                    "hamiGpuCores": 10})
    assert s == ChecksSettings(True, "py:3", "vectoradd", 120, 512, 10)


def test_settings_from_the_stack_model() -> None:
    from gpuplane.config import ChecksConfig

    model = ChecksConfig(timeoutSeconds=90, hamiGpuMem=4096)
    s = ChecksSettings.from_config(model)
    assert (s.timeout_seconds, s.hami_gpumem, s.hami_gpucores) == (90, 4096, 30)


def test_check_job_is_plain_data() -> None:
    j = CheckJob("probe-a", "node", "a", 1, 1, "probe", None, 0)
    assert CheckJob(**j.to_dict()) == j
