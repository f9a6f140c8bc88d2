"""NRI plugin mode on RKE2, K3s, MicroK8s and k0s, held against real containerd: the
config each distribution renders (or k0s generates) from the files gpuplane plans has NRI
on in `config dump` of the containerd line it bundles, and containerd starts on it; the
same node without gpuplane's files dumps NRI off.

Where the rendering itself comes from: K3s's renderer (which RKE2 runs) cannot be built
here (the Go module proxy refuses `github.com/k3s-io/k3s`; data/baselines/README.md), so
the config it renders is gpuplane's model of it (gpuplane.distros.rancher_render: the
built-in template's output in place of `{{ template "base" . }}`, the template's own
text after it). The built-in output is the repo's baseline, written from the facts of
k3s-io/k3s `pkg/agent/templates/templates_linux.go`@06be48b6 (no NRI table in the
version-2 template); the templates with NRI off are this test's own. MicroK8s's launcher
is modelled by its text substitutions and k0s's generator by gpuplane.distros.k0s_render
(k0sproject/k0s `pkg/component/worker/containerd/configurer.go`@v1.35.1+k0s.0: a
drop-in without a CRI table is imported as it is).

The lines: RKE2/K3s bundle 1.7 before v1.31.6/v1.32.2 and 2.x after; MicroK8s v1.33/v1.34
bundle 1.7.27/1.7.28 and v1.35/v1.36 2.1.3/2.2.3
(`build-scripts/components/containerd/version.sh` at each tag); k0s v1.27-v1.35 bundle
1.7 (1.7.30 from v1.35.1+k0s.0, `embedded-bins/Makefile.variables`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.containerd.nri import NRI_PLUGIN, nri_state
from gpuplane.core.findings import Severity
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import Distro, DistroProfile, profile
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.node import PlanOptions, plan_node

OPTIONS = PlanOptions(cdi=True, nri=True, operator_chart="v26.3.0", toolkit_version="1.19.0")
_OFF = f'\n[plugins."{NRI_PLUGIN}"]\n  disable = true\n  plugin_config_path = "/etc/nri/own.d"\n'


def _node(prof: DistroProfile, version: ContainerdVersion) -> dict[str, str]:
    """The node as found: the distribution's fresh files on 1.7 (NRI off by default); on
    2.x (NRI on by default) a template of the node's own that turns it off."""
    files = prof.baseline(version)
    if version.major < 2:
        return files
    target = prof.edit_path(version)
    own = (rancher_render.BASE + "\n") if prof.detects_nvidia_runtime else files[target]
    return {**files, target: own + _OFF}


def _dumped_nri(line: str, layout: dict[str, str], top: str, root: Path) -> dict[str, Any]:
    write_layout(layout, root)
    real = oracle.dump(line, host_path(root, top))
    assert real.ok, real.error
    table = real.config["plugins"][NRI_PLUGIN]
    assert isinstance(table, dict)
    return table


@pytest.mark.real
@pytest.mark.parametrize(("name", "line"), [
    (Distro.RKE2, "1.7"), (Distro.K3S, "1.7"), (Distro.RKE2, "2.1"), (Distro.K3S, "2.2"),
    (Distro.MICROK8S, "1.7"), (Distro.MICROK8S, "2.2"), (Distro.K0S, "1.7"),
])
def test_fm27_nri_on_in_what_the_distribution_renders(name: Distro, line: str,
                                                      tmp_short: Path) -> None:
    oracle.require_line(line)
    prof = profile(name)
    version = ContainerdVersion.parse(line)
    current = _node(prof, version)
    top = prof.config_path
    before = _dumped_nri(line, rendered_layout(current, prof, version), top,
                         tmp_short / "before")
    assert before["disable"] is True
    plan = plan_node(prof, version, OPTIONS, current=current)
    assert plan.files, "gpuplane must write the file that turns NRI on"
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    # plan.layout is what the distribution renders from the node's files and gpuplane's.
    after = _dumped_nri(line, plan.layout, top, tmp_short / "after")
    assert after["disable"] is False
    if version.major >= 2:   # the node's own NRI setting beside `disable` is kept
        assert after["plugin_config_path"] == "/etc/nri/own.d"
    assert nri_state(plan.effective.plugins, version, plan.effective.disabled_plugins).enabled
    with oracle.Daemon(line, host_path(tmp_short / "after", top), tmp_short / "d") as daemon:
        daemon.require_started()


@pytest.mark.real
@pytest.mark.parametrize("imports_dropins", [False, True])
def test_fm27_rancher_base_rendering_the_nri_table_against_config_dump(
        imports_dropins: bool, tmp_short: Path) -> None:
    """A K3s whose built-in template renders the NRI table off (this test's own captured
    config; the release's template was not read): gpuplane's drop-in in K3s's drop-in dir
    (1.7 replaces the imported NRI table whole, so it carries the rendered one's settings),
    or the whole rendered config as the template; real 1.7 dumps NRI on either way."""
    line = "1.7"
    oracle.require_line(line)
    prof = profile(Distro.K3S)
    assert prof.template_path
    version = ContainerdVersion.parse(line)
    base = prof.baseline(version)
    top = prof.config_path
    dropins = rancher_render.dropin_dir(prof.template_path, 2)
    head = f'imports = ["{dropins}/*.toml"]\n' if imports_dropins else ""
    rendered = head + base[top] + _OFF.replace("own.d", "k3s.d")
    current = {**base, top: rendered}
    assert _dumped_nri(line, current, top, tmp_short / "before")["disable"] is True
    plan = plan_node(prof, version, OPTIONS, current=current)
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    assert list(plan.files) == ([f"{dropins}/40-gpuplane-nri.toml"] if imports_dropins
                                else [prof.template_path])
    after = _dumped_nri(line, plan.layout, top, tmp_short / "after")
    assert after["disable"] is False and after["plugin_config_path"] == "/etc/nri/k3s.d"
    with oracle.Daemon(line, host_path(tmp_short / "after", top), tmp_short / "d") as daemon:
        daemon.require_started()
