"""Every code block of README.md and docs/own-program.md that a user runs, run as a user
runs it (#50): gpuplane installed from its wheel (`make wheel`, then `pip install` of that
file into a site folder of its own), a project of the user's own in a temp dir outside the
checkout, the documented program as its `__main__.py`, and `gpuplane plan` offline on an
SSH, a pod and a no-access stack (copied from the bundled ones, as the docs say to).

The `pulumi …` lines need the real CLI and a backend: tests/engine/test_wheel_engine.py
runs a preview with the installed pack; here they are listed and left out, nothing else
is. The published pack (`dist/policypack`) is held to install gpuplane from the wheel in
it, with pip run where Pulumi runs it: in the pack's folder."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.stack_cases import as_pod, config_of

pytestmark = [pytest.mark.real, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/own-program.md")
README_SECTION = "## Use it from your own Pulumi program"
# Lines that need the real Pulumi CLI and a backend (test_wheel_engine.py runs them).
NEEDS_PULUMI = re.compile(r"^pulumi\s")


def blocks(page: str, lang: str) -> list[str]:
    """The page's `lang` blocks; README's from its own-program section only (the rest of
    it runs gpuplane's bundled project against a live cluster: the quick start)."""
    text = (REPO / page).read_text(encoding="utf-8")
    if page == "README.md":
        text = text[text.index(README_SECTION):]
        text = text[:text.index("\n## ", 1)]
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def commands(block: str) -> list[str]:
    """A shell block's commands: continuations joined, comments dropped."""
    out, pending = [], ""
    for line in block.splitlines():
        line = pending + line
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        words = shlex.split(line, comments=True)
        if words:
            out.append(shlex.join(words))
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`make wheel` (scripts/dist.py, what the target runs) and the wheel pip-installed
    into a site folder of its own, with no index and no dependencies (those come from
    the venv the tests run in: nothing is fetched)."""
    spec = importlib.util.spec_from_file_location("dist", REPO / "scripts" / "dist.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("user")
    out = root / "dist"
    wheel = module.build_wheel(out)
    pack = module.publishable_pack(wheel, out)
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, timeout=300)
    return {"root": root, "wheel": wheel, "pack": pack, "site": site}


def gpuplane(site: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `gpuplane` command of the installed wheel (its console script's entry)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import gpuplane\n"
            "assert gpuplane.__file__.startswith(sys.argv[1]), gpuplane.__file__\n"
            "from gpuplane.cli.main import entry\n"
            "sys.argv = ['gpuplane', *sys.argv[2:]]\n"
            "entry()\n")
    return subprocess.run([sys.executable, "-c", code, str(site), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


STACKS: dict[str, dict[str, Any]] = {
    "ssh": config_of("kubeadm-prod"),
    "pod": as_pod(config_of("kubeadm-prod")),
    "none": config_of("kind-smoke"),
}


def user_project(root: Path, name: str, program: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n")
    (folder / "__main__.py").write_text(program)
    for stack, cfg in STACKS.items():
        cfg = copy.deepcopy(cfg)
        cfg[f"{name}:kubeconfig"] = {"secure": "v1:kubeconfig"}   # the README's own key
        (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": cfg}))
    return folder


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("access", sorted(STACKS))
def test_the_documented_program_plans_on_every_node_access(
        dist: dict[str, Path], page: str, access: str) -> None:
    programs = [b for b in blocks(page, "python") if "GpuCluster(" in b]
    assert programs, f"{page} lost its program"
    for i, program in enumerate(programs):
        folder = user_project(dist["root"] / page.replace("/", "-") / str(i), "infra",
                              program)
        done = gpuplane(dist["site"], ["plan", "--stack", access, "--format", "json"],
                        folder)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert ("gpuplane:index:GpuCluster", "gpu") in {
            (r["type"], r["name"]) for r in report["resources"]}
        if access != "none":   # the node rollout is planned: files and batches
            assert report["batches"] and report["nodes"][0]["files"], report["nodes"][0]


def test_every_shell_line_of_the_pages_runs(dist: dict[str, Path]) -> None:
    """Each `gpuplane …`, `make wheel` and `pip install …` line, in the project (or, for
    `--project ../infra`, beside it); `$(gpuplane …)` inside a `pulumi` line is run too."""
    program = next(b for b in blocks("docs/own-program.md", "python") if "GpuCluster(" in b)
    project = user_project(dist["root"] / "shell", "infra", program)
    (project / "Pulumi.dev.yaml").write_text((project / "Pulumi.pod.yaml").read_text())
    beside = dist["root"] / "shell" / "other"
    beside.mkdir()
    ran, left = [], []
    for page in PAGES:
        for block in blocks(page, "sh"):
            for line in commands(block):
                inner = re.findall(r"\$\((gpuplane [^)]*)\)", line)
                if NEEDS_PULUMI.match(line):
                    left.append(line)
                    line = inner[0] if inner else ""
                if not line:
                    continue
                ran.append(line)
                words = shlex.split(line)
                if words[0] == "gpuplane":
                    cwd = beside if "../infra" in line else project
                    done = gpuplane(dist["site"], words[1:], cwd)
                    assert done.returncode == 0, (line, done.stderr)
                elif words[:2] == ["pip", "install"]:
                    wheel = Path(words[2])
                    assert wheel.name == dist["wheel"].name, (line, "not what make wheel built")
                elif line == "make wheel":
                    assert dist["wheel"].is_file() and dist["pack"].is_dir()
                else:
                    pytest.fail(f"{page}: {line!r}: a command this test does not know")
    assert any(r.startswith("gpuplane plan --stack dev") for r in ran)
    assert "make wheel" in ran and any(r.startswith("pip install") for r in ran)
    assert left, "no pulumi line left out: the list above is stale"


def test_the_published_pack_installs_gpuplane_from_its_wheel(dist: dict[str, Path]) -> None:
    """pip, run in the pack's folder as Pulumi runs it for a downloaded pack, finds
    gpuplane in the wheel there (no index: PyPI has no gpuplane)."""
    pack = dist["pack"]
    requirements = (pack / "requirements.txt").read_text().split()
    assert f"./{dist['wheel'].name}" in requirements
    assert not any(r.startswith("gpuplane==") for r in requirements)
    site = dist["root"] / "pack-site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                           "--no-deps", "--target", str(site),
                           *[r for r in requirements if r.startswith("./")]],
                          cwd=pack, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (site / "gpuplane" / "data" / "policypack" / "__main__.py").is_file()
