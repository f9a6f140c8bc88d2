"""The planner for every distro x containerd line x toolkit mode, checked three ways:
the rulebook finds nothing wrong, the promised runtimes are there, and real containerd
merges the planned layout exactly as the model does."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import tomlkit
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

PROFILES = {
    **{d.value: profile(d) for d in Distro},
    "k8s-snap-custom-base": profile(Distro.K8S_SNAP, containerd_base_dir="/var/lib/k8s-containerd"),
    "k8s-snap-legacy": profile(Distro.K8S_SNAP, legacy=True),
}
OPTIONS = {
    "plain": {},
    "nvidia-default": {"nvidia_default": True},
    "systemd-off": {"systemd_cgroup": False},
    "cdi": {"cdi": True},
    "toolkit-1.17": {"toolkit_version": "1.17.8"},
}
CASES = [
    pytest.param(p, line, mode, o, id=f"{p}-{line}-{mode.value}-{o}")
    for p, line, mode, o in itertools.product(PROFILES, oracle.LINES, ToolkitMode, OPTIONS)
    if not (mode is ToolkitMode.NONE and o != "plain")
    and not (o == "toolkit-1.17" and mode is not ToolkitMode.OPERATOR)
]


def make_plan(name: str, line: str, mode: ToolkitMode, opts: str):
    options = PlanOptions(toolkit=mode, **OPTIONS[opts])
    return plan_node(PROFILES[name], ContainerdVersion.parse(line), options)


@pytest.mark.parametrize(("name", "line", "mode", "opts"), CASES)
def test_plan_is_clean_and_keeps_runc(name: str, line: str, mode: ToolkitMode, opts: str) -> None:
    plan = make_plan(name, line, mode, opts)
    errors = [f for f in plan.findings if f.severity is Severity.ERROR]
    if opts == "cdi" and line == "1.6" and mode is not ToolkitMode.NONE:
        assert [f.id for f in errors] == ["FM16"], errors
        return
    # Toolkit 1.17.8 on containerd 2.x writes `containerd config dump` back: predicted
    # (gpuplane.toolkit.output, held against the real installer and containerd 2.0-2.2 in
    # test_config_dump_v3_model.py), so those plans are judged like any other.
    assert not errors, "\n".join(f"{f.id} {f.where}: {f.message}" for f in errors)
    eff = plan.effective
    assert eff.starts, eff.refusals
    assert "runc" in eff.runtimes
    if mode is not ToolkitMode.NONE:
        nvidia = eff.runtimes["nvidia"]
        assert nvidia.runtime_type == "io.containerd.runc.v2"
        assert nvidia.options["BinaryName"].endswith("nvidia-container-runtime")
        wants_default = OPTIONS[opts].get("nvidia_default") and not OPTIONS[opts].get("cdi")
        assert eff.default_runtime == ("nvidia" if wants_default else "runc")
        systemd = {r.options.get("SystemdCgroup", False) for r in eff.runtimes.values()}
        assert len(systemd) == 1, eff.runtimes
    if opts == "systemd-off":
        assert not any(r.options.get("SystemdCgroup") for r in eff.runtimes.values())
    if mode is ToolkitMode.NONE:
        assert not plan.files and "nvidia" not in eff.runtimes


@pytest.mark.real
@pytest.mark.parametrize(("name", "line", "mode", "opts"), CASES)
def test_plan_matches_real_containerd(name: str, line: str, mode: ToolkitMode, opts: str,
                                      tmp_path: Path) -> None:
    oracle.require_line(line)
    plan = make_plan(name, line, mode, opts)
    write_layout(plan.layout, tmp_path)
    real = oracle.dump(line, host_path(tmp_path, plan.profile.config_path))
    assert real.ok, real.error
    assert oracle.effective_from_dump(line, real.config) == plan.effective.to_dict()


def test_k8s_snap_custom_base_dir_points_the_toolkit_at_the_kubelets_containerd() -> None:
    """Field incident 1: the toolkit must edit the k8s containerd, not Docker's."""
    plan = make_plan("k8s-snap-custom-base", "1.7", ToolkitMode.OPERATOR, "plain")
    env = {e["name"]: e["value"] for e in plan.toolkit_env}
    root = "/var/lib/k8s-containerd/k8s-containerd"
    assert env["CONTAINERD_CONFIG"] == f"{root}/etc/containerd/config.toml"
    assert env["CONTAINERD_SOCKET"] == f"{root}/run/containerd/containerd.sock"
    assert env["RUNTIME_DROP_IN_CONFIG"] == f"{root}/etc/containerd/conf.d/99-nvidia.toml"
    assert f"{root}/etc/containerd/conf.d/99-nvidia.toml" in plan.layout


