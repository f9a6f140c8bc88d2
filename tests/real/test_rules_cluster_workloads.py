"""Cluster-level rules over workloads (FM11, FM14), the time-slicing ConfigMap (FM10), the
node rollout (FM06, FM09) and the files written on template distros (FM04)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rulecheck import ids, only, well_formed

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.distros.profiles import PROFILES, Distro
from gpuplane.rules import (
    RolloutStep,
    check_node_files,
    check_rollout,
    check_time_slicing,
    check_workload,
    expected_allocatable,
    gpu_requests,
    pod_spec_of,
)
from gpuplane.rules._shared import quantity

W = "Deployment ml/train"
NODES = (NodeIntent("gpu-a1", gpus=8), NodeIntent("gpu-a2", gpus=4), NodeIntent("cpu-1", 0))


def intent(**kw: Any) -> ClusterIntent:
    kw.setdefault("nodes", NODES)
    return ClusterIntent(**kw)


def container(name: str = "main", limits: dict[str, Any] | None = None, **extra: Any) -> dict:
    ctr: dict[str, Any] = {"name": name, "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04"}
    if limits is not None:
        ctr["resources"] = {"limits": limits}
    ctr.update(extra)
    return ctr


def deployment(*containers: dict, **spec: Any) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "train"}},
                     "template": {"metadata": {"labels": {"app": "train"}},
                                  "spec": {"containers": list(containers), **spec}}}}


def pod(*containers: dict, **spec: Any) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": list(containers), **spec}}


def check(obj: dict, i: ClusterIntent) -> list:
    return well_formed(check_workload(obj, i, W), W)


# ---------------------------------------------------------------- pod_spec_of

@pytest.mark.parametrize("kind", ["Job", "Deployment", "StatefulSet", "DaemonSet",
                                  "ReplicaSet", "ReplicationController"])
def test_pod_spec_of_template_kinds(kind: str) -> None:
    obj = deployment(container())
    obj["kind"] = kind
    assert pod_spec_of(obj) is obj["spec"]["template"]["spec"]


def test_pod_spec_of_pod_cronjob_and_others() -> None:
    p = pod(container())
    assert pod_spec_of(p) is p["spec"]
    cron = {"kind": "CronJob", "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
        "template": {"spec": {"containers": [container()]}}}}}}
    assert pod_spec_of(cron) is cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod_spec_of({"kind": "ConfigMap", "data": {}}) is None
    assert pod_spec_of({"kind": "Deployment", "spec": {}}) is None
    assert pod_spec_of({"spec": {"containers": []}}) is None  # no kind


# ---------------------------------------------------------------- quantities, gpu_requests

@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("2", 2), (4, 4), ("1024", 1024), ("10Gi", 10 * 2**30), ("500m", 0.5),
    ("1k", 1000), ("1e3", 1000), ("1.5", 1.5), (2.5, 2.5),
])
def test_quantity(text: Any, value: float) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["1x", "", "GPU", True, None, [1], float("nan"), "1..2"])
def test_quantity_rejects(text: Any) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity(text)


@given(st.integers(min_value=0, max_value=10**12),
       st.sampled_from([("", 1), ("k", 10**3), ("M", 10**6), ("Ki", 2**10), ("Mi", 2**20),
                        ("Gi", 2**30)]))
def test_quantity_suffixes(n: int, suffix: tuple[str, int]) -> None:
    assert quantity(f"{n}{suffix[0]}") == float(n * suffix[1])


@given(st.text(max_size=12))
def test_quantity_text_parses_or_raises_value_error(text: str) -> None:
    try:
        value = quantity(text)
    except ValueError as exc:
        assert "not a Kubernetes quantity" in str(exc)
    else:
        assert value == quantity(text)


def test_gpu_requests_sums_containers_and_counts_init_containers_like_the_scheduler() -> None:
    spec = pod_spec_of(deployment(
        container("a", {"nvidia.com/gpu": "1", "cpu": "2", "nvidia.com/gpumem": "10Gi"}),
        container("b", {"nvidia.com/gpu": 2}),
        initContainers=[container("init", {"nvidia.com/gpu": "4"}),
                        container("sidecar", {"nvidia.com/gpu": "1"}, restartPolicy="Always"),
                        container("late-init", {"nvidia.com/gpu": "2"})]))
    assert spec is not None
    got = gpu_requests(spec)
    # apps 1+2 plus sidecar 1 = 4; the first init alone 4; the late init 2 + sidecar 1 = 3.
    assert got == {"nvidia.com/gpu": 4.0, "nvidia.com/gpumem": 10 * 2**30}
    assert "cpu" not in got


def test_gpu_requests_limits_win_over_requests_and_bad_quantities_raise() -> None:
    ctr = container("a")
    ctr["resources"] = {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"},
                        "limits": {"nvidia.com/gpu": "2"}}
    assert gpu_requests({"containers": [ctr]}) == {"nvidia.com/gpu": 2.0,
                                                   "nvidia.com/gpucores": 30.0}
    bad = {"containers": [container("a", {"nvidia.com/gpu": "one"})]}
    with pytest.raises(ValueError, match=r"containers\[0\].*nvidia.com/gpu"):
        gpu_requests(bad)
    assert gpu_requests({}) == {}


# ---------------------------------------------------------------- FM11 (incident 4)

def test_incident_4_rke2_gpu_pod_without_runtime_class_is_fm11() -> None:
    i = intent(distro="rke2", nvidia_default=False, cdi=False)
    obj = deployment(container(limits={"nvidia.com/gpu": 1}))
    f = only(check(obj, i), "FM11")
    assert f.where == f"{W} spec.template.spec.runtimeClassName (gpuplane:runtime.name)"
    assert "runtimeClassName: nvidia" in f.fix and "gpuplane:runtime.nvidiaDefault" in f.fix
    obj["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    assert check(obj, i) == []


@pytest.mark.parametrize(("rc", "nvidia_default", "cdi", "plugin", "fires"), [
    (None, True, False, "gpu-operator", False),          # nvidia is the default
    (None, False, True, "gpu-operator", False),          # CDI injects without a runtime
    (None, False, False, "hami", False),                 # HAMi's webhook adds the class
    ("runc", True, False, "gpu-operator", True),         # explicitly another runtime
    ("nvidia-cdi", False, False, "gpu-operator", False),
    ("nvidia-legacy", False, False, "gpu-operator", False),
    ("kata", False, False, "hami", True),
])
def test_fm11_runtime_class_conditions(rc: str | None, nvidia_default: bool, cdi: bool,
                                       plugin: str, fires: bool) -> None:
    i = intent(nvidia_default=nvidia_default, cdi=cdi, device_plugin=plugin)
    spec = {"runtimeClassName": rc} if rc else {}
    obj = pod(container(limits={"nvidia.com/gpu": 1}), **spec)
    assert ("FM11" in ids(check(obj, i))) is fires


def test_fm11_counts_mig_and_init_containers_but_not_cpu_pods() -> None:
    i = intent(nvidia_default=False)
    mig = pod(container(limits={"nvidia.com/mig-1g.5gb": 1}))
    assert ids(check(mig, i)) == ["FM11"]
    init = pod(container(), initContainers=[container("warm", {"nvidia.com/gpu": "1"})])
    assert ids(check(init, i)) == ["FM11"]
    assert check(pod(container(limits={"cpu": "4"})), i) == []
    assert check(pod(container(limits={"nvidia.com/gpu": 0})), i) == []


def test_fm11_hami_pod_for_another_scheduler_needs_the_class() -> None:
    i = intent(device_plugin="hami", nvidia_default=False)
    obj = pod(container(limits={"nvidia.com/gpu": 1}), schedulerName="volcano")
    assert ids(check(obj, i)) == ["FM11"]


# ---------------------------------------------------------------- FM14 (incident 5)

def hami(**kw: Any) -> ClusterIntent:
    return intent(device_plugin="hami", nvidia_default=True, **kw)


def test_incident_5_gpumem_with_percentage() -> None:
    obj = deployment(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000,
                                       "nvidia.com/gpumem-percentage": 50}))
    f = only(check(obj, hami()), "FM14")
    assert "silently ignores the percentage" in f.message
    assert "containers[0].resources.limits['nvidia.com/gpumem-percentage']" in f.where
    ok = deployment(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}))
    assert check(ok, hami()) == []


@pytest.mark.parametrize(("cores", "bad"), [(150, True), ("101", True), (100, False),
                                            (30, False)])
def test_fm14_gpucores(cores: Any, bad: bool) -> None:
    obj = pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpucores": cores}))
    assert ids(check(obj, hami())) == (["FM14"] if bad else [])


@pytest.mark.parametrize(("pct", "bad"), [(-1, True), (101, True), (0, False), (100, False)])
def test_fm14_gpumem_percentage_range(pct: int, bad: bool) -> None:
    obj = pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": pct}))
    assert ids(check(obj, hami())) == (["FM14"] if bad else [])


def test_fm14_gpu_count_against_nodes() -> None:
    i = hami()
    assert check(pod(container(limits={"nvidia.com/gpu": 8})), i) == []
    f = only(check(pod(container(limits={"nvidia.com/gpu": 9})), i), "FM14")
    assert "largest GPU node in gpuplane:nodes has 8" in f.message
    pinned = pod(container(limits={"nvidia.com/gpu": 6}),
                 nodeSelector={"kubernetes.io/hostname": "gpu-a2"})
    assert "node gpu-a2, where the pod is pinned, has 4" in only(check(pinned, i),
                                                                 "FM14").message
    unknown = pod(container(limits={"nvidia.com/gpu": 6}),
                  nodeSelector={"kubernetes.io/hostname": "elsewhere"})
    assert check(unknown, i) == []  # a node the stack does not know: nothing to compare
    assert check(pod(container(limits={"nvidia.com/gpu": 99})), hami(nodes=())) == []


def test_fm14_privileged_gpu_pod_and_node_name() -> None:
    i = hami()
    priv = pod(container(limits={"nvidia.com/gpu": 1}),
               initContainers=[container("setup", securityContext={"privileged": True})])
    f = only(check(priv, i), "FM14")
    assert "setup" in f.message and f.where.endswith("initContainers[0].securityContext"
                                                     ".privileged")
    assert check(pod(container(securityContext={"privileged": True})), i) == []
    named = pod(container(limits={"nvidia.com/gpumem": 1024}), nodeName="gpu-a1")
    assert "spec.nodeName 'gpu-a1'" in only(check(named, i), "FM14").message
    assert check(pod(container(), nodeName="gpu-a1"), i) == []


def test_fm14_cuda_disable_control_is_a_warning() -> None:
    env = [{"name": "X", "value": "1"}, {"name": "CUDA_DISABLE_CONTROL", "value": "True"}]
    obj = pod(container(limits={"nvidia.com/gpu": 1}, env=env))
    f = only(check(obj, hami()), "FM14")
    assert f.severity is Severity.WARNING and f.where.endswith("containers[0].env[1]")
    env[1]["value"] = "false"
    assert check(obj, hami()) == []


def test_fm14_hami_resources_on_an_operator_stack() -> None:
    i = intent(nvidia_default=True)
    obj = pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 150}))
    f = only(check(obj, i), "FM14")
    assert "only HAMi provides" in f.message and "gpuplane:devicePlugin" in f.where
    assert check(pod(container(limits={"nvidia.com/gpu": 1})), i) == []


# ---------------------------------------------------------------- robustness

_QTY = st.one_of(st.integers(-5, 200), st.sampled_from(["1", "10Gi", "500m", "x", "", "1e2"]),
                 st.none(), st.booleans(), st.floats(allow_nan=True))
_RES = st.dictionaries(st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpumem",
                                        "nvidia.com/gpumem-percentage", "nvidia.com/gpucores",
                                        "nvidia.com/mig-1g.5gb", "cpu"]), _QTY, max_size=4)
_CTR = st.fixed_dictionaries({}, optional={
    "name": st.text(max_size=5),
    "resources": st.one_of(st.fixed_dictionaries({}, optional={"limits": _RES,
                                                               "requests": _RES}),
                           st.none(), st.text(max_size=3)),
    "env": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["CUDA_DISABLE_CONTROL",
                                                                    "A"])},
                                          optional={"value": st.sampled_from(["true", "no"])}),
                    max_size=2) | st.integers(),
    "securityContext": st.fixed_dictionaries({"privileged": st.booleans()}) | st.none(),
    "restartPolicy": st.sampled_from(["Always", "Never"]),
})
_SPEC = st.fixed_dictionaries({}, optional={
    "containers": st.lists(_CTR | st.integers(), max_size=3) | st.none(),
    "initContainers": st.lists(_CTR, max_size=2),
    "runtimeClassName": st.sampled_from(["nvidia", "runc", "", "nvidia-cdi"]) | st.none(),
    "nodeName": st.sampled_from(["gpu-a1", "elsewhere", ""]),
    "nodeSelector": st.dictionaries(st.just("kubernetes.io/hostname"),
                                    st.sampled_from(["gpu-a1", "gpu-a2", "x"])),
    "schedulerName": st.sampled_from(["hami-scheduler", "volcano"]),
})
_INTENTS = st.builds(intent, device_plugin=st.sampled_from(["gpu-operator", "hami"]),
                     nvidia_default=st.booleans(), cdi=st.booleans())


@settings(max_examples=300, deadline=None)
@given(spec=_SPEC, i=_INTENTS, kind=st.sampled_from(["Pod", "Deployment", "CronJob"]))
def test_random_pod_specs_never_crash_and_findings_are_deterministic(
        spec: dict, i: ClusterIntent, kind: str) -> None:
    obj: dict[str, Any] = {"kind": kind, "spec": spec}
    if kind == "Deployment":
        obj = {"kind": kind, "spec": {"template": {"spec": spec}}}
    elif kind == "CronJob":
        obj = {"kind": kind, "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}
    before = copy.deepcopy(obj)
    first = check(obj, i)
    assert first == check(copy.deepcopy(before), i)
    assert obj == before  # rules never mutate their input


# ---------------------------------------------------------------- FM10 time-slicing

CM = "ConfigMap gpu-operator/time-slicing-config"
GOOD = """version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


