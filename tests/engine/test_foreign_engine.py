"""GPU stacks gpuplane did not make, under the real Pulumi CLI (#40 item 5): the GPU Operator
installed by a plain `helm.v3.Release`, a `helm.v4.Chart` or a `ClusterPolicy`
`apiextensions.CustomResource`, a device-plugin DaemonSet beside the operator's own plugin
(FM12) and a RuntimeClass whose handler the nodes never get (FM11). For each, a broken
program whose `pulumi preview --policy-pack <pack> --policy-pack-config FILE` fails with
exactly its rule ids as mandatory violations and a correct one that passes; the facts
come from a file `gpuplane policy-pack config` wrote. Each verdict (rule ids, mandatory
against advisory) is held against the offline runner's (`gpuplane plan`'s) for the same
program and config.

Programs run as `scripts/real-engine.sh` runs them (`pulumi_engine.Engine.run_project`,
the script's own core); the last test runs the script itself. The charts are the
operator's chart from ../shared/charts, packaged at its tag: no network, preview only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, oracle, pulumi_engine
from support import foreign_matrix as matrix
from support.charts import chart_dirs, helm

from gpuplane.cli.main import main as gpuplane
from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.config import load_pack_config
from gpuplane.policy.location import PACK_DIR
from gpuplane.policy.pack import policy_names

pytestmark = [pytest.mark.real, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]
OPERATOR = "v25.10.1"
FACTS = ["--distro", "kubeadm", "--containerd-version", "1.7", "--driver", "preinstalled",
         "--kubernetes-version", "1.31.0"]


@dataclass
class Env:
    """One control plane, one engine, the packaged chart and the facts files of a module."""

    engine: pulumi_engine.Engine
    chart: Path
    root: Path

    def facts(self, *extra: str) -> Path:
        """A policy config written by `gpuplane policy-pack config` (later flags win)."""
        flags = [*FACTS, *extra]
        path = self.root / ("facts" + "".join(f"-{a.lstrip('-')}" for a in extra) + ".json")
        if not path.exists():
            assert gpuplane(["policy-pack", "config", *flags, "--output", str(path)]) == 0
        return path


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    for why in (pulumi_engine.missing(), control_plane.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine: {why}", "make containerd")
    root = Path(tempfile.mkdtemp(prefix="gp-foreign-", dir="/tmp"))
    folder = chart_dirs("gpu-operator")[OPERATOR]
    # The operator's source tree says v1.0.0-devel: packaged at its tag, as a user's
    # air-gapped copy (tests/engine/test_pulumi_engine.py does the same).
    chart = Path(helm().package(folder, destination=root, version=OPERATOR,
                                app_version=OPERATOR))
    cp = control_plane.start(root / "cluster")
    try:
        yield Env(pulumi_engine.Engine(root / "engine", kubeconfig=cp.kubeconfig), chart, root)
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)


def release(chart: Path, values: str) -> str:
    return (f'k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart={str(chart)!r},\n'
            f'    version="{OPERATOR}", namespace="gpu-operator", create_namespace=True,\n'
            f'    skip_await=True, values={values})\n')


def chart_v4(chart: Path, values: str) -> str:
    return (f'k8s.helm.v4.Chart("gpu-operator", chart={str(chart)!r}, version="{OPERATOR}",\n'
            f'    namespace="gpu-operator", values={values})\n')


def cluster_policy(chart: Path, spec: str) -> str:
    return ('k8s.apiextensions.CustomResource("cp", api_version="nvidia.com/v1", '
            'kind="ClusterPolicy", metadata={"name": "cluster-policy"}, '
            f'spec={spec})\n')


PLUGIN_DS = """
k8s.apps.v1.DaemonSet("nvidia-device-plugin", metadata={"name": "nvidia-device-plugin-daemonset",
    "namespace": "kube-system"},
    spec={"selector": {"matchLabels": {"app": "dp"}}, "template": {
        "metadata": {"labels": {"app": "dp"}},
        "spec": {"containers": [{"name": "dp",
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]}}})
"""
GOOD = '{"driver": {"enabled": False}}'


def dra_release(values: str) -> str:
    """NVIDIA's DRA driver from ../shared/charts (its Chart.yaml names its tag)."""
    chart = chart_dirs("dra-driver-nvidia-gpu")["v0.4.1"]
    return (f'k8s.helm.v3.Release("dra", name="dra-driver-nvidia-gpu", chart={str(chart)!r},\n'
            f'    version="0.4.1", namespace="nvidia-dra-driver-gpu", create_namespace=True,\n'
            f'    skip_await=True, values={values})\n')


def claim_template(selector: str) -> str:
    """A ResourceClaimTemplate (resource.k8s.io/v1, as Kubernetes 1.34 serves it) asking the
    DRA driver for one GPU that matches `selector`."""
    return ('k8s.apiextensions.CustomResource("rct", api_version="resource.k8s.io/v1",\n'
            '    kind="ResourceClaimTemplate", metadata={"name": "one-gpu", "namespace": '
            '"default"},\n    spec={"spec": {"devices": {"requests": [{"name": "gpu", '
            '"exactly": {\n        "deviceClassName": "gpu.nvidia.com", "selectors": '
            f'[{{"cel": {{"expression": {selector!r}}}}}]}}}}]}}}}}})\n')


DRA_OK = ('{"gpuResourcesEnabledOverride": True, '
          '"resources": {"computeDomains": {"enabled": False}}}')
DRA_FACTS = ("--kubernetes-version", "1.34.3", "--containerd-version", "2.1")


def runtime_class(handler: str) -> str:
    return f'k8s.node.v1.RuntimeClass("gpu", metadata={{"name": "gpu"}}, handler="{handler}")\n'


def sharing(chart: Path, strategy: str, label: str) -> str:
    """The operator with a device plugin ConfigMap of the user's (key `default`, mixed
    MIG) and a NodePatch selecting `label` (issue #47: FM19, FM23 on a plain install)."""
    values = repr({"driver": {"enabled": False}, "mig": {"strategy": strategy},
                   "devicePlugin": {"config": {"name": "plugin-config", "default": "default"}}})
    return (release(chart, values)
            + 'k8s.core.v1.ConfigMap("plugin", metadata={"name": "plugin-config", '
              '"namespace": "gpu-operator"}, data={"default": '
              '"version: v1\\nflags: {migStrategy: mixed}\\n"})\n'
            + 'k8s.core.v1.NodePatch("gpu-1", metadata={"name": "gpu-1", "labels": '
              f'{{"nvidia.com/device-plugin.config": "{label}"}}}})\n')


def shared_two(chart: Path, gpus: int) -> str:
    """A helm.v4.Chart whose own device plugin ConfigMap (devicePlugin.config.create) has
    one cluster-wide time-slicing key with failRequestsGreaterThanOne, and a Deployment
    asking for `gpus` GPUs (FM24 on a plain install: the engine renders the chart, so the
    pack sees the Chart's values beside the ClusterPolicy and ConfigMap it renders)."""
    data = {"ts": "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: "
                  "true\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n"}
    values = repr({"driver": {"enabled": False}, "devicePlugin": {"config": {
        "create": True, "name": "plugin-config", "default": "ts", "data": data}}})
    return chart_v4(chart, values) + (
        'k8s.apps.v1.Deployment("infer", metadata={"name": "infer"}, spec={\n'
        '    "selector": {"matchLabels": {"app": "i"}}, "template": {\n'
        '        "metadata": {"labels": {"app": "i"}}, "spec": {"runtimeClassName": "nvidia",\n'
        '        "containers": [{"name": "c", "image": "cuda", "resources": {"limits": '
        f'{{"nvidia.com/gpu": {gpus}}}}}}}]}}}}}})\n')


# case: (the program from the packaged chart, extra facts, the broken program's rule ids)
CASES: dict[str, tuple[Any, tuple[str, ...], set[str]]] = {
    "release-v3/broken": (lambda c: release(c, '{"driver": {"enabled": True}, '
                                               '"toolkit": {"version": "latest"}}'),
                          (), {"FM08", "FM18"}),
    "release-v3/correct": (lambda c: release(c, GOOD), (), set()),
    "chart-v4/broken": (lambda c: chart_v4(c, '{"driver": {"enabled": True}}'), (), {"FM08"}),
    "chart-v4/correct": (lambda c: chart_v4(c, GOOD), (), set()),
    "cluster-policy/broken": (
        lambda c: cluster_policy(c, '{"driver": {"enabled": True}, "cdi": {"enabled": True}}'),
        ("--containerd-version", "1.6"), {"FM08", "FM16"}),
    # On containerd 1.6 the operator's default CDI (on since v25.10) is FM16 too.
    "cluster-policy/correct": (lambda c: cluster_policy(c, '{"driver": {"enabled": False}, '
                                                          '"cdi": {"enabled": False}}'),
                               ("--containerd-version", "1.6"), set()),
    "device-plugin-fm12/broken": (lambda c: release(c, GOOD) + PLUGIN_DS, (), {"FM12"}),
    "device-plugin-fm12/correct": (
        lambda c: release(c, '{"driver": {"enabled": False}, '
                             '"devicePlugin": {"enabled": False}}') + PLUGIN_DS, (), set()),
    "runtime-class-fm11/broken": (
        lambda c: release(c, GOOD) + runtime_class("nvidia-container-runtime"), (), {"FM11"}),
    "runtime-class-fm11/correct": (lambda c: release(c, GOOD) + runtime_class("nvidia"),
                                   (), set()),
    "sharing-fm19-fm23/broken": (lambda c: sharing(c, "single", "inference"), (),
                                 {"FM19", "FM23"}),
    "sharing-fm19-fm23/correct": (lambda c: sharing(c, "mixed", "default"), (), set()),
    "sharing-fm24/broken": (lambda c: shared_two(c, 2), (), {"FM24"}),
    "sharing-fm24/correct": (lambda c: shared_two(c, 1), (), set()),
    # NVIDIA's DRA driver beside the operator (FM32: its device plugin still on; FM31:
    # the operator's driver root for a driver the nodes carry); FM30/FM33 on the facts.
    "dra-fm32/broken": (lambda c: release(c, GOOD) + dra_release(DRA_OK), DRA_FACTS, {"FM32"}),
    "dra-fm31/broken": (
        lambda c: release(c, '{"driver": {"enabled": False}, '
                             '"devicePlugin": {"enabled": False}}')
        + dra_release(DRA_OK[:-1] + ', "nvidiaDriverRoot": "/run/nvidia/driver"}'),
        DRA_FACTS, {"FM31"}),
    "dra-fm30-fm33/broken": (
        lambda c: release(c, '{"driver": {"enabled": False}, "cdi": {"enabled": False}, '
                             '"devicePlugin": {"enabled": False}}') + dra_release(DRA_OK),
        (), {"FM30", "FM33"}),
    # A claim on an attribute the driver stopped publishing (FM37), and one it publishes.
    "dra-fm37/broken": (lambda c: claim_template(
        "device.attributes['gpu.nvidia.com'].index == 0"), DRA_FACTS, {"FM37"}),
    "dra-fm37/correct": (lambda c: claim_template(
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"),
        DRA_FACTS, set()),
    "dra/correct": (
        lambda c: release(c, '{"driver": {"enabled": False}, '
                             '"devicePlugin": {"enabled": False}}') + dra_release(DRA_OK),
        DRA_FACTS, set()),
}


def project(root: Path, case: str, body: str) -> Path:
    """A user's project of its own: Pulumi.yaml, __main__.py, Pulumi.dev.yaml."""
    name = "foreign-" + case.replace("/", "-")
    folder = root / "projects" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n")
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n" + body)
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    return folder


def rule_ids(names: set[str]) -> set[str]:
    """`gpuplane-fm18-advisory` -> `FM18`."""
    return {n.removeprefix("gpuplane-").removesuffix("-advisory").upper() for n in names}


def offline(folder: Path, facts: Path) -> tuple[set[str], set[str]]:
    """What `gpuplane plan --policy-pack-config FACTS` says: errors, advice (rule ids)."""
    report = plan_stack("dev", folder, load_pack_config(facts, policy_names()),
                        load_project(folder))
    ids = {sev: {f["id"] for f in report["findings"] if (f["severity"] == "error") == sev}
           for sev in (True, False)}
    return ids[True], ids[False]


@pytest.mark.parametrize("case", list(CASES))
def test_a_foreign_program_under_the_cli_gets_the_offline_verdict(case: str, env: Env) -> None:
    """`pulumi preview --policy-pack` of the program fails exactly when it is broken,
    naming exactly its rule ids as mandatory violations; the mandatory and advisory rule
    ids are the offline runner's errors and warnings."""
    program, extra, expected = CASES[case]
    folder = project(env.root, case, textwrap.dedent(program(env.chart)))
    facts = env.facts(*extra)
    errors, advice = offline(folder, facts)
    assert errors == expected, f"offline: {errors}"
    res = env.engine.run_project("preview", folder, "dev", policy_pack=PACK_DIR,
                                 policy_config=facts)
    text = res.stdout + res.stderr
    assert res.ok == (not expected), text[-4000:]
    assert rule_ids(res.mandatory()) == expected, res.violations
    assert rule_ids(res.advisory()) == advice, res.violations
    assert all(v["policyName"].startswith("gpuplane-") for v in res.violations)
    assert "Traceback" not in text, text[-4000:]
    if expected:
        assert "error: preview failed" in text or "mandatory policy violation" in text, \
            text[-4000:]


@pytest.mark.parametrize("chart_form", ["dir", "tgz"])
@pytest.mark.parametrize("form", ["release-v3", "chart-v4"])
@pytest.mark.parametrize("broken", [False, True], ids=["correct", "broken"])
def test_a_local_chart_without_a_version_gets_one_verdict(env: Env, form: str,
                                                          chart_form: str, broken: bool) -> None:
    """An air-gapped program: the operator's chart beside it (a directory or a .tgz, named
    by a path relative to the program) and no `version`. The provider reads the version
    from the chart; `gpuplane plan` judges it by the same Chart.yaml, so neither calls it
    FM18, and both judge its values alike."""
    values = '{"driver": {"enabled": True}}' if broken else GOOD
    chart = f"charts/{env.chart.name}" if chart_form == "tgz" else "./charts/gpu-operator"
    body = (f'k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="{chart}",\n'
            '    namespace="gpu-operator", create_namespace=True, skip_await=True,\n'
            f'    values={values})\n') if form == "release-v3" else (
            f'k8s.helm.v4.Chart("gpu-operator", chart="{chart}", namespace="gpu-operator",\n'
            f'    values={values})\n')
    folder = project(env.root, f"local-{form}-{chart_form}-{broken}", body)
    charts = folder / "charts"
    charts.mkdir(exist_ok=True)
    if chart_form == "tgz":
        shutil.copy(env.chart, charts / env.chart.name)
    else:
        import tarfile

        with tarfile.open(env.chart) as tar:
            tar.extractall(charts, filter="data")
    facts = env.facts()
    errors, advice = offline(folder, facts)
    expected = {"FM08"} if broken else set()
    assert errors == expected and "FM18" not in advice, (errors, advice)
    res = env.engine.run_project("preview", folder, "dev", policy_pack=PACK_DIR,
                                 policy_config=facts)
    text = res.stdout + res.stderr
    assert res.ok == (not expected), text[-4000:]
    assert rule_ids(res.mandatory()) == expected, res.violations
    assert rule_ids(res.advisory()) == advice, res.violations


def test_without_the_facts_the_broken_release_is_held_back_as_advice(env: Env) -> None:
    """The same broken release without `--driver`: FM08 is not judged against a guessed
    cluster, in the CLI as offline; the missing key is said once, as advice."""
    program, _extra, _expected = CASES["release-v3/broken"]
    folder = project(env.root, "release-v3/no-driver", program(env.chart))
    facts = env.root / "facts-no-driver.json"
    assert gpuplane(["policy-pack", "config", "--distro", "kubeadm", "--containerd-version",
                     "1.7", "--output", str(facts)]) == 0
    errors, advice = offline(folder, facts)
    res = env.engine.run_project("preview", folder, "dev", policy_pack=PACK_DIR,
                                 policy_config=facts)
    assert "FM08" not in errors and rule_ids(res.mandatory()) == errors == {"FM18"}
    assert rule_ids(res.advisory()) == advice
    assert any("`driver`" in v["message"] for v in res.violations
               if v["enforcementLevel"] == "advisory"), res.violations


def script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["sh", str(REPO / "scripts" / "real-engine.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def test_the_script_runs_a_broken_program_on_a_throwaway_control_plane(env: Env) -> None:
    """`scripts/real-engine.sh preview DIR dev --control-plane --policy-pack ...`: exit 1,
    the last line the JSON verdict with FM11 mandatory; the stack file as it was; bad
    usage exits 2 naming what is wrong, without a traceback."""
    program, _extra, _expected = CASES["runtime-class-fm11/broken"]
    folder = project(env.root, "script/broken", program(env.chart))
    stack_file = (folder / "Pulumi.dev.yaml").read_bytes()
    done = script("preview", str(folder), "dev", "--control-plane", "--policy-pack",
                  str(PACK_DIR), "--policy-config", str(env.facts()))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    verdict = json.loads(done.stdout.splitlines()[-1])
    assert verdict["ok"] is False
    assert {(v["policyName"], v["enforcementLevel"]) for v in verdict["violations"]} == \
        {("gpuplane-fm11", "mandatory")}, verdict
    assert all(set(v) == {"policyName", "enforcementLevel", "message"}
               for v in verdict["violations"])
    assert (folder / "Pulumi.dev.yaml").read_bytes() == stack_file
    bad = script("preview", str(folder), "prod")
    assert bad.returncode == 2 and "Pulumi.prod.yaml does not exist" in bad.stderr
    assert "Traceback" not in bad.stderr
    bad = script("apply", str(folder), "dev")
    assert bad.returncode == 2 and "expected one of preview, up, destroy" in bad.stderr


# ---------------------------------------------------------------- the foreign matrix (#46)

def _flags(facts: dict[str, Any]) -> list[str]:
    """`gpuplane policy-pack config` flags for a matrix cell's facts."""
    out: list[str] = []
    for key, value in facts.items():
        out += ["--" + "".join(f"-{c.lower()}" if c.isupper() else c for c in key), str(value)]
    return out


MATRIX_PROGRAMS = {"release": lambda c, v: release(c, v), "chart": lambda c, v: chart_v4(c, v),
                   "cluster-policy": lambda c, v: cluster_policy(c, v)}


@pytest.mark.parametrize("form", matrix.FORMS)
@pytest.mark.parametrize("cluster", matrix.CLUSTERS)
def test_the_foreign_matrix_under_the_cli(cluster: str, form: str, env: Env) -> None:
    """Each cell of the foreign matrix (tests/support/foreign_matrix.py: the chart's toolkit
    defaults, on every distribution and platform, in every install form), one preview
    each: the CLI's mandatory and advisory rule ids are `gpuplane plan`'s errors and
    warnings, and the toolkit-path verdict is the one tests/pure/test_foreign_matrix.py
    holds against a GpuCluster of the same cluster."""
    values = matrix.VALUES["defaults"]
    text = json.dumps(values).replace("false", "False").replace("true", "True")
    folder = project(env.root, f"matrix/{cluster}/{form}",
                     MATRIX_PROGRAMS[form](env.chart, text))
    facts = env.root / f"matrix-{cluster}.json"
    if not facts.exists():
        assert gpuplane(["policy-pack", "config", *_flags(matrix.facts(cluster)),
                         "--output", str(facts)]) == 0
    errors, advice = offline(folder, facts)
    res = env.engine.run_project("preview", folder, "dev", policy_pack=PACK_DIR,
                                 policy_config=facts)
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out[-4000:]
    assert rule_ids(res.mandatory()) == errors, (res.violations, errors)
    assert rule_ids(res.advisory()) == advice, (res.violations, advice)
    assert res.ok == (not errors), out[-4000:]
    # A plain program has no gpuplane stack: fixes name the pack config's keys instead.
    for v in res.violations:
        assert "gpuplane:cluster." not in v["message"].partition("fix:")[2], v["message"]
    toolkit = {v["policyName"] for v in res.violations} & {
        f"gpuplane-{i.lower()}" for i in matrix.TOOLKIT_IDS}
    print(f"MATRIX {cluster} {form} offline={sorted(errors)}/{sorted(advice)} "
          f"cli={sorted(rule_ids(res.mandatory()))}/{sorted(rule_ids(res.advisory()))} "
          f"toolkit={sorted(rule_ids(toolkit))}")
