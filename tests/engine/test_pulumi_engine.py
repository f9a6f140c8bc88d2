"""gpuplane under the real Pulumi engine against a real Kubernetes API server.

The CLI and the kubernetes provider are built from their Go modules, the control plane
from k8s.io/kubernetes (tests/support/pulumi_engine.py, tests/support/control_plane.py);
the charts are
installed from ../shared/charts through the stack's own `chart` key. Each test
compares what the engine did with what `gpuplane plan` says for the same stack file.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, oracle, pulumi_engine
from support.charts import chart_dirs, helm
from support.stack_cases import BROKEN, CLEAN, as_pod, broken_config, config_of, write_stack

from gpuplane.cli.main import main as gpuplane
from gpuplane.cli.plan.echo import AUTONAME_SUFFIX

pytestmark = [pytest.mark.real, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]
# Bundled stacks the engine can run end to end here: the ones with `nodeAccess: none`.
# Stacks that write node files need pulumi-resource-command, which the module proxy does
# not serve (github.com/pulumi/pulumi-command/provider is refused at every version).
NONE_STACKS = ("kind-smoke", "hami-shared", "h100-mig")


def _need() -> None:
    for why in (pulumi_engine.missing(), control_plane.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine: {why}", "make containerd")


_PACKAGED = Path(tempfile.mkdtemp(prefix="gp-charts-", dir="/tmp"))


@functools.cache
def local_chart(chart: str, version: str) -> Path:
    """The chart from ../shared/charts, as a user's air-gapped copy: the operator's source
    tree says v1.0.0-devel in Chart.yaml, so it is packaged at its tag with Helm's own
    `package` (what the `chart` key's refusal tells users to do); HAMi's is used as is."""
    folder = chart_dirs(chart)[version]
    if chart == "hami":
        return folder
    return Path(helm().package(folder, destination=_PACKAGED, version=version,
                               app_version=version))


def stack_file(dest: Path, stack: str, edit: dict[str, Any] | None = None) -> Path:
    """The bundled stack `stack` installing its charts from ../shared/charts (the
    air-gapped `chart` key) without waiting for workloads no kubelet runs (`skipAwait`),
    plus `edit`: {"gpuplane:section": {key: value}} merged into a section, or
    {"gpuplane:key": value} replacing a key."""
    cfg = config_of(stack)
    for section, value in (edit or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(section), dict):
            cfg[section].update(value)
        else:
            cfg[section] = value
    return engine_stack_file(dest, stack, cfg)


def engine_stack_file(dest: Path, stack: str, cfg: dict[str, Any]) -> Path:
    """`cfg` as stack `stack`, its charts from ../shared/charts, `skipAwait` on."""
    for section, chart in (("gpuplane:gpuOperator", "gpu-operator"), ("gpuplane:hami", "hami")):
        keys = cfg.get(section)
        if keys is None and section == "gpuplane:hami" and \
                cfg.get("gpuplane:devicePlugin") == "hami":
            keys = cfg[section] = {}
        if keys is not None:
            version = keys.get("chartVersion") or _default_chart_version(chart)
            keys.update(chart=str(local_chart(chart, version)), chartVersion=version,
                        skipAwait=True)
    dra = cfg.get("gpuplane:draDriver")
    if dra is not None:   # the DRA driver's chart, as it is (Chart.yaml names its tag)
        from gpuplane.rules.dra_facts import dra_chart_of

        version = dra["chartVersion"]
        dra.update(chart=str(chart_dirs(dra_chart_of(version))[version]), skipAwait=True)
    return write_stack(dest, stack, cfg)


def _default_chart_version(chart: str) -> str:
    from gpuplane.config import GpuOperatorConfig, HamiConfig

    section = GpuOperatorConfig() if chart == "gpu-operator" else HamiConfig()
    return str(section.chart_version)


def plan_json(path: Path, stack: str, capsys: pytest.CaptureFixture[str],
              *extra: str) -> tuple[int, dict[str, Any]]:
    """`gpuplane plan` on the stack file the engine runs."""
    capsys.readouterr()
    code = gpuplane(["plan", "--stack", stack, "--stacks-dir", str(path.parent),
                     "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def program_steps(res: pulumi_engine.Result) -> dict[str, str]:
    """The steps of the program's own resources (not the stack or default providers)."""
    return {k: v for k, v in res.touched().items()
            if not k.startswith(("pulumi:pulumi:Stack::", "pulumi:providers:"))}


def _differences(planned: Any, engine: Any, where: str) -> list[str]:
    """Where a value the plan shows is not what the engine got (the engine may add
    defaults, so only the plan's own keys are compared)."""
    if isinstance(planned, dict) and isinstance(engine, dict):
        return [d for key, value in planned.items()
                for d in (_differences(value, engine[key], f"{where}.{key}") if key in engine
                          else [f"{where}.{key}: in the plan, not given to the engine"])]
    if isinstance(planned, list) and isinstance(engine, list) and len(planned) == len(engine):
        return [d for i, (p, e) in enumerate(zip(planned, engine, strict=True))
                for d in _differences(p, e, f"{where}[{i}]")]
    if isinstance(planned, str) and isinstance(engine, str) and \
            planned.endswith(f"-{AUTONAME_SUFFIX}"):
        # An auto-named object: the plan writes the provider's random suffix as a fixed
        # placeholder (gpuplane.cli.plan.echo); the engine has the real 8 characters.
        stem = planned.removesuffix(AUTONAME_SUFFIX)
        if re.fullmatch(re.escape(stem) + r"[0-9a-z]{8}", engine):
            return []
    return [] if planned == engine else [f"{where}: plan {planned!r}, engine {engine!r}"]


# Inputs the SDK registers and the provider's Check drops, so the engine's checked inputs
# lack them: `compat: "true"`, which pulumi_kubernetes 4.25.0's Python Release always sets
# (sdk/python/pulumi_kubernetes/helm/v3/Release.py) as a marker for the provider's schema.
PROVIDER_DROPS = {"kubernetes:helm.sh/v3:Release::gpu-gpu-operator.compat: in the plan, "
                  "not given to the engine",
                  "kubernetes:helm.sh/v3:Release::gpu-hami.compat: in the plan, "
                  "not given to the engine",
                  "kubernetes:helm.sh/v3:Release::gpu-dra-driver.compat: in the plan, "
                  "not given to the engine"}


def inputs_agree(plan: dict[str, Any], res: pulumi_engine.Result) -> None:
    """The inputs `gpuplane plan` prints for each resource (recorded by its own short
    registration path and the SDK's mocks) are the inputs the real engine received: a
    Pulumi SDK release that changes what the offline plan relies on fails here."""
    steps = {f"{s['type']}::{s['name']}": s for s in res.steps}
    differences = [d for r in plan["resources"]
                   for d in _differences(r["inputs"], steps[f"{r['type']}::{r['name']}"]
                                         ["inputs"] or {}, f"{r['type']}::{r['name']}")]
    assert [d for d in differences if d not in PROVIDER_DROPS] == []


def rule_ids(names: set[str]) -> set[str]:
    """`gpuplane-fm18-advisory` -> `FM18`."""
    return {n.removeprefix("gpuplane-").removesuffix("-advisory").upper() for n in names}


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    _need()
    root = Path(tempfile.mkdtemp(prefix="gp-cp-", dir="/tmp"))
    cp = control_plane.start(root)
    try:
        yield cp
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def engine(cluster: control_plane.ControlPlane, tmp_path: Path) -> pulumi_engine.Engine:
    return pulumi_engine.Engine(tmp_path / "engine", kubeconfig=cluster.kubeconfig)


# Stack edits that the rulebook rejects, for the tests below that need one.
EDITS: dict[str, dict[str, dict[str, Any]]] = {
    "kind-smoke/FM18": {"gpuplane:gpuOperator": {"values": {"toolkit": {"version": "latest"}}}},
}
# Every stack the tests judge (tests/support/stack_cases.py): the bundled ones as they are and
# every broken one, `nodeAccess: ssh` run as `nodeAccess: pod` (the same verdict).
CATALOGUE = [pytest.param(s, None, id=s) for s in CLEAN] + [
    pytest.param(case.split("/")[0], case, id=case) for case in BROKEN]


def catalogue_stack(dest: Path, stack: str, case: str | None) -> Path:
    cfg = broken_config(case, dest) if case else config_of(stack)
    return engine_stack_file(dest / "stacks", stack, as_pod(cfg))


@pytest.mark.parametrize(("stack", "case"), CATALOGUE)
def test_preview_with_the_policy_pack_gives_the_plans_verdict(
        stack: str, case: str | None, engine: pulumi_engine.Engine,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pulumi preview --policy-pack policies` fails exactly when `gpuplane plan` rejects,
    naming the same rule ids: the program's refusal (`GpuCluster` refuses before its
    first child, so no policy sees a resource) or the pack's mandatory violations; the
    plan's warnings come back as advisory violations (or, on a refusal, as the program's
    warnings); a clean preview creates exactly the resources the plan lists, with its
    inputs."""
    path = catalogue_stack(tmp_path, stack, case)
    code, plan = plan_json(path, stack, capsys)
    res = engine.run("preview", stack, stack_file=path, policy_pack=True)
    assert res.ok == (code == 0), f"plan exit {code}; preview:\n{res.stdout}\n{res.stderr}"
    errors = {f["id"] for f in plan["findings"] if f["severity"] == "error"}
    advice = {f["id"] for f in plan["findings"] if f["severity"] != "error"}
    assert rule_ids(res.mandatory()) | res.program_errors() == errors, res.stdout
    if case:
        assert errors == BROKEN[case].errors, plan["findings"]
        text = res.stdout + res.stderr
        assert "gpuplane refused this plan" in text and "Nothing was changed" in text, text
        assert "Traceback" not in text, text[-3000:]
        assert rule_ids(res.advisory()) | res.program_warnings() == advice, res.stdout
    else:
        # Advice on what the pack cannot see (a node plan without node access) is logged
        # by the program on GpuCluster.
        assert rule_ids(res.advisory()) | res.program_warnings() == advice, res.stdout
        assert res.program_errors() == set(), res.stdout
        planned = {f"{r['type']}::{r['name']}" for r in plan["resources"]}
        assert set(program_steps(res)) == planned
        assert set(program_steps(res).values()) == {"create"}
        inputs_agree(plan, res)


def gpuplane_objects(cluster: control_plane.ControlPlane) -> list[str]:
    """What the API server holds that a gpuplane stack creates: namespaces beyond the
    control plane's own, ConfigMaps with gpuplane's intent label, Helm's release secrets,
    RuntimeClasses, Jobs."""
    from kubernetes import client

    from gpuplane.core.intent import INTENT_LABEL

    api = _api(cluster)
    core = client.CoreV1Api(api)
    own = {"default", "kube-system", "kube-public", "kube-node-lease"}
    return sorted(
        [f"namespace/{n.metadata.name}" for n in core.list_namespace().items
         if n.metadata.name not in own]
        + [f"configmap/{c.metadata.namespace}/{c.metadata.name}" for c in
           core.list_config_map_for_all_namespaces(label_selector=INTENT_LABEL).items]
        + [f"secret/{x.metadata.namespace}/{x.metadata.name}" for x in
           core.list_secret_for_all_namespaces(label_selector="owner=helm").items]
        + [f"runtimeclass/{r.metadata.name}" for r in
           client.NodeV1Api(api).list_runtime_class().items]
        + [f"job/{j.metadata.namespace}/{j.metadata.name}" for j in
           client.BatchV1Api(api).list_job_for_all_namespaces().items])


@pytest.mark.parametrize("case", list(BROKEN))
def test_up_of_a_rejected_stack_fails_and_creates_nothing(
        case: str, engine: pulumi_engine.Engine, cluster: control_plane.ControlPlane,
        tmp_path: Path) -> None:
    """`pulumi up` (the Automation API's: `--skip-preview`, where stack policies only run
    after the resources exist) of every broken stack exits non-zero naming the rules, and
    the API server holds no object gpuplane would have created: no namespace, no intent
    ConfigMap, no Helm release secret, no RuntimeClass."""
    stack = case.split("/")[0]
    before = gpuplane_objects(cluster)
    path = catalogue_stack(tmp_path, stack, case)
    res = engine.run("up", stack, stack_file=path, policy_pack=True)
    text = res.stdout + res.stderr
    assert not res.ok, text[-4000:]
    assert res.program_errors() == BROKEN[case].errors, text[-4000:]
    assert "gpuplane refused this plan" in text and "Traceback" not in text, text[-4000:]
    # The component itself is registered (the findings are logged on it); nothing below.
    assert set(program_steps(res)) <= {"gpuplane:index:GpuCluster::gpu"}, program_steps(res)
    assert gpuplane_objects(cluster) == before


def test_rule_levels_under_the_cli(engine: pulumi_engine.Engine, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuplane:rules: {FM18: advisory}` turns the FM18 stack's refusal into advice for
    the program and the pack alike; `--policy-pack-config` alone cannot (the program does
    not read it), and `gpuplane plan --policy-pack-config` says the same."""
    stack = "kind-smoke"
    broken = stack_file(tmp_path / "broken", stack, EDITS["kind-smoke/FM18"])
    config = REPO / "policies" / "policy-config.example.json"
    code, _plan = plan_json(broken, stack, capsys, "--policy-pack-config", str(config))
    res = engine.run("preview", stack, stack_file=broken, policy_pack=True,
                     policy_config=config)
    assert code == 1 and not res.ok and res.program_errors() == {"FM18"}, res.stdout
    accepted = stack_file(tmp_path / "accepted", stack, {
        **EDITS["kind-smoke/FM18"], "gpuplane:rules": {"FM18": "advisory"}})
    code, plan = plan_json(accepted, stack, capsys)
    res = engine.run("preview", stack, stack_file=accepted, policy_pack=True)
    assert code == 0 and res.ok, res.stdout
    assert res.mandatory() == set() and rule_ids(res.advisory()) == {"FM18"}, res.stdout
    assert {f["id"] for f in plan["findings"]} == {"FM18"}


def _api(cluster: control_plane.ControlPlane) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


def helm_release(cluster: control_plane.ControlPlane, namespace: str,
                 name: str) -> dict[str, Any]:
    """The deployed Helm release as Helm stores it (secret `sh.helm.release.v1.NAME.vN`:
    base64 of gzipped JSON inside the secret's own base64)."""
    import base64
    import gzip

    from kubernetes import client

    core = client.CoreV1Api(_api(cluster))
    secrets = core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={name}")
    latest = max(secrets.items, key=lambda s: int(s.metadata.labels["version"]))
    raw = base64.b64decode(base64.b64decode(latest.data["release"]))
    release: dict[str, Any] = json.loads(gzip.decompress(raw))
    return release


def objects_match_the_plan(cluster: control_plane.ControlPlane,
                           plan: dict[str, Any]) -> None:
    """Every Kubernetes object the plan lists exists with the plan's inputs, and each Helm
    release holds the plan's chart version and values."""
    from kubernetes import client

    api = _api(cluster)
    core, node = client.CoreV1Api(api), client.NodeV1Api(api)
    for r in plan["resources"]:
        meta, kind = r["inputs"].get("metadata", {}), r["type"]
        if kind == "kubernetes:core/v1:Namespace":
            got = core.read_namespace(meta["name"]).metadata.labels
            assert got.items() >= meta["labels"].items()
        elif kind == "kubernetes:core/v1:ConfigMap":
            got = core.read_namespaced_config_map(meta["name"], meta["namespace"]).data
            assert got == r["inputs"]["data"]
        elif kind == "kubernetes:node.k8s.io/v1:RuntimeClass":
            assert node.read_runtime_class(meta["name"]).handler == r["inputs"]["handler"]
        elif kind == "pulumi-python:dynamic/gpuplane:NodeLabels":
            for name in r["inputs"]["nodes"]:
                got = core.read_node(name).metadata.labels or {}
                assert got.items() >= r["inputs"]["labels"].items(), (name, got)
    for name, release in plan["helm"].items():
        got = helm_release(cluster, release["namespace"], name)
        assert got["info"]["status"] == "deployed"
        assert got["chart"]["metadata"]["version"].lstrip("v") == \
            str(release["version"]).lstrip("v")
        assert got.get("config", {}) == release["values"]


@pytest.fixture
def stack_nodes(cluster: control_plane.ControlPlane) -> Iterator[Any]:
    """`add(names)`: Node objects for a stack's GPU nodes (no kubelet: never Ready), deleted
    at the end."""
    from kubernetes import client

    core = client.CoreV1Api(_api(cluster))
    made: list[str] = []

    def add(names: list[str]) -> None:
        for name in names:
            core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
            made.append(name)
    yield add
    for name in made:
        core.delete_node(name)


@pytest.mark.parametrize("stack", NONE_STACKS)
def test_up_is_what_the_plan_printed_then_a_noop_then_destroy(
        stack: str, engine: pulumi_engine.Engine, cluster: control_plane.ControlPlane,
        stack_nodes: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pulumi up` of a `nodeAccess: none` stack: the operator's release (its CRDs and its
    ClusterPolicy accepted by the API server's schema validation), the RuntimeClass and the
    ConfigMaps hold what `gpuplane plan` printed; a second `up` changes nothing; after a
    stack change `pulumi preview` touches what `gpuplane plan --base` lists; `pulumi
    destroy` removes what the stack made."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    # The checks need GPUs (their failure is the next test); HAMi labels the stack's nodes.
    no_checks = {"gpuplane:checks": {"enabled": False}}
    path = stack_file(tmp_path / "stacks", stack, no_checks)
    code, plan = plan_json(path, stack, capsys)
    assert code == 0
    stack_nodes([n["name"] for n in plan["config"]["nodes"]])
    hooks = control_plane.helm_hooks_succeed(
        cluster, *{release["namespace"] for release in plan["helm"].values()})
    with hooks:
        up = engine.run("up", stack, stack_file=path, policy_pack=True)
    assert up.ok, up.stdout + up.stderr
    objects_match_the_plan(cluster, plan)
    api = _api(cluster)
    ext = client.ApiextensionsV1Api(api)
    assert ext.read_custom_resource_definition("clusterpolicies.nvidia.com")
    policies = client.CustomObjectsApi(api).list_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies")["items"]
    assert [p["metadata"]["name"] for p in policies] == ["cluster-policy"]

    again = engine.run("up", stack, stack_file=path, policy_pack=True)
    assert again.ok, again.stdout
    assert program_steps(again) == {}, again.stdout
    assert set(again.changes) == {"same"}

    # A stack change: the real preview touches what `gpuplane plan --base` says changes.
    base = tmp_path / "base.json"
    base.write_text(json.dumps(plan))
    changed = stack_file(tmp_path / "stacks", stack, {
        **no_checks, "gpuplane:gpuOperator": {"values": {"dcgmExporter": {"enabled": False}}}})
    code, new = plan_json(changed, stack, capsys, "--base", str(base))
    assert code == 0
    diff = new["diff"]["resources"]
    expected = {**{r: "update" for r in (c["resource"] for c in diff["changed"])},
                **{r: "create" for r in diff["added"]}, **{r: "delete" for r in diff["removed"]}}
    assert expected, "the change must change something"
    preview = engine.run("preview", stack, stack_file=changed, policy_pack=True)
    assert preview.ok, preview.stdout
    assert program_steps(preview) == expected, preview.stdout
    path.write_text(changed.read_text())   # what `destroy` reads; nothing was applied

    with control_plane.helm_hooks_succeed(
            cluster, *{release["namespace"] for release in plan["helm"].values()}):
        down = engine.run("destroy", stack, stack_file=path)
    assert down.ok, down.stdout + down.stderr
    core = client.CoreV1Api(api)
    for r in plan["resources"]:
        meta = r["inputs"].get("metadata", {})
        if r["type"] == "kubernetes:core/v1:ConfigMap":
            with pytest.raises(ApiException) as gone:
                core.read_namespaced_config_map(meta["name"], meta["namespace"])
            assert gone.value.status == 404
        if r["type"] == "pulumi-python:dynamic/gpuplane:NodeLabels":
            for name in r["inputs"]["nodes"]:
                got = core.read_node(name).metadata.labels or {}
                assert not got.keys() & r["inputs"]["labels"].keys(), (name, got)
    assert not core.list_namespaced_secret(
        plan["helm"]["gpu-operator"]["namespace"], label_selector="owner=helm").items


def test_checks_fail_up_when_gpu_nodes_never_become_ready(
        engine: pulumi_engine.Engine, cluster: control_plane.ControlPlane, stack_nodes: Any,
        tmp_path: Path) -> None:
    """A GPU node that registered but never runs a kubelet (so never announces
    `nvidia.com/gpu`): the post-deploy checks fail `pulumi up` within their timeout with the
    finding, the node and the fix, not a hang and no traceback; the next `pulumi up` runs
    the failed check again."""
    stack_nodes(["gpu-never-01"])
    timeout = 30
    path = stack_file(tmp_path / "stacks", "kind-smoke", {
        "gpuplane:nodes": [{"name": "gpu-never-01", "gpus": 1}],
        "gpuplane:checks": {"enabled": True, "timeoutSeconds": timeout}})
    up = engine.run("up", "kind-smoke", stack_file=path, timeout=600)
    assert not up.ok
    text = up.stdout + up.stderr
    assert "[FM01] node gpu-never-01 advertises no nvidia.com/gpu" in text, text[-4000:]
    assert "fix: " in text, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    # Both checks ran to their verdicts; the program stopped once, naming them.
    assert ("the post-deploy checks gpu-checks-allocatable, gpu-checks-nodes-check failed"
            in text), text[-4000:]
    # The wait is the checks' own budget, not the Helm timeout (900 s) or a hang.
    assert up.seconds < timeout + 240, up.seconds
    # The check resource made its Job in the API server (no Job is a Pulumi resource).
    first = check_jobs(cluster)
    assert len(first) == 1 and first[0].startswith("gpu-checks-probe-gpu-never-01-"), first
    # Nothing changed in the stack, yet the failed check runs (and fails) again, in a new
    # Job; the last run's is deleted.
    again = engine.run("up", "kind-smoke", stack_file=path, timeout=600)
    assert not again.ok
    assert sorted(s["name"] for s in again.steps if s["op"] in ("update", "replace")) == [
        "gpu-checks-allocatable", "gpu-checks-nodes-check"], again.steps
    second = check_jobs(cluster)
    assert len(second) == 1 and second != first, (first, second)
    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        down = engine.run("destroy", "kind-smoke", stack_file=path)
    assert down.ok, down.stdout + down.stderr
    assert check_jobs(cluster) == []


def check_jobs(cluster: control_plane.ControlPlane) -> list[str]:
    """The GPU checks' Jobs in the API server (being deleted ones left out)."""
    from kubernetes import client

    jobs = client.BatchV1Api(_api(cluster)).list_namespaced_job(
        "gpu-operator", label_selector="app.kubernetes.io/name=gpuplane-checks")
    return sorted(j.metadata.name for j in jobs.items if j.metadata.deletion_timestamp is None)


def test_bad_stack_config_fails_preview_with_the_key_and_no_traceback(
        engine: pulumi_engine.Engine, tmp_path: Path) -> None:
    """A stack key the config refuses, under the real CLI: the preview fails naming the key
    and what is wrong, as `gpuplane plan` does, without a Python traceback."""
    path = stack_file(tmp_path / "stacks", "kind-smoke", {
        "gpuplane:checks": {"enabled": True, "timeoutSeconds": 5}})
    preview = engine.run("preview", "kind-smoke", stack_file=path)
    assert not preview.ok
    text = preview.stdout + preview.stderr
    assert "the stack config is invalid (nothing was changed)" in text, text[-3000:]
    assert "gpuplane:checks.timeoutSeconds: Input should be greater than or equal to 30" \
        in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
