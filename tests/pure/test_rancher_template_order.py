"""Issue #39 item 3: the templates RKE2/K3s really read. On containerd 2.x they try
`config-v3.toml.tmpl` first, then `config.toml.tmpl`, rendered as version 2 in place of the
built-in template (`templateGenerations`, k3s-io/k3s pkg/agent/containerd/config.go, read at
commit 06ea261c). So a toolkit-created `config.toml.tmpl` on a 2.x node is read: gpuplane
used to say RKE2's containerd never reads it, and only warned."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.stack_cases import write_stack

from gpuplane.cli.plan.run import plan_stack
from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.layout import rendered_layout
from gpuplane.rules.nodefiles import check_node_files

STACKS = Path(__file__).resolve().parents[2] / "stacks"
V2, V17 = ContainerdVersion.parse("2.0"), ContainerdVersion.parse("1.7")
# What toolkit 1.18+ creates where CONTAINERD_CONFIG names a missing file
# (gpuplane.toolkit.output; held against the real installers there).
TOOLKIT_TEMPLATE = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


@pytest.mark.parametrize("distro", [Distro.RKE2, Distro.K3S])
def test_on_2x_the_v3_template_then_the_v2_one(distro: Distro) -> None:
    prof = profile(distro)
    v2, v3 = prof.template_path, prof.template_v3_path
    assert prof.read_template(V2, {v2, v3}) == v3
    assert prof.read_template(V2, {v2}) == v2
    assert prof.read_template(V2, set()) is None       # the built-in template
    assert prof.read_template(V17, {v3}) is None       # 1.x never reads the v3 name
    assert prof.read_template(V17, {v2, v3}) == v2


def test_a_toolkit_created_v2_template_on_2x_replaces_the_built_in_one() -> None:
    prof = profile(Distro.RKE2)
    node = prof.baseline(V2)
    assert prof.template_path not in node and prof.template_v3_path not in node
    after = rendered_layout({**node, prof.template_path: TOOLKIT_TEMPLATE}, prof, V2)
    assert after[prof.config_path] == TOOLKIT_TEMPLATE   # RKE2's own settings are gone
    beside_v3 = {**node, prof.template_path: TOOLKIT_TEMPLATE,
                 prof.template_v3_path: node[prof.config_path]}
    assert rendered_layout(beside_v3, prof, V2)[prof.config_path] == node[prof.config_path]


def test_fm04_says_the_v2_template_is_read_where_no_v3_one_exists() -> None:
    prof = profile(Distro.RKE2)
    read = check_node_files(prof, [prof.template_path], where="w", version=V2)
    assert [f.severity for f in read] == [Severity.ERROR]
    assert "in place of RKE2's built-in template" in read[0].message, read[0].message
    unread = check_node_files(prof, [prof.template_path], where="w", version=V2,
                              present={prof.template_v3_path})
    assert "never reaches containerd" in unread[0].message


def test_detected_mode_toolkit_on_the_v2_template_is_an_error(tmp_path: Path) -> None:
    cfg = yaml.safe_load((STACKS / "Pulumi.rke2-operator.yaml").read_text())["config"]
    prof = profile(Distro.RKE2)
    cfg["gpuplane:gpuOperator"]["values"] = {"toolkit": {"env": [
        {"name": "CONTAINERD_CONFIG", "value": prof.template_path},
        {"name": "CONTAINERD_SOCKET", "value": prof.socket}]}}
    write_stack(tmp_path, "case", cfg)
    found = [f for f in plan_stack("case", tmp_path)["findings"] if f["id"] == "FM17"]
    assert [f["severity"] for f in found] == ["error"], found
    assert "never reads" not in found[0]["message"]
    assert "as version 2" in found[0]["message"]
    assert found[0]["changes"] == [["gpuplane:gpuOperator.values.toolkit.env", None]]
