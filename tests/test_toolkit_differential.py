"""gpuplane's model of the NVIDIA toolkit against the real installers (1.17.8, 1.18.1).

For every distro profile x containerd line x toolkit x plan option, and for node files
captured with what real nodes carry (comments, a registry drop-in, another `root`, a
config without `version`): the planner's node files go to the real installer in a
sandbox, run with the env the GPU Operator gives it (tests/toolkit_oracle.py), and:

1. the set of files it writes equals the model's (`plan.toolkit_files`);
2. each file's TOML data equals the model's;
3. real containerd of that line merges the node (after the distribution's render step)
   into exactly the effective CRI config the plan predicts.

Target: zero differences. The counts per toolkit and per containerd line are what the
parametrisation below generates (README, "The toolkit oracle").
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import pytest
import toolkit_oracle

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros import Distro, EditMode, profile
from gpuplane.planner import PlanOptions, ToolkitMode, plan_node, rendered_layout

import oracle
from layouts import host_path, write_layout

PROFILES = {
    **{d.value: profile(d) for d in Distro},
    "k8s-snap-custom-base": profile(Distro.K8S_SNAP, containerd_base_dir="/data/ctr"),
    "k8s-snap-legacy": profile(Distro.K8S_SNAP, legacy=True),
}
OPTIONS = {
    "plain": {},
    "nvidia-default": {"nvidia_default": True},
    "cdi": {"cdi": True},
    "systemd-off": {"systemd_cgroup": False},
    "runtime-gpu": {"runtime_name": "gpu"},
}
TOOLKIT_VERSIONS = tuple(toolkit_oracle.TOOLKITS)


def _captured(name: str, variant: str) -> dict[str, str] | None:
    """Node files as captured from real nodes, where they differ from the model's."""
    prof = PROFILES[name]
    base = prof.baseline()
    top = prof.config_path
    if variant == "model":
        return None
    if variant == "comments-root":
        text = base[top]
        body = text.replace('root = "/var/lib/containerd"', 'root = "/data/containerd"')
        return {**base, top: "# managed by the platform team\n" + body
                + "\n# trailing note\n"}
    if variant == "registry-dropin" and prof.dropin_dir:
        cri = "io.containerd.grpc.v1.cri"
        return {**base, f"{prof.dropin_dir}/10-registry.toml":
                f'version = 2\n[plugins."{cri}".registry]\n'
                'config_path = "/etc/containerd/registry.d"\n'}
    return None


BASELINES = ("model", "comments-root", "registry-dropin")


def _cases() -> list[pytest.param]:
    out = []
    for name, line, toolkit, opts, base in itertools.product(
            PROFILES, oracle.LINES, TOOLKIT_VERSIONS, OPTIONS, BASELINES):
        if base != "model" and (opts != "plain" or _captured(name, base) is None):
            continue
        out.append(pytest.param(name, line, toolkit, opts, base,
                                id=f"{name}-{line}-{toolkit}-{opts}-{base}",
                                marks=pytest.mark.real))
    return out


def _plan(name: str, line: str, toolkit: str, opts: str, base: str):
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR,
                          toolkit_dropin=toolkit.startswith("1.18"), **OPTIONS[opts])
    return plan_node(PROFILES[name], ContainerdVersion.parse(line), options,
                     current=_captured(name, base))


@pytest.mark.parametrize(("name", "line", "toolkit", "opts", "base"), _cases())
def test_the_model_writes_what_the_real_toolkit_writes(
        name: str, line: str, toolkit: str, opts: str, base: str, tmp_path: Path) -> None:
    plan = _plan(name, line, toolkit, opts, base)
    node = {**plan.baseline, **plan.files}
    env = toolkit_oracle.operator_env(plan.toolkit_env, cdi=plan.options.cdi,
                                      runtime_class=plan.options.runtime_name,
                                      toolkit=toolkit)
    real = toolkit_oracle.run_toolkit(toolkit, rendered_layout(node, plan.profile,
                                                               plan.version),
                                      env, tmp_path / "toolkit")
    assert sorted(real.written) == sorted(plan.toolkit_files), real.log
    for path, text in real.written.items():
        assert tomllib.loads(text) == tomllib.loads(plan.toolkit_files[path]), path

    oracle.require_line(line)
    after = rendered_layout({**node, **real.written}, plan.profile, plan.version)
    write_layout(after, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", plan.profile.config_path))
    assert dumped.ok == plan.effective.starts, dumped.error
    if dumped.ok:
        assert oracle.effective_from_dump(line, dumped.config) == plan.effective.to_dict()


@pytest.mark.real
def test_without_gpuplanes_template_the_toolkit_strips_an_rke2_node(tmp_path: Path) -> None:
    """What the plan prevents, shown with the real toolkit: left to itself on RKE2 with
    containerd 2.0 (no template, the operator's default drop-in), toolkit 1.18.1 creates a
    template holding only `version` and `imports`, writes its drop-in into the host-wide
    /etc/containerd/conf.d, and the rendered config loses RKE2's own settings."""
    prof = PROFILES["rke2"]
    plan = _plan("rke2", "2.0", "1.18.1", "plain", "model")
    template = prof.edit_path(plan.version)
    env = toolkit_oracle.operator_env(
        [e for e in plan.toolkit_env if e["name"] != "RUNTIME_DROP_IN_CONFIG"],
        cdi=False, runtime_class="nvidia", toolkit="1.18.1")
    real = toolkit_oracle.run_toolkit("1.18.1", prof.baseline(), env, tmp_path)
    assert tomllib.loads(real.written[template]) == {
        "version": 2, "imports": ["/etc/containerd/conf.d/*.toml"]}
    assert "/etc/containerd/conf.d/99-nvidia.toml" in real.written
    # gpuplane's plan: the whole template, importing RKE2's own dir.
    assert prof.edit_mode is EditMode.TEMPLATE
    planned = tomllib.loads(plan.files[template])
    assert planned["imports"] == [f"{prof.toolkit_dir}/*.toml"]
    assert planned["plugins"]["io.containerd.internal.v1.opt"]["path"]
    assert not [f for f in plan.findings if f.id == "FM05"]


@pytest.mark.real
@pytest.mark.parametrize("line", oracle.LINES)
def test_a_registry_drop_in_erased_by_the_toolkit_is_a_finding(line: str,
                                                               tmp_path: Path) -> None:
    """The toolkit's drop-in copies the top-level CRI table and is merged last: a registry
    setting another drop-in made is overwritten, on every line (real containerd shows it)."""
    plan = _plan("kubeadm", line, "1.18.1", "plain", "registry-dropin")
    fm05 = [f for f in plan.findings if f.id == "FM05"]
    assert fm05 and "registry.config_path" in fm05[0].message
    node = {**plan.baseline, **plan.files}
    cri = "io.containerd.grpc.v1.cri" if line.startswith("1.") else "io.containerd.cri.v1.images"
    for layout, expected in ((node, "/etc/containerd/registry.d"),
                             ({**node, **plan.toolkit_files}, "/etc/containerd/certs.d")):
        root = tmp_path / expected.rsplit("/", 1)[1]
        write_layout(layout, root)
        dumped = oracle.dump(line, host_path(root, plan.profile.config_path))
        assert dumped.ok, dumped.error
        assert dumped.config["plugins"][cri]["registry"]["config_path"] == expected