def ts(data: dict[str, Any], replicas: int = 4, profile: str = "any") -> list:
    i = intent(time_slicing_replicas=replicas, time_slicing_profile=profile)
    return well_formed(check_time_slicing(data, i, where=CM), CM)


def test_time_slicing_good_config_passes() -> None:
    assert ts({"any": GOOD}) == []
    assert ts({"any": GOOD, "mig": "version: v1\nflags:\n  migStrategy: single\n"}) == []
    assert ts({}, replicas=0) == []


def test_fm10_keys_under_flags_are_silently_ignored() -> None:
    bad = GOOD.replace("  migStrategy: none\n", "  migStrategy: none\n  renameByDefault: true\n"
                       "  failRequestsGreaterThanOne: true\n")
    found = ts({"any": bad})
    assert ids(found) == ["FM10", "FM10"]
    assert all("silently ignores" in f.message for f in found)
    assert {f.where.split()[3] for f in found} == {"flags.renameByDefault",
                                                   "flags.failRequestsGreaterThanOne"}


def test_fm10_yaml_error_names_the_line() -> None:
    f = only(ts({"any": "version: v1\nsharing:\n  timeSlicing: [\n"}), "FM10")
    assert "not valid YAML" in f.message and "data.any line" in f.where


@pytest.mark.parametrize(("replicas", "why"), [
    ("1", "not an integer"), ("'4'", "not an integer"), ("4.5", "not an integer"),
    ("true", "not an integer"), ("1", "fewer than 2"), ("0", "fewer than 2"),
    ("-3", "fewer than 2"),
])
def test_fm10_bad_replicas(replicas: str, why: str) -> None:
    text = GOOD.replace("replicas: 4", f"replicas: {replicas}")
    if why == "fewer than 2" and replicas == "1":
        text = GOOD.replace("replicas: 4", "replicas: 1")
    elif replicas == "1":
        text = GOOD.replace("replicas: 4", "replicas: '1'")
    assert why in only(ts({"any": text}), "FM10").message


