"""gpuplane from its wheel, outside the checkout (#40 item 5): the wheel unpacked into a
site folder of its own (as pip installs it), a project of the user's own in a temp dir,
and there `gpuplane plan` and `pulumi preview --policy-pack <the installed pack>` under
the real CLI (`scripts/real-engine.sh` with `GPUPLANE_FROM_CHECKOUT=0`): a program built
on gpuplane's components, and a foreign program. Both the program and the pack import
gpuplane from the wheel (the program exports the path it imported it from).

The wheel's dependencies (the Pulumi SDKs, the kubernetes client) come from the venv the
tests run in: a fresh virtualenv would fetch them from PyPI, which the engine tier does
not do. What is held here is that nothing of the checkout is needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import control_plane, oracle, pulumi_engine
from support import wheel as wheel_build
from test_pulumi_engine import local_chart

pytestmark = [pytest.mark.real, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site() -> Iterator[Path]:
    for why in (pulumi_engine.missing(), control_plane.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine: {why}", "make containerd")
    root = Path(tempfile.mkdtemp(prefix="gp-wheel-", dir="/tmp"))
    try:
        wheel, _ = wheel_build.build(root / "build")
        yield wheel_build.unpack(wheel, root / "site")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def project(root: Path, name: str, main: str, config: dict[str, Any]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n")
    (folder / "__main__.py").write_text(textwrap.dedent(main))
    (folder / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    return folder


def from_wheel(site: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`gpuplane ARGV` with the wheel's gpuplane, run in `cwd` (outside the checkout)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import gpuplane\n"
            "assert gpuplane.__file__.startswith(sys.argv[1]), gpuplane.__file__\n"
            "from gpuplane.cli.main import main\n"
            "sys.exit(main(sys.argv[2:]))\n")
    return subprocess.run([sys.executable, "-c", code, str(site), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def real_engine(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "GPUPLANE_FROM_CHECKOUT": "0",
           "PYTHONPATH": str(site)}
    return subprocess.run(["sh", str(REPO / "scripts" / "real-engine.sh"), *argv], env=env,
                          capture_output=True, text=True, timeout=600)


OWN = """
import pulumi
import gpuplane
from gpuplane.stack.program import main

main()
pulumi.export("gpuplaneFrom", gpuplane.__file__)
"""
FOREIGN = """
import pulumi_kubernetes as k8s

k8s.node.v1.RuntimeClass("gpu", metadata={"name": "gpu"}, handler="nvidia-container-runtime")
"""


def test_plan_and_preview_from_the_wheel_outside_the_checkout(site: Path,
                                                              tmp_path: Path) -> None:
    pack = site / "gpuplane" / "data" / "policypack"
    where = from_wheel(site, "policy-pack", "path", cwd=tmp_path)
    assert where.returncode == 0 and Path(where.stdout.strip()) == pack, where.stderr

    # A program on gpuplane's components: the kind-smoke stack, its chart air-gapped.
    cfg = yaml.safe_load((REPO / "stacks" / "Pulumi.kind-smoke.yaml").read_text())["config"]
    cfg["gpuplane:gpuOperator"].update(chart=str(local_chart("gpu-operator", "v25.10.1")),
                                       skipAwait=True)
    own = project(tmp_path, "own", OWN, cfg)
    plan = from_wheel(site, "plan", "--stack", "dev", "--format", "json", cwd=own)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert json.loads(plan.stdout)["verdict"] == "ok"
    done = real_engine(site, "preview", str(own), "dev", "--control-plane",
                       "--policy-pack", str(pack))
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-4000:]
    assert json.loads(done.stdout.splitlines()[-1])["ok"] is True
    assert str(site / "gpuplane" / "__init__.py") in done.stdout, text[-4000:]

    # A foreign program with the facts from the wheel's `policy-pack config`.
    foreign = project(tmp_path, "foreign", FOREIGN, {})
    facts = tmp_path / "facts.json"
    made = from_wheel(site, "policy-pack", "config", "--distro", "kubeadm",
                      "--containerd-version", "1.7", "--runtime-class", "nvidia",
                      "--output", str(facts), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    offline = from_wheel(site, "plan", "--stack", "dev", "--format", "json",
                         "--policy-pack-config", str(facts), cwd=foreign)
    assert offline.returncode == 1, offline.stdout[-2000:] + offline.stderr[-2000:]
    errors = {f["id"] for f in json.loads(offline.stdout)["findings"]
              if f["severity"] == "error"}
    assert errors == {"FM11"}
    done = real_engine(site, "preview", str(foreign), "dev", "--control-plane",
                       "--policy-pack", str(pack), "--policy-config", str(facts))
    assert done.returncode == 1, (done.stdout + done.stderr)[-4000:]
    verdict = json.loads(done.stdout.splitlines()[-1])
    assert {(v["policyName"], v["enforcementLevel"]) for v in verdict["violations"]
            if v["enforcementLevel"] == "mandatory"} == {("gpuplane-fm11", "mandatory")}
