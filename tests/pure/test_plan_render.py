"""The plan's views: rejected plans read as rejected, the PR comment carries the point
and fits GitHub's limit, text is plain when piped and fits the terminal when not."""

from __future__ import annotations

import io
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from gpuplane.cli.main import main
from gpuplane.cli.plan.diff import plan_diff
from gpuplane.cli.plan.render import GITHUB_COMMENT_LIMIT, render_markdown, render_text
from gpuplane.cli.plan.run import plan_stack

STACKS = Path(__file__).resolve().parents[2] / "stacks"


@cache
def bundled(stack: str) -> dict[str, Any]:
    return plan_stack(stack, STACKS)


def changed(stack: str, tmp: Path, section: str, key: str, value: Any) -> dict[str, Any]:
    """The plan of `stack` with one setting changed, its diff against the bundled plan."""
    doc = yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())
    doc["config"][section][key] = value
    (tmp / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    plan = plan_stack(stack, tmp)
    plan["diff"] = plan_diff(bundled(stack), plan)
    return plan


def fences_balanced(markdown: str) -> bool:
    opened: str | None = None
    for line in markdown.splitlines():
        fence = re.match(r"^(`{3,})", line)
        if fence and opened is None:
            opened = fence.group(1)
        elif fence and line.strip() == opened:
            opened = None
    return opened is None


def test_rejected_plan_reads_as_rejected_not_as_removals(tmp_path: Path) -> None:
    plan = changed("kubeadm-prod", tmp_path, "gpuplane:runtime", "systemdCgroup", False)
    md = render_markdown(plan)
    head = md.splitlines()[0]
    assert "REJECTED" in head and "❌" in head
    assert "#### Rejected: this change is blocked" in md
    # What it tried, why it is blocked, the fix.
    assert "- set `gpuplane:runtime.systemdCgroup`: `true` → `false`" in md
    assert "**FM07**" in md and "**fix:** Set `gpuplane:runtime.systemdCgroup: true`" in md
    assert "On the node files that does: Set SystemdCgroup = true" in md
    assert "would change (rejected)" in md and "+        SystemdCgroup = false" in md
    assert "removed" not in md.replace("not removed", "")
    assert "deleted" not in md and "+0,0" not in md
    out = io.StringIO()
    render_text(plan, Console(file=out))
    text = out.getvalue()
    assert "verdict: REJECTED" in text and "REJECTED: this change is blocked" in text
    assert "\n  removed:" not in text and "+0,0" not in text


def test_markdown_has_helm_values_and_toolkit_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "k8s-snap-dgx", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### ✅ gpuplane plan `k8s-snap-dgx`: OK")
    assert "<summary>Helm values <code>gpu-operator</code>" in md
    assert "<summary>Toolkit env <code>gpu-operator</code>" in md
    # The fix of field incident 1: the toolkit names k8s-snap's own containerd.
    assert ("CONTAINERD_CONFIG=/var/lib/k8s-containerd/k8s-containerd/etc/containerd/"
            "config.toml") in md
    assert "#### Rollout" in md and fences_balanced(md)


def test_markdown_diff_of_a_sharing_change(tmp_path: Path) -> None:
    plan = changed("k8s-snap-dgx", tmp_path, "gpuplane:timeSlicing", "replicas", 8)
    md = render_markdown(plan)
    assert "- setting `gpuplane:timeSlicing.replicas`: `4` → `8`" in md
    assert "- resources: 6 changed" in md
    assert "pods restart: `app=nvidia-device-plugin-daemonset`" in md
    assert "<summary><code>kubernetes:core/v1:ConfigMap::gpu-time-slicing</code>" in md
    assert "+            replicas: 8" in md and fences_balanced(md)


def test_markdown_rollout_change(tmp_path: Path) -> None:
    plan = changed("kubeadm-prod", tmp_path, "gpuplane:rollout", "maxUnavailable", 1)
    md = render_markdown(plan)
    assert ("- rollout: 3 → 5 batches: a100-01 | a100-02 | a100-03 | l40s-01 | l40s-02"
            in md)


@pytest.mark.parametrize("limit", [2500, 4000, 6000])
def test_markdown_is_cut_to_the_limit_with_a_note(tmp_path: Path, limit: int) -> None:
    plan = changed("k8s-snap-dgx", tmp_path, "gpuplane:timeSlicing", "replicas", 8)
    full = render_markdown(plan)
    assert len(full) > limit    # the case is real
    md = render_markdown(plan, limit=limit)
    assert len(md) <= limit and fences_balanced(md)
    assert f"**Truncated** to {limit:,} characters" in md
    assert "`gpuplane-plan` artifact" in md
    assert md.startswith(full.split("\n\n")[0])    # the verdict always stays


def test_large_fleet_comment_fits_github(tmp_path: Path) -> None:
    doc = yaml.safe_load((STACKS / "Pulumi.kubeadm-prod.yaml").read_text())
    config = doc["config"]
    config["gpuplane:nodes"] = [{"name": f"gpu-{i:04d}", "host": f"10.0.{i // 200}.{i % 200 + 1}",
                                 "gpus": 8, "pool": f"p{i % 3}"} for i in range(2000)]
    (tmp_path / "Pulumi.kubeadm-prod.yaml").write_text(yaml.safe_dump(doc))
    base = plan_stack("kubeadm-prod", tmp_path)
    config["gpuplane:runtime"]["nvidiaDefault"] = True
    config["gpuplane:ssh"]["port"] = 2222     # every node's command changes too
    (tmp_path / "Pulumi.kubeadm-prod.yaml").write_text(yaml.safe_dump(doc))
    plan = plan_stack("kubeadm-prod", tmp_path)
    plan["diff"] = plan_diff(base, plan)
    # 2000 nodes' names in every list made it longer than GitHub takes; cut to their
    # first entries and a count, the whole comment fits.
    md = render_markdown(plan)
    assert len(md) <= GITHUB_COMMENT_LIMIT and fences_balanced(md)
    assert "gpuplane:runtime.nvidiaDefault" in md and "**Truncated**" not in md
    assert "on 2000 nodes: gpu-0000, gpu-0001" in md and "… and 1980 more" in md


def test_piped_text_is_not_padded_wrapped_or_cut(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "k8s-snap-dgx"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "\x1b[" not in out and "…" not in out
    # Trailing blanks only where the content has them (none in this plan's files).
    assert [line for line in lines if line != line.rstrip()] == []
    assert lines[0].startswith("gpuplane plan k8s-snap-dgx: ") and lines[0].endswith(
        "0 warnings")   # the headline is one line
    assert any(line.startswith("pulumi-python:dynamic/gpuplane:GpuAllocatableCheck  ")
               for line in lines)


def test_terminal_text_fits_the_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=90, color_system=None)
    render_text(bundled("k8s-snap-dgx"), console)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 90
    assert "…" not in out.getvalue()    # cells fold instead of being cut
    assert "GpuAllocatableCheck" in out.getvalue().replace("\n", "").replace(" ", "")


def test_containerd_check_uses_the_same_table_style(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    config = tmp_path / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                      '  default_runtime_name = "runc"\n')
    main(["containerd", "check", "--config", "/etc/containerd/config.toml", "--root",
          str(tmp_path), "--containerd-version", "1.7"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    head = lines.index("Merge order")
    assert re.fullmatch(r"#  file +version +imported by", lines[head + 1])
    assert re.fullmatch(r"-  -+  -+  -+", lines[head + 2])


def test_doctor_uses_the_same_table_style(capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "doctor" / "incident-3"
    main(["doctor", "--from", str(data)])
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    head = lines.index("Inspected nodes")
    assert re.fullmatch(r"node +containerd +daemons +kubelet's containerd +default runtime"
                        r" +runtimes", lines[head + 1])
    assert re.fullmatch(r"-+(  -+){5}", lines[head + 2])


def test_rejected_plan_without_base_shows_what_it_holds_back(tmp_path: Path) -> None:
    plan = changed("kubeadm-prod", tmp_path, "gpuplane:runtime", "systemdCgroup", False)
    del plan["diff"]
    md = render_markdown(plan)
    assert "- write `/etc/containerd/config.toml` on 5 nodes in 3 batches" in md
    assert "- batch 0 [canary]: a100-01 (withheld: the plan is rejected)" in md
    assert ("<summary><code>/etc/containerd/config.toml</code> on 5 nodes: a100-01, "
            "a100-02, a100-03, l40s-01, l40s-02 (withheld: the plan is rejected)") in md


def test_a_fleet_wide_restart_keeps_its_summary_in_the_comment(tmp_path: Path) -> None:
    """2000 nodes whose containerd all restart: the comment still says which nodes restart,
    in which order and why, lists the rollout and the findings; long lists are cut to
    their first entries and a count (before: the summary itself was cut after the
    setting, with no restarts, rollout or findings)."""
    from support.stack_cases import as_pod, config_of

    config = as_pod(config_of("hami-host"))
    config["gpuplane:nodes"] = [{"name": f"gpu-{i:04d}", "host": f"10.0.{i // 200}.{i % 200}",
                                 "gpus": 8} for i in range(2000)]
    config["gpuplane:rollout"] = {"canary": True, "maxUnavailable": 10}
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": config}))
    base = plan_stack("fleet", tmp_path)
    config["gpuplane:runtime"] = {"nvidiaDefault": True}
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": config}))
    plan = plan_stack("fleet", tmp_path)
    plan["diff"] = plan_diff(base, plan)
    assert len(plan["diff"]["disrupted"]) == 2000   # the case is real
    md = render_markdown(plan)
    assert len(md) <= GITHUB_COMMENT_LIMIT and fences_balanced(md)
    assert "the rest of the summary" not in md
    assert "containerd restarts on 2000 nodes, in order; containerd's effective config " \
        "changes" in md and ": `gpu-0000` (batch 0), `gpu-0001` (batch 1)" in md
    assert "and 1980 more" in md
    assert "No policy findings." in md and "#### Rollout" in md
    assert "batch 0 [canary]: gpu-0000" in md and "more batches" in md