def test_fm10_structure() -> None:
    no_resources = GOOD.split("    resources:")[0]
    assert "without a resources list" in only(ts({"any": no_resources}), "FM10").message
    no_sharing = "version: v1\nflags:\n  migStrategy: none\n"
    assert "no sharing.timeSlicing" in only(ts({"any": no_sharing}), "FM10").message
    assert ts({"any": no_sharing}, replicas=0) == []
    v2 = GOOD.replace("version: v1", "version: v2")
    assert "knows only v1" in only(ts({"any": v2}), "FM10").message
    assert ts({"any": GOOD.replace("version: v1\n", "")}) == []  # empty version means v1
    unnamed = GOOD.replace("- name: nvidia.com/gpu\n        replicas", "- replicas")
    assert "has no name" in only(ts({"any": unnamed}), "FM10").message
    assert "not a YAML string" in only(ts({"any": 4}), "FM10").message
    assert "is empty" in only(ts({"any": ""}), "FM10").message
    assert ts({"any": GOOD, "spare": ""}) == []  # an empty profile nobody uses
    assert "not a config mapping" in only(ts({"any": "- a\n- b\n"}), "FM10").message
    assert "not a mapping" in only(ts(["any"]), "FM10").message  # type: ignore[arg-type]


def test_fm10_profile_and_replicas_must_match_the_stack() -> None:
    f = only(ts({"default": GOOD}, profile="any"), "FM10")
    assert "no profile 'any'" in f.message and "gpuplane:timeSlicing.profile" in f.where
    f = only(ts({"any": GOOD}, replicas=8), "FM10")
    assert "4 replicas but gpuplane:timeSlicing.replicas is 8" in f.message
    shared_other = GOOD.replace("name: nvidia.com/gpu", "name: nvidia.com/mig-1g.5gb")
    assert "does not time-slice nvidia.com/gpu" in only(ts({"any": shared_other}),
                                                        "FM10").message


