"""FM06: a rollout that can take down every GPU node at once is an error unless the stack
opts in with `rollout.allowAllAtOnce` (and then the plan still shows it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuplane.cli.main import main
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.rollout import RolloutStep, check_rollout

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def _steps(batches: list[list[str]]) -> list[RolloutStep]:
    out, before = [], frozenset()
    for i, nodes in enumerate(batches):
        out += [RolloutStep(n, i, before, True, True, False) for n in nodes]
        before = frozenset(nodes)
    return out


def _all_at_once(findings: list) -> list:
    return [f for f in findings if "at once" in f.message and "GPU node" in f.message]


def test_one_batch_with_every_node_is_an_error() -> None:
    intent = ClusterIntent(max_unavailable=3, canary=False)
    [f] = _all_at_once(check_rollout(_steps([["a", "b", "c"]]), intent, where="rollout"))
    assert f.id == "FM06" and f.severity is Severity.ERROR
    assert "gpuplane:rollout.allowAllAtOnce: true" in f.fix


def test_opt_in_turns_it_into_a_warning_naming_the_key() -> None:
    intent = ClusterIntent(max_unavailable=3, canary=False, allow_all_at_once=True)
    [f] = _all_at_once(check_rollout(_steps([["a", "b", "c"]]), intent, where="rollout"))
    assert f.severity is Severity.WARNING and "allowAllAtOnce" in f.message


@pytest.mark.parametrize("batches", [[["a"], ["b", "c"]], [["a"]], [["a", "b"], ["c"]]])
def test_canary_or_smaller_batches_or_one_node_pass(batches: list[list[str]]) -> None:
    intent = ClusterIntent(max_unavailable=2, canary=False)
    assert not _all_at_once(check_rollout(_steps(batches), intent, where="rollout"))


def _plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, rollout: str) -> tuple[int, dict]:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    path = stacks / "Pulumi.kubeadm-prod.yaml"
    path.write_text(path.read_text().replace(
        "    canary: true\n    maxUnavailable: 2\n", rollout))
    code = main(["plan", "--stack", "kubeadm-prod", "--stacks-dir", str(stacks),
                 "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_plan_refuses_all_nodes_at_once(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    code, plan = _plan(capsys, tmp_path, "    canary: false\n    maxUnavailable: 5\n")
    assert code == 1
    assert [f["id"] for f in plan["findings"] if f["severity"] == "error"] == ["FM06"]


def test_plan_with_opt_in_passes_and_shows_it(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    code, plan = _plan(capsys, tmp_path, "    canary: false\n    maxUnavailable: 5\n"
                                         "    allowAllAtOnce: true\n")
    assert code == 0
    [f] = plan["findings"]
    assert f["id"] == "FM06" and f["severity"] == "warning" and "allowAllAtOnce" in f["message"]


def test_explain_reaches_the_topic(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "FM06-all-at-once"]) == 0
    text = capsys.readouterr().out
    assert "Upstream:" in text and "allowAllAtOnce" in text
    assert main(["explain", "FM06"]) == 0 and "FM06-all-at-once" in capsys.readouterr().out


def test_every_topic_has_a_doc_an_upstream_source_and_a_rule() -> None:
    from gpuplane.rules import RULES, explain
    from gpuplane.rules.topics import TOPICS

    assert len(TOPICS) >= 5
    for topic_id, topic in TOPICS.items():
        assert topic_id.split("-", 1)[0] in RULES
        assert all((topic.why, topic.example, topic.fix)) and "@" in topic.upstream
        assert explain(topic_id).startswith(f"{topic_id}: ")
        assert topic_id in explain(topic_id.split("-", 1)[0])