def test_kubeadm_gets_an_import_for_the_drop_in_dir_and_keeps_comments() -> None:
    plan = make_plan("kubeadm", "1.7", ToolkitMode.HOST, "plain")
    top = plan.files["/etc/containerd/config.toml"]
    assert tomlkit.parse(top)["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert top.startswith("# containerd as a kubeadm guide installs it")
    assert "/etc/containerd/conf.d/50-gpuplane.toml" in plan.files


def test_drop_in_on_1x_carries_the_whole_cri_table_and_on_2x_only_the_change() -> None:
    old = make_plan("k8s-snap", "1.7", ToolkitMode.HOST, "plain")
    new = make_plan("k8s-snap", "2.1", ToolkitMode.HOST, "plain")
    old_cri = tomlkit.parse(old.files["/etc/containerd/conf.d/50-gpuplane.toml"])["plugins"]
    new_cri = tomlkit.parse(new.files["/etc/containerd/conf.d/50-gpuplane.toml"])["plugins"]
    old_table = old_cri["io.containerd.grpc.v1.cri"]
    assert set(old_table["containerd"]["runtimes"]) == {"runc", "nvidia"}
    assert old_table["sandbox_image"] == "ghcr.io/canonical/k8s-snap/pause:3.10"
    assert set(new_cri["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]) == {"nvidia"}


def test_template_distros_write_the_template_never_the_generated_file() -> None:
    for name in ("rke2", "k3s", "microk8s"):
        for line in oracle.LINES:
            plan = make_plan(name, line, ToolkitMode.HOST, "plain")
            prof = plan.profile
            assert prof.config_path not in plan.files
            assert set(plan.files) == {prof.edit_path(ContainerdVersion.parse(line))}


SANDBOX_CASES = [
    pytest.param(p, line, mode, id=f"{p}-{line}-{mode.value}")
    for p, line, mode in itertools.product(PROFILES, oracle.LINES,
                                           [ToolkitMode.OPERATOR, ToolkitMode.HOST])
]


@pytest.mark.real
@pytest.mark.parametrize(("name", "line", "mode"), SANDBOX_CASES)
def test_planned_config_starts_a_sandbox_through_the_nvidia_handler(
        name: str, line: str, mode: ToolkitMode, tmp_short: Path, start_daemon) -> None:
    """A real daemon on every planned layout runs a pod sandbox with handler `nvidia`.

    Two substitutions make the layout runnable here and change nothing the merge sees:
    nvidia's BinaryName points at a wrapper that logs and execs runc, and SystemdCgroup is
    off (no systemd on this machine)."""
    oracle.require_line(line)
    plan = make_plan(name, line, mode, "plain")
    wrapper = oracle.nvidia_wrapper(tmp_short / "bin")
    layout = {path: _runnable(text, wrapper) for path, text in plan.layout.items()}
    root = tmp_short / "node"
    write_layout(layout, root)
    daemon = start_daemon(line, host_path(root, plan.profile.config_path))
    daemon.require_started()
    result = oracle.run_sandbox(daemon, "nvidia")
    assert result.ok, result.error
    assert oracle.wrapper_calls(wrapper), "the sandbox did not go through nvidia's BinaryName"


def _runnable(text: str, wrapper: Path) -> str:
    for binary in ("/usr/bin/nvidia-container-runtime",
                   "/usr/local/nvidia/toolkit/nvidia-container-runtime"):
        text = text.replace(f'"{binary}"', f'"{wrapper}"')
    return text.replace("SystemdCgroup = true", "SystemdCgroup = false")


@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_host_plan_sets_every_spelling_containerd_reads(line: str) -> None:
    """Kubespray <= 2.27 spells runc's options `systemdCgroup` / `binaryName`; on 2.x the
    last spelling in byte order wins, so gpuplane must set that one too."""
    cri = '"io.containerd.grpc.v1.cri"'
    node = {"/etc/containerd/config.toml": (
        f'version = 2\n[plugins.{cri}.containerd]\ndefault_runtime_name = "runc"\n'
        f'[plugins.{cri}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
        f'[plugins.{cri}.containerd.runtimes.runc.options]\n'
        'systemdCgroup = false\nbinaryName = "/usr/local/bin/runc"\n')}
    version = ContainerdVersion.parse(line)
    plan = plan_node(profile(Distro.KUBEADM), version,
                     PlanOptions(toolkit=ToolkitMode.HOST, systemd_cgroup=True), current=node)
    from gpuplane.containerd.effective import raw_options
    from gpuplane.containerd.options import decoded
    for name in ("runc", "nvidia"):
        raw = raw_options(plan.effective, name)
        assert decoded(raw, "SystemdCgroup", version) is True, (name, raw)
    nvidia = raw_options(plan.effective, "nvidia")
    assert decoded(nvidia, "BinaryName", version) == "/usr/bin/nvidia-container-runtime"
    assert decoded(raw_options(plan.effective, "runc"), "BinaryName", version) == \
        "/usr/local/bin/runc"