def test_fm10_rename_by_default_must_match_the_stack() -> None:
    i = intent(time_slicing_replicas=4, time_slicing_rename=True)
    f = only(well_formed(check_time_slicing({"any": GOOD}, i, where=CM)), "FM10")
    assert "renameByDefault False" in f.message and "nvidia.com/gpu," in f.message
    renamed = GOOD.replace("renameByDefault: false", "renameByDefault: true")
    assert check_time_slicing({"any": renamed}, i, where=CM) == []
    assert "nvidia.com/gpu.shared" in only(ts({"any": renamed}), "FM10").message


def test_expected_allocatable() -> None:
    assert expected_allocatable(8, intent(time_slicing_replicas=4)) == 32
    assert expected_allocatable(8, intent(time_slicing_replicas=0)) == 8
    assert expected_allocatable(0, intent(time_slicing_replicas=4)) == 0
    with pytest.raises(ValueError, match="non-negative integer"):
        expected_allocatable(-1, intent())


# ---------------------------------------------------------------- FM06 / FM09 rollout

R = "GpuCluster prod"


def step(node: str, batch: int, after: set[str] = frozenset(), *, restarts: bool = True,
         restores: bool = True, default: bool = False) -> RolloutStep:
    return RolloutStep(node, batch, frozenset(after), restarts, restores, default)


