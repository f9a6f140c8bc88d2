"""NRI plugin mode on the distributions that render or generate containerd's config
themselves: the plan switches NRI on the way each one's own mechanism wants it (RKE2/K3s:
the template after `{{ template "base" . }}`; MicroK8s: `containerd-template.toml`; k0s: a
drop-in in /etc/k0s/containerd.d), FM27 then sees NRI on in the config the distribution
renders, and the agent restarts that distribution's service. The same layouts are held
against real containerd `config dump` in tests/real/test_nri_distros_dump.py."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import write_stack

from gpuplane.agent.script import agent_plan
from gpuplane.cli.plan.run import plan_stack
from gpuplane.containerd.nri import NRI_PLUGIN, nri_state
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import NodeContainerdPlan, plan_node
from gpuplane.toolkit.options import PlanOptions

OPTIONS = PlanOptions(cdi=True, nri=True, operator_chart="v26.3.0", toolkit_version="1.19.0")
V17, V21 = ContainerdVersion.parse("1.7"), ContainerdVersion.parse("2.1")
RANCHER = (Distro.RKE2, Distro.K3S)


def _errors(plan: NodeContainerdPlan) -> set[str]:
    return {f.id for f in plan.findings if f.severity.value == "error"}


def _nri_on(plan: NodeContainerdPlan) -> bool:
    eff = plan.effective
    return nri_state(eff.plugins, eff.containerd_version, eff.disabled_plugins).enabled


@pytest.mark.parametrize("runtime_setup", ["template", "detected"])
@pytest.mark.parametrize("name", RANCHER)
def test_fm27_rancher_plan_enables_nri_after_the_base_template(name: Distro,
                                                               runtime_setup: str) -> None:
    """RKE2/K3s on 1.7 (NRI off: their built-in template renders no NRI table, so 1.7's
    default holds): the plan writes config.toml.tmpl as the base plus the NRI table, FM27
    finds NRI on in what they render, and the agent restarts their role's unit. On 2.x
    NRI is on already and nothing is written; without node access FM27 stays."""
    prof = profile(name)
    options = replace(OPTIONS, runtime_setup=runtime_setup)
    plan = plan_node(prof, V17, options)
    assert not _errors(plan), plan.findings
    assert list(plan.files) == [prof.template_path]
    template = plan.files[prof.template_path]
    assert rancher_render.extends_base(template)
    assert template.startswith(rancher_render.BASE)
    rendered = tomllib.loads(plan.layout[prof.config_path])
    assert rendered["plugins"][NRI_PLUGIN] == {"disable": False}
    # Everything the distribution rendered before is still rendered.
    before = tomllib.loads(prof.baseline(V17)[prof.config_path])
    assert {k: v for k, v in rendered["plugins"].items() if k != NRI_PLUGIN} \
        == before["plugins"]
    assert _nri_on(plan) and plan.restarts
    units = {Distro.RKE2: ("rke2-agent", "rke2-server"), Distro.K3S: ("k3s-agent", "k3s")}
    agent = agent_plan(plan)
    assert agent.restart_units == units[name] and prof.template_path in agent.edit_paths
    assert plan_node(prof, V21, options).files == {}
    blind = plan_node(prof, V17, replace(options, writes_files=False))
    assert "FM27" in _errors(blind) and blind.files == {}


@pytest.mark.parametrize("name", RANCHER)
def test_fm27_rancher_template_of_the_nodes_own_with_nri_off(name: Distro) -> None:
    """A node's own config-v3.toml.tmpl that extends the base and turns NRI off (2.x):
    appending the table again would define it twice, which containerd refuses, so the
    plan sets `disable = false` in the template's own table and keeps the rest."""
    prof = profile(name)
    assert prof.template_v3_path
    own = (f'{rancher_render.BASE}\n\n# mine\n[plugins."{NRI_PLUGIN}"]\n  disable = true\n'
           '  plugin_config_path = "/etc/nri/mine.d"\n')
    base = prof.baseline(V21)
    current = {**base, prof.template_v3_path: own,
               prof.config_path: base[prof.config_path].rstrip("\n") + "\n" +
               own.split(rancher_render.BASE, 1)[1]}
    blind = plan_node(prof, V21, replace(OPTIONS, writes_files=False), current=current)
    assert "FM27" in _errors(blind)
    plan = plan_node(prof, V21, OPTIONS, current=current)
    assert not _errors(plan), plan.findings
    written = plan.files[prof.template_v3_path]
    assert written.count(NRI_PLUGIN) == 1 and "# mine" in written
    table = tomllib.loads(plan.layout[prof.config_path])["plugins"][NRI_PLUGIN]
    assert table == {"disable": False, "plugin_config_path": "/etc/nri/mine.d"}


def test_fm27_rancher_whole_template_of_the_nodes_own() -> None:
    """A node's own whole config.toml.tmpl (no base action) that turns NRI off on 1.7:
    `disable = false` is set in its NRI table, nothing else of it changes."""
    prof = profile(Distro.K3S)
    assert prof.template_path
    base = prof.baseline(V17)
    own = base[prof.config_path] + f'\n[plugins."{NRI_PLUGIN}"]\n  disable = true\n'
    plan = plan_node(prof, V17, OPTIONS, current={**base, prof.template_path: own,
                                                  prof.config_path: own})
    assert not _errors(plan), plan.findings
    written = plan.files[prof.template_path]
    assert not rancher_render.extends_base(written)
    assert tomllib.loads(written) == {**tomllib.loads(own), "plugins": {
        **tomllib.loads(own)["plugins"], NRI_PLUGIN: {"disable": False}}}


