"""The PR workflow (.github/workflows/gpuplane-preview.yml), its plan job run locally.

A temp "origin" holds this repository's files on `main`; a clone adds a PR commit; the
plan job's `run:` steps run in the clone exactly as written (GitHub-only actions are
stubs, see workflow_runner). `make venv` is stubbed by a `make` on PATH whose
`.venv/bin/gpuplane` runs the checked-out tree's own code (base and PR each their own)
with this venv's interpreter, so no install is needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.workflow_runner import JobResult, run_job

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = Path(".github/workflows/gpuplane-preview.yml")
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
MAKE = """#!/bin/sh
# `make venv` of the workflow: a gpuplane that runs this checkout's components/gpuplane/.
if [ "$1" = venv ]; then
  here=$(pwd)
  mkdir -p .venv/bin .venv/pkgs
  ln -sfn "$here/components/gpuplane" .venv/pkgs/gpuplane
  printf '#!/bin/sh\\nPYTHONPATH="%s/.venv/pkgs" exec "%s" -m gpuplane.cli.main "$@"\\n' \\
    "$here" "{python}" > .venv/bin/gpuplane
  chmod +x .venv/bin/gpuplane
  exit 0
fi
exec /usr/bin/make "$@"
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout


def edit_stack(repo: Path, old: str, new: str, stack: str = "kubeadm-prod") -> None:
    path = repo / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.fixture
def pr(tmp_path: Path) -> Callable[..., JobResult]:
    """`pr(main_edit, pr_edit)`: run the plan job for a PR of `pr_edit` onto `main_edit`."""
    files = git(ROOT, "ls-files", "-co", "--exclude-standard").splitlines()
    origin = tmp_path / "origin"
    for name in files:
        source = ROOT / name
        if source.is_symlink():   # policies/ -> the packaged pack: a link, as git keeps it
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            (origin / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, origin / name)
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "make").write_text(MAKE.replace("{python}", sys.executable))
    (shims / "make").chmod(0o755)

    def run(main_edit: Callable[[Path], None] | None,
            pr_edit: Callable[[Path], None]) -> JobResult:
        if main_edit:
            main_edit(origin)
        git(origin, "init", "-q", "-b", "main")
        git(origin, "add", "-A")
        git(origin, "commit", "-qm", "main")
        work = tmp_path / "ws" / "repo"
        git(tmp_path, "clone", "-q", str(origin), str(work))
        git(work, "checkout", "-qb", "pr")
        pr_edit(work)
        git(work, "commit", "-qam", "the PR")
        return run_job(work / WORKFLOW, "plan", work, path_prefix=[shims],
                       github={"base_ref": "main", "head_ref": "pr",
                               "event_name": "pull_request"})

    return run


def test_pr_comment_shows_the_rollout_change(pr: Callable[..., JobResult]) -> None:
    job = pr(None, lambda repo: edit_stack(repo, "maxUnavailable: 2", "maxUnavailable: 1"))
    assert not job.failed, job.log
    comment = (job.outbox / "comment-gpuplane-plan-kubeadm-prod.md").read_text()
    assert comment.startswith("### ✅ gpuplane plan `kubeadm-prod`: OK")
    assert "- setting `gpuplane:rollout.maxUnavailable`: `2` → `1`" in comment
    assert "- rollout: 3 → 5 batches" in comment
    plan = json.loads((job.outbox / "artifact-gpuplane-plan").read_text())
    assert plan["diff"]["rollout"]["changed"] and not plan["diff"]["empty"]
    assert "gpuplane plan of kubeadm-prod: OK" in job.step("Policy verdict").stdout


def test_rejected_pr_fails_the_check_with_the_verdict(pr: Callable[..., JobResult]) -> None:
    job = pr(None, lambda repo: edit_stack(repo, "systemdCgroup: true",
                                           "systemdCgroup: false"))
    verdict = job.step("Policy verdict")
    assert job.failed and verdict.code == 1
    assert "::error title=gpuplane plan of kubeadm-prod: REJECTED::" in verdict.stdout
    # Every step before the verdict succeeded: the comment was posted.
    assert all(s.code == 0 for s in job.steps if s.name != "Policy verdict"), job.log
    comment = (job.outbox / "comment-gpuplane-plan-kubeadm-prod.md").read_text()
    assert "REJECTED" in comment.splitlines()[0]
    assert "- set `gpuplane:runtime.systemdCgroup`: `true` → `false`" in comment


def test_failing_base_plan_is_reported_as_such(pr: Callable[..., JobResult]) -> None:
    job = pr(lambda repo: edit_stack(repo, "distro: kubeadm", "distro: kubeadmm"),
             lambda repo: edit_stack(repo, "distro: kubeadmm", "distro: kubeadm"))
    base = job.step("Plan of the base branch")
    assert base.code == 0 and base.outputs == {"ok": "false"}
    assert "::warning title=gpuplane: plan of main failed (exit 2)::" in base.stdout
    comment = (job.outbox / "comment-gpuplane-plan-kubeadm-prod.md").read_text()
    assert comment.startswith("> [!WARNING]\n> The plan of the base branch `main` failed "
                              "(exit 2)")
    assert "gpuplane:cluster.distro" in comment     # the base's own error, quoted
    assert "### ✅ gpuplane plan `kubeadm-prod`: OK" in comment
    assert not job.failed, job.log      # the PR itself is fine: its verdict is the status


def test_plan_scale_help_does_not_crash() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/plan_scale.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "SIZE" in done.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks/plan_scale.py"), "ten"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
