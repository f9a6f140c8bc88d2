"""In the plan, every fix names what the user edits: a `gpuplane:` stack key (or the
captured copy a stack key names), never only a node file gpuplane itself writes. The
stack catalogue's broken stacks walk into every rule the plan reports on node files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import BROKEN, broken_config, write_stack

from gpuplane.cli.plan.run import plan_stack


def _plan(folder: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    write_stack(folder, "case", cfg)
    return plan_stack("case", folder)


@pytest.mark.parametrize("case", list(BROKEN))
def test_every_plan_fix_names_a_stack_key(case: str, tmp_path: Path) -> None:
    report = _plan(tmp_path, broken_config(case, tmp_path))
    assert report["findings"]
    for f in report["findings"]:
        if f["severity"] != "info":
            assert "gpuplane:" in f["fix"], f


def test_fm07_fix_leads_with_the_keys_and_applied_plans_clean(tmp_path: Path) -> None:
    """The FM07 fix names `gpuplane:runtime.systemdCgroup` with the value the stack's
    kubelet driver needs, or the other `gpuplane:cluster.kubeletCgroupDriver`; applied as
    it says (false for the stack's cgroupfs kubelet), the plan has no FM07."""
    cfg = broken_config("kubeadm-prod/FM07-cgroupfs-kubelet", tmp_path)
    fm07 = [f for f in _plan(tmp_path / "a", cfg)["findings"] if f["id"] == "FM07"]
    assert fm07
    for f in fm07:
        assert f["fix"].startswith("Set `gpuplane:runtime.systemdCgroup: false` to match "
                                   "the kubelet's cgroupfs cgroup driver"), f
        assert "`gpuplane:cluster.kubeletCgroupDriver: systemd`" in f["fix"]
    cfg.setdefault("gpuplane:runtime", {})["systemdCgroup"] = False
    report = _plan(tmp_path / "b", cfg)
    assert not [f for f in report["findings"] if f["id"] == "FM07"], report["findings"]


def test_catalogue_fixes_name_stack_keys_in_full() -> None:
    """`gpuplane explain`'s fixes name stack keys as the stack file spells them
    (`gpuplane:gpuOperator.cdi`), not a bare `gpuOperator.cdi` a user cannot find."""
    import re

    from gpuplane.config import KEYS
    from gpuplane.rules.catalogue import RULES

    # `devicePlugin` is a plain value in the stack: `devicePlugin.x` is the chart's.
    sections = [k for k in KEYS if k != "devicePlugin"]
    bare = re.compile(r"(?<![:\w.])`(" + "|".join(sections) + r")\.\w+")
    for rule in RULES.values():
        assert not bare.search(rule.fix), (rule.id, rule.fix)


def test_every_lever_names_stack_keys_and_only_where_the_fix_has_none() -> None:
    from gpuplane.core.findings import Finding, Severity
    from gpuplane.core.intent import ClusterIntent
    from gpuplane.rules.stack_levers import _HINTS, planned_fix, stack_lever

    intent = ClusterIntent()
    for rule in _HINTS:
        node = Finding(rule, Severity.ERROR, "m", "/etc/containerd/config.toml:1", "Edit it.")
        lever = stack_lever(node, intent)
        assert lever is not None and "`gpuplane:" in lever, rule
        assert planned_fix(node, intent).fix.endswith("On the node files that does: Edit it.")
        named = Finding(rule, Severity.ERROR, "m", "w", "Set `gpuplane:x`.")
        assert planned_fix(named, intent) == named
        advice = Finding(rule, Severity.INFO, "m", "w", "Edit it.")
        assert planned_fix(advice, intent) == advice


def test_containerd_check_fix_names_the_file_change(tmp_path: Path, capsys) -> None:
    """`containerd check` judges a local file: its FM07 fix is the file's own setting."""
    import json

    from gpuplane.cli.main import main

    config = tmp_path / "config.toml"
    config.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                      '  default_runtime_name = "runc"\n'
                      '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
                      '  runtime_type = "io.containerd.runc.v2"\n'
                      '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
                      '  SystemdCgroup = true\n'
                      '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
                      '  runtime_type = "io.containerd.runc.v2"\n')
    main(["containerd", "check", "--config", str(config), "--containerd-version", "1.7",
          "--format", "json"])
    fm07 = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["id"] == "FM07"]
    assert fm07, "the two runtimes disagree on SystemdCgroup"
    for f in fm07:
        assert f["where"].startswith(str(config)) and "SystemdCgroup" in f["fix"], f
        assert not f["fix"].startswith("Set `gpuplane:"), f
