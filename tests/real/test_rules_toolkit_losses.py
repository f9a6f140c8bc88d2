"""FM05: what the toolkit's CRI copy erases, for drop-ins captured from the nodes
(`baselineFiles`). On containerd < 2.0 the toolkit's drop-in (toolkit 1.18, chart v25.10)
is the top-level config's whole CRI table plus nvidia, merged last: registry mirrors and
runc options another drop-in put in that table vanish. 2.x deep-merges and keeps them.
Each claim is held against the real toolkit installer and real containerd dumps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

PROFILE = profile(Distro.KUBEADM)
TOP = PROFILE.config_path
SITE = f"{PROFILE.dropin_dir}/10-site.toml"
CRI = "io.containerd.grpc.v1.cri"
MIRROR = "https://mirror.site.internal"
RUNC = "/usr/local/sbin/runc-site"
# A site drop-in as platform teams write it for containerd 1.x: the whole CRI table (a
# partial one would replace the top-level's, FM02), plus a pull mirror and a runc binary.
SITE_TEXT = f"""version = 2
[plugins."{CRI}"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."{CRI}".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."{CRI}".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."{CRI}".containerd.runtimes.runc.options]
        SystemdCgroup = true
        BinaryName = "{RUNC}"
  [plugins."{CRI}".registry.mirrors."docker.io"]
    endpoint = ["{MIRROR}"]
"""


def _captured() -> dict[str, str]:
    top = PROFILE.baseline(ContainerdVersion.parse("1.7"))[TOP].replace(  # same on every line
        "version = 2\n", 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n', 1)
    # The site keeps its registry in the drop-in (mirrors and config_path exclude each other).
    top = top.replace(f'  [plugins."{CRI}".registry]\n'
                      '    config_path = "/etc/containerd/certs.d"\n', "")
    return {TOP: top, SITE: SITE_TEXT}


def _plan(line: str):
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version="1.18.1",
                          kubelet_cgroup_driver="systemd")
    return plan_node(PROFILE, ContainerdVersion.parse(line), options, current=_captured())


def _real_dumps(line: str, tmp_path: Path) -> tuple[dict, dict]:
    """containerd's own merged config before and after the real toolkit 1.18.1 ran."""
    plan = _plan(line)
    node, real = toolkit_oracle.run_on_plan(plan, "1.18.1", tmp_path)
    oracle.require_line(line)
    out = []
    for name, layout in (("before", node), ("after", {**node, **real.written})):
        write_layout(layout, tmp_path / name)
        dumped = oracle.dump(line, host_path(tmp_path / name, TOP))
        assert dumped.ok, dumped.error
        out.append(dumped.config)
    return out[0], out[1]


def _site_settings(config: dict, line: str) -> tuple[object, object]:
    plugins = config["plugins"]
    if line.startswith("1."):
        cri = plugins[CRI]
        runc, registry = cri["containerd"]["runtimes"]["runc"], cri["registry"]
    else:
        runc = plugins["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]
        registry = plugins["io.containerd.cri.v1.images"]["registry"]
    mirrors = (registry.get("mirrors") or {}).get("docker.io", {}).get("endpoint")
    return mirrors, runc.get("options", {}).get("BinaryName")


@pytest.mark.real
@pytest.mark.parametrize("line", ["1.6", "1.7"])
def test_toolkit_copy_erases_a_captured_drop_ins_mirrors_and_runc_options(
        line: str, tmp_path: Path) -> None:
    fm05 = [f for f in _plan(line).findings if f.id == "FM05"]
    assert fm05 and fm05[0].severity == "error"
    assert 'registry.mirrors.docker.io.endpoint' in fm05[0].message
    assert "runtimes.runc.options.BinaryName" in fm05[0].message
    assert f"set by {SITE}" in fm05[0].message and f"move them from {SITE}" in fm05[0].fix
    before, after = _real_dumps(line, tmp_path)
    assert _site_settings(before, line) == ([MIRROR], RUNC)
    assert _site_settings(after, line) == (None, None)   # real containerd: both gone


@pytest.mark.real
@pytest.mark.parametrize("line", ["1.6", "1.7"])
def test_the_fix_settings_in_the_top_level_config_survive(line: str, tmp_path: Path) -> None:
    """What the finding advises: the same settings in config.toml, the toolkit's config
    source, are copied into its drop-in — no finding, and real containerd keeps them."""
    captured = _captured()
    captured[TOP] = captured.pop(SITE).replace("version = 2\n", captured[TOP].split(
        f'[plugins."{CRI}"]')[0], 1)
    plan = plan_node(PROFILE, ContainerdVersion.parse(line), _plan(line).options,
                     current=captured)
    assert not [f for f in plan.findings if f.id == "FM05"]
    node, real = toolkit_oracle.run_on_plan(plan, "1.18.1", tmp_path)
    oracle.require_line(line)
    write_layout({**node, **real.written}, tmp_path / "after")
    dumped = oracle.dump(line, host_path(tmp_path / "after", TOP))
    assert dumped.ok, dumped.error
    assert _site_settings(dumped.config, line) == ([MIRROR], RUNC)


@pytest.mark.real
@pytest.mark.parametrize("line", ["2.0", "2.1", "2.2"])
def test_fm05_containerd_2_keeps_them_and_the_plan_says_nothing(line: str, tmp_path: Path) -> None:
    assert not [f for f in _plan(line).findings if f.id == "FM05"]
    before, after = _real_dumps(line, tmp_path)
    assert _site_settings(before, line) == _site_settings(after, line) == ([MIRROR], RUNC)


def test_fm05_a_stack_planned_from_captured_drop_ins_reports_the_loss(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Through the stack: `baselineFiles` naming the top-level config and the drop-in."""
    from gpuplane.cli.main import main

    stacks = Path(__file__).resolve().parents[2] / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(stacks, tmp_path / "stacks")
    (tmp_path / "nodefiles").mkdir()
    for path, text in _captured().items():
        (tmp_path / "nodefiles" / Path(path).name).write_text(text)
    stack = tmp_path / "stacks" / "Pulumi.kubeadm-prod.yaml"
    stack.write_text(stack.read_text().replace(
        "    nodeAccess: ssh\n",
        "    nodeAccess: ssh\n    baselineFiles:\n"
        f"      {TOP}: nodefiles/config.toml\n      {SITE}: nodefiles/10-site.toml\n"))
    code = main(["plan", "--stack", "kubeadm-prod", "--stacks-dir", str(tmp_path / "stacks"),
                 "--format", "json"])
    plan = json.loads(capsys.readouterr().out)
    fm05 = [f for f in plan["findings"] if f["id"] == "FM05"]
    assert code == 1 and fm05 and "registry.mirrors" in fm05[0]["message"]