def good_rollout() -> list[RolloutStep]:
    return [step("a", 0), step("b", 1, {"a"}), step("c", 2, {"b"}), step("d", 3, {"c"})]


def ro(steps: list[RolloutStep], **kw: Any) -> list:
    kw.setdefault("max_unavailable", 1)
    kw.setdefault("canary", True)
    return well_formed(check_rollout(steps, intent(**kw), where=R), R)


def test_rollout_good() -> None:
    assert ro(good_rollout()) == []
    assert ro([]) == []
    assert ro([step("only", 0)]) == []
    wide = [step("a", 0), step("b", 1, {"a"}), step("c", 1, {"a"}), step("d", 2, {"b", "c"})]
    assert ro(wide, max_unavailable=2) == []


def test_fm06_batch_larger_than_max_unavailable() -> None:
    steps = [step("a", 0), step("b", 1, {"a"}), step("c", 1, {"a"}), step("d", 1, {"a"})]
    f = only(ro(steps, max_unavailable=2), "FM06")
    assert "3 nodes at once (b, c, d)" in f.message
    assert "gpuplane:rollout.maxUnavailable" in f.where
    quiet = [step("a", 0), *(step(n, 1, {"a"}, restarts=False) for n in "bcd")]
    assert ro(quiet, max_unavailable=1) == []  # nothing restarts: nothing stalls


