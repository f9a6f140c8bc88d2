"""The GPU Operator's NRI plugin mode in a program gpuplane did not make, under the real
Pulumi CLI: a plain `helm.v3.Release` of chart v26.3.0 (packaged from ../shared/charts at
its tag) with `cdi.nriPluginEnabled`, beside a Pod that still names the `nvidia`
RuntimeClass, on nodes whose containerd is below what the plugin needs. `pulumi preview
--policy-pack` fails with exactly FM26 and FM27 as mandatory violations, as `gpuplane plan`
does offline; the fixed program passes both."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import control_plane, oracle, pulumi_engine
from support.charts import chart_dirs, helm
from test_foreign_engine import offline, project, rule_ids

from gpuplane.cli.main import main as gpuplane
from gpuplane.policy.location import PACK_DIR

pytestmark = [pytest.mark.real, pytest.mark.engine]
CHART = "v26.3.0"
POD = ('k8s.core.v1.Pod("train", metadata={{"name": "train"}}, spec={{{rc}"containers": '
       '[{{"name": "c", "image": "cuda", "resources": '
       '{{"limits": {{"nvidia.com/gpu": 1}}}}}}]}})\n')


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[pulumi_engine.Engine, Path, Path]]:
    for why in (pulumi_engine.missing(), control_plane.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine: {why}", "make containerd")
    root = Path(tempfile.mkdtemp(prefix="gp-nri-", dir="/tmp"))
    chart = Path(helm().package(chart_dirs("gpu-operator")[CHART], destination=root,
                                version=CHART, app_version=CHART))
    cp = control_plane.start(root / "cluster")
    try:
        yield pulumi_engine.Engine(root / "engine", kubeconfig=cp.kubeconfig), chart, root
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)


def _program(chart: Path, runtime_class: bool) -> str:
    release = (f'k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart={str(chart)!r},\n'
               f'    version="{CHART}", namespace="gpu-operator", create_namespace=True,\n'
               '    skip_await=True, values={"driver": {"enabled": False}, '
               '"cdi": {"nriPluginEnabled": True}})\n')
    return release + POD.format(rc='"runtimeClassName": "nvidia", ' if runtime_class else "")


@pytest.mark.parametrize(("case", "containerd", "runtime_class", "expected"), [
    ("broken", "1.7.24", True, {"FM26", "FM27"}),
    ("correct", "2.1", False, set()),
])
def test_fm26_fm27_nri_release_under_the_cli_gets_the_offline_verdict(
        world: tuple[pulumi_engine.Engine, Path, Path], case: str, containerd: str,
        runtime_class: bool, expected: set[str]) -> None:
    engine, chart, root = world
    folder = project(root, f"nri-{case}", textwrap.dedent(_program(chart, runtime_class)))
    facts = root / f"facts-{case}.json"
    assert gpuplane(["policy-pack", "config", "--distro", "kubeadm", "--containerd-version",
                     containerd, "--driver", "preinstalled", "--kubernetes-version", "1.31.0",
                     "--output", str(facts)]) == 0
    errors, advice = offline(folder, facts)
    assert errors == expected, errors
    res = engine.run_project("preview", folder, "dev", policy_pack=PACK_DIR,
                             policy_config=facts)
    text = res.stdout + res.stderr
    assert res.ok == (not expected), text[-4000:]
    assert rule_ids(res.mandatory()) == expected, res.violations
    assert rule_ids(res.advisory()) == advice, res.violations
    assert "Traceback" not in text, text[-4000:]