def test_fm27_microk8s_template_gets_nri_on() -> None:
    """MicroK8s renders containerd.toml from containerd-template.toml (its placeholders
    kept): the plan sets NRI on in the template, the rendered config has it, and the agent
    runs MicroK8s's restart."""
    prof = profile(Distro.MICROK8S)
    assert prof.template_path
    plan = plan_node(prof, V17, OPTIONS)
    assert not _errors(plan), plan.findings
    assert list(plan.files) == [prof.template_path]
    template = plan.files[prof.template_path]
    assert "${SNAPSHOTTER}" in template and "${RUNTIME_TYPE}" in template
    assert tomllib.loads(template)["plugins"][NRI_PLUGIN] == {"disable": False}
    assert _nri_on(plan) and plan.restarts
    assert agent_plan(plan).restart_command == prof.restart_command
    # 2.x (MicroK8s v1.35+ bundles 2.1/2.2): on already, nothing written; a template that
    # turns it off is switched back on in place.
    assert plan_node(prof, V21, OPTIONS).files == {}
    base = prof.baseline(V21)
    off = base[prof.template_path] + f'\n[plugins."{NRI_PLUGIN}"]\n  disable = true\n'
    plan = plan_node(prof, V21, OPTIONS, current={**base, prof.template_path: off})
    assert not _errors(plan), plan.findings
    assert tomllib.loads(plan.files[prof.template_path])["plugins"][NRI_PLUGIN] \
        == {"disable": False}


def test_fm27_k0s_dropin_imported_by_the_generated_config() -> None:
    """k0s (1.27-1.35: containerd 1.7, NRI off) imports a drop-in without a CRI table as it
    is: the plan writes the NRI drop-in there, the top-level file k0s generates imports
    it, NRI is on, and the agent restarts k0sworker or k0scontroller. The node's own NRI
    settings in an earlier drop-in survive 1.x's whole-table replacement."""
    prof = profile(Distro.K0S)
    own = "/etc/k0s/containerd.d/10-nri.toml"
    current = {**prof.baseline(V17),
               own: f'[plugins."{NRI_PLUGIN}"]\n  plugin_config_path = "/etc/nri/own.d"\n'}
    blind = plan_node(prof, V17, replace(OPTIONS, writes_files=False), current=current)
    assert "FM27" in _errors(blind)
    plan = plan_node(prof, V17, OPTIONS, current=current)
    assert not _errors(plan), plan.findings
    dropin = "/etc/k0s/containerd.d/40-gpuplane-nri.toml"
    assert list(plan.files) == [dropin]
    assert dropin in tomllib.loads(plan.layout[prof.config_path])["imports"]
    assert plan.effective.plugins[NRI_PLUGIN]["plugin_config_path"] == "/etc/nri/own.d"
    assert _nri_on(plan) and plan.restarts
    agent = agent_plan(plan)
    assert agent.restart_units == ("k0sworker", "k0scontroller") and agent.rendered


def test_fm27_offline_plan_of_a_k0s_stack_with_nri(tmp_path: Path) -> None:
    """`gpuplane plan` on k0s v1.35 (containerd 1.7.30, NRI off) with gpuOperator.nri: the
    node's files show the NRI drop-in and a restart, and the plan is clean; without node
    access it is FM27."""
    def run(access: str) -> dict[str, Any]:
        write_stack(tmp_path, "nri", {
            "gpuplane:cluster": {"distro": "k0s", "kubernetesVersion": "1.35.1",
                                 "containerdVersion": "1.7.30", "nodeAccess": access},
            "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04",
                                "pool": "gpu"}],
            "gpuplane:gpuOperator": {"chartVersion": "v26.3.0", "nri": True}})
        return plan_stack("nri", tmp_path)

    report = run("pod")
    assert report["verdict"] == "ok", report["findings"]
    [node] = report["nodes"]
    assert "/etc/k0s/containerd.d/40-gpuplane-nri.toml" in node["files"] and node["restart"]
    assert "FM27" in {f["id"] for f in run("none")["findings"]}


@pytest.mark.parametrize("imports_dropins", [False, True])
def test_fm27_rancher_base_that_renders_the_nri_table(imports_dropins: bool) -> None:
    """A K3s release whose built-in template itself renders the NRI table off (seen in the
    node's captured config): the table cannot follow the base a second time. Where the
    rendered config imports K3s's drop-in dir (k3s-io/k3s PR #13680) the NRI drop-in goes
    there; else the whole rendered config becomes the template, FM04 saying so for NRI."""
    prof = profile(Distro.K3S)
    assert prof.template_path
    base = prof.baseline(V17)
    top = prof.config_path
    dropins = rancher_render.dropin_dir(prof.template_path, 2)
    head = f'imports = ["{dropins}/*.toml"]\n' if imports_dropins else ""
    rendered = (head + base[top] + f'\n[plugins."{NRI_PLUGIN}"]\n  disable = true\n'
                '  plugin_config_path = "/etc/nri/k3s.d"\n')
    plan = plan_node(prof, V17, OPTIONS, current={**base, top: rendered})
    assert not _errors(plan), plan.findings
    assert _nri_on(plan)
    assert plan.effective.plugins[NRI_PLUGIN]["plugin_config_path"] == "/etc/nri/k3s.d"
    fm04 = [f for f in plan.findings if f.id == "FM04"]
    if imports_dropins:
        assert list(plan.files) == [f"{dropins}/40-gpuplane-nri.toml"] and not fm04
    else:
        assert list(plan.files) == [prof.template_path]
        assert not rancher_render.extends_base(plan.files[prof.template_path])
        [finding] = fm04
        assert "NRI" in finding.message and "gpuplane:gpuOperator.nri" in finding.where