def test_fm06_batch_not_waiting_for_the_previous_one() -> None:
    steps = [step("a", 0), step("b", 1, {"a"}), step("c", 1, {"a"}), step("d", 2, {"b"})]
    f = only(ro(steps, max_unavailable=2), "FM06")
    assert "node d (batch 2) does not wait for c of batch 1" in f.message


def test_fm06_canary() -> None:
    steps = [step("a", 0), step("b", 0), step("c", 1, {"a", "b"})]
    f = only(ro(steps, max_unavailable=2), "FM06")
    assert "first batch (0) has 2 nodes" in f.message
    assert ro(steps, max_unavailable=2, canary=False) == []


def test_fm09_delete_without_restore() -> None:
    steps = good_rollout()
    steps[1] = step("b", 1, {"a"}, restores=False, default=True)
    steps[2] = step("c", 2, {"b"}, restores=False)
    found = ro(steps)
    assert ids(found) == ["FM09", "FM09"]
    by_node = {f.where.split()[3]: f for f in found}
    assert by_node["b"].severity is Severity.ERROR
    assert 'default_runtime_name = "nvidia"' in by_node["b"].message
    assert by_node["c"].severity is Severity.WARNING
    assert "gpuplane:cluster.nodeAccess" in by_node["c"].fix


# ---------------------------------------------------------------- FM04 node files

V17, V21 = ContainerdVersion(1, 7), ContainerdVersion(2, 1)
N = "Node gpu-a1"


@pytest.mark.parametrize("distro", [Distro.RKE2, Distro.K3S])
def test_fm04_generated_config_on_rancher(distro: Distro) -> None:
    prof = PROFILES[distro]
    f = only(well_formed(check_node_files(prof, [prof.config_path], where=N, version=V17), N),
             "FM04")
    assert "lost at the next restart" in f.message and prof.template_path in f.fix
    assert check_node_files(prof, [prof.template_path], where=N, version=V17) == []


@pytest.mark.parametrize("distro", [Distro.RKE2, Distro.K3S])
def test_fm04_wrong_template_for_the_containerd_line(distro: Distro) -> None:
    prof = PROFILES[distro]
    assert prof.template_path and prof.template_v3_path
    f = only(check_node_files(prof, [prof.template_path], where=N, version=V21), "FM04")
    assert "config-v3.toml.tmpl" in f.message and "containerd 2.1" in f.message
    assert check_node_files(prof, [prof.template_v3_path], where=N, version=V21) == []
    assert ids(check_node_files(prof, [prof.template_v3_path], where=N, version=V17)) == \
        ["FM04"]


def test_fm04_microk8s_and_drop_in_distros() -> None:
    mk = PROFILES[Distro.MICROK8S]
    assert ids(check_node_files(mk, [mk.config_path, mk.config_path + "/../containerd.toml"],
                                where=N, version=V21)) == ["FM04", "FM04"]
    assert check_node_files(mk, [mk.template_path], where=N, version=V21) == []
    kubeadm = PROFILES[Distro.KUBEADM]
    assert check_node_files(kubeadm, [kubeadm.config_path, "/etc/containerd/conf.d/x.toml"],
                            where=N, version=V17) == []
