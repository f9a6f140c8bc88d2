"""gpuplane's model of the NVIDIA toolkit against the real installer of every toolkit a
supported GPU Operator chart ships (1.15.0 … 1.20.0, tests/support/toolkit_oracle.py TOOLKITS).

For every distro profile x containerd line x toolkit x plan option, and for node files
captured with what real nodes carry (comments, a registry drop-in, another `root`, a
config without `version`): the planner's node files go to the real installer in a
sandbox, run with the env the GPU Operator gives it (tests/support/toolkit_oracle.py), and:

1. the set of files it writes equals the model's (`plan.toolkit_files`);
2. each file's TOML data equals the model's;
3. real containerd of that line merges the node (after the distribution's render step)
   into exactly the effective CRI config the plan predicts.

Target: zero differences. The counts per toolkit and per containerd line are what the
parametrisation below generates (docs/proofs.md, "The toolkit oracle").
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout
from support.operator_env import operator_env

from gpuplane.containerd import ContainerdVersion
from gpuplane.containerd.merge import merge
from gpuplane.containerd.versions import RUNC_V2 as RUNC
from gpuplane.distros import k0s_render
from gpuplane.distros.profiles import Distro, DistroProfile, EditMode, profile
from gpuplane.plan.node import (
    NodeContainerdPlan,
    PlanOptions,
    ToolkitMode,
    plan_node,
    rendered_layout,
)
from gpuplane.toolkit.operator import installer_env
from gpuplane.toolkit.output import Node, toolkit_blocker

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
# Captured variants are edits of the distribution's version-2 file (on every line: what a
# node an admin configured by hand carries); the model's own files follow the line.
V2_LINE = ContainerdVersion.parse("1.7")


def _without_version(text: str, *, v1_names: bool) -> str:
    """`text` as an older node carries it: no `version` line (a version-1 file to containerd
    and to the toolkit), and with `v1_names` the version-1 plugin names too."""
    body = "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("version")) + "\n"
    if v1_names:
        body = (body.replace('"io.containerd.grpc.v1.cri"', "cri")
                .replace('"io.containerd.internal.v1.opt"', "opt"))
    return body


def _captured(name: str, variant: str) -> dict[str, str] | None:
    """Node files as captured from real nodes, where they differ from the model's."""
    prof = PROFILES[name]
    base = prof.baseline(V2_LINE)
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
    if variant in ("versionless", "versionless-v1"):
        return {**base, top: _without_version(base[top],
                                              v1_names=variant == "versionless-v1")}
    if variant == "migrated-v3":
        return {**base, top: _migrated_v3(name)}
    if variant == "v2-v3-names":
        # `version = 2` over version-3 plugin names, run by containerd 2.x: AKS on Azure
        # Linux 3 / Ubuntu 24.04 (AgentBaker pkg/agent/baker.go containerdV2ConfigTemplate)
        text = _migrated_v3(name)
        assert "version = 3" in text
        return {**base, top: text.replace("version = 3", "version = 2", 1)}
    if variant == "runc-untyped":
        # a runc table without `runtime_type` (containerd fills in its default): what the
        # installer copies for the nvidia runtimes then lacks it too, until 1.20 fills it
        data = tomllib.loads(base[top])
        cri = next((t for k, t in data.get("plugins", {}).items()
                    if k in ("io.containerd.grpc.v1.cri", "cri")), {})
        runc = cri.get("containerd", {}).get("runtimes", {}).get("runc")
        if not runc or "runtime_type" not in runc:
            return None
        del runc["runtime_type"]
        return {**base, top: tomlkit.dumps(data)}
    if variant in _RUNTIME_SHAPES:
        # Issue #26: vendor nodes whose default runtime is not runc, or that have no runc
        # table, and Kubespray <= 2.27's lower-case option keys.
        data = tomllib.loads(base[top])
        cri = next((t for k, t in data.get("plugins", {}).items()
                    if k in ("io.containerd.grpc.v1.cri", "cri")), None)
        if cri is None or "runc" not in cri.get("containerd", {}).get("runtimes", {}):
            return None
        _RUNTIME_SHAPES[variant](cri["containerd"])
        return {**base, top: tomlkit.dumps(data)}
    return None


def _vendor_nvidia_default(ctd: dict[str, Any], name: str = "nvidia",
                           extra: str | None = None) -> None:
    """EKS's NVIDIA AMI (nodeadm config2.template.toml@v20260724: runtime `nvidia`, no
    runc table) and AKS's GPU pools (AgentBaker pkg/agent/baker.go containerdV1
    ConfigTemplate: `nvidia-container-runtime` plus `untrusted`, no runc table)."""
    runc = ctd["runtimes"].pop("runc")
    options = {**runc.get("options", {}), "BinaryName": "/usr/bin/nvidia-container-runtime",
               "SystemdCgroup": True}
    ctd["runtimes"][name] = {"runtime_type": RUNC, "options": options}
    if extra:
        ctd["runtimes"][extra] = {"runtime_type": RUNC, "options": {
            "BinaryName": "/usr/bin/nvidia-container-runtime"}}
    ctd["default_runtime_name"] = name


def _other_default(ctd: dict[str, Any]) -> None:
    """A default runtime other than runc (crun), runc still defined."""
    ctd["runtimes"]["crun"] = {"runtime_type": RUNC, "options": {
        "BinaryName": "/usr/bin/crun", "SystemdCgroup": True}}
    ctd["default_runtime_name"] = "crun"


def _lower_case_keys(ctd: dict[str, Any]) -> None:
    """Kubespray <= 2.27 (roles/container-engine/containerd/defaults/main.yml@v2.27.0)."""
    runc = ctd["runtimes"]["runc"]
    runc["options"] = {"systemdCgroup": True, "binaryName": "/usr/local/bin/runc"}


_RUNTIME_SHAPES: dict[str, Any] = {
    "vendor-nvidia-default": _vendor_nvidia_default,
    "vendor-aks": lambda ctd: _vendor_nvidia_default(ctd, "nvidia-container-runtime",
                                                     "untrusted"),
    "other-default": _other_default,
    "lower-case-keys": _lower_case_keys,
}


@functools.cache
def _migrated_v3(name: str) -> str:
    """The profile's top-level config as `containerd config migrate` (the real 2.0) writes
    it: version 3, every default spelled out, the images and runtime plugins split; what a
    node carries after its admin migrated it, and what RKE2/K3s render on 2.x."""
    prof = PROFILES[name]
    with tempfile.TemporaryDirectory(prefix="gp-mig-") as tmp:
        write_layout(prof.baseline(V2_LINE), Path(tmp))
        proc = subprocess.run(
            [str(oracle.binary("2.0")), "--config",
             str(host_path(Path(tmp), prof.config_path)), "config", "migrate"],
            capture_output=True, text=True, timeout=60, check=True, cwd="/")
        return proc.stdout.replace(tmp, "")   # imports back to node paths


BASELINES = ("model", "comments-root", "registry-dropin", "versionless", "versionless-v1",
             "migrated-v3", "v2-v3-names", "runc-untyped", *_RUNTIME_SHAPES)


def _cases() -> list[pytest.param]:
    out = []
    for name, line, toolkit, opts, base in itertools.product(
            PROFILES, oracle.LINES, TOOLKIT_VERSIONS, OPTIONS, BASELINES):
        if base in ("migrated-v3", "v2-v3-names"):
            if line.startswith("1.") or opts != "plain":
                continue   # a version-3 config is for containerd 2.x only
        elif base != "model" and (opts != "plain" or _captured(name, base) is None):
            continue
        out.append(pytest.param(name, line, toolkit, opts, base,
                                id=f"{name}-{line}-{toolkit}-{opts}-{base}",
                                marks=pytest.mark.real))
    return out


def _plan(name: str, line: str, toolkit: str, opts: str, base: str):
    return _plan_from(PROFILES[name], line, toolkit, OPTIONS[opts], _captured(name, base))


def _plan_from(prof: DistroProfile, line: str, toolkit: str, opts: dict[str, Any],
               captured: dict[str, str] | None) -> NodeContainerdPlan:
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version=toolkit,
                          operator_chart=toolkit_oracle.chart_of(toolkit), **opts)
    return plan_node(prof, ContainerdVersion.parse(line), options, current=captured)


def _cri_plugin(line: str) -> str:
    return "io.containerd.grpc.v1.cri" if line.startswith("1.") else "io.containerd.cri.v1.runtime"


def assert_toolkit_agrees(plan: NodeContainerdPlan, toolkit: str, tmp: Path) -> None:
    """The real installer on the plan's node files writes what the model says, and real
    containerd runs the result as the plan predicts (loads or refuses, same CRI view).

    Where the model says the installer fails, the plan must refuse (FM03) and the real
    installer must have failed. Where it rewrites the config from a `containerd config
    dump` (1.x, or 2.x's version 3), the file holds containerd's defaults too: the model's
    file and the real one must then be the same config to real containerd (`config dump`
    of each, whole)."""
    line = str(plan.version.major) + "." + str(plan.version.minor)
    env = installer_env(plan.toolkit_env, plan.options)
    blocker = toolkit_blocker({**plan.baseline, **plan.files}, env, plan.options.installer,
                              Node(plan.version, (plan.profile.containerd_binary,)))
    if blocker:
        assert [f for f in plan.findings if f.id == "FM03" and f.severity == "error"
                and f.message.startswith(blocker)], plan.findings
        assert "the installer fails" in blocker
        with pytest.raises(oracle.OracleError):
            toolkit_oracle.run_on_plan(plan, toolkit, tmp)
        return
    node, real = toolkit_oracle.run_on_plan(plan, toolkit, tmp)
    assert sorted(real.written) == sorted(plan.toolkit_files), real.log
    from_dump = plan.options.installer.dump_binary(
        env, (plan.profile.containerd_binary,)) is not None
    for path, text in real.written.items():
        if from_dump:
            oracle.require_line(line)
            ours, theirs = (_whole_dump(line, {**node, path: t}, path, tmp / name)
                            for name, t in (("model", plan.toolkit_files[path]),
                                            ("real", text)))
            assert ours == theirs, path
        else:
            assert tomllib.loads(text) == tomllib.loads(plan.toolkit_files[path]), path

    oracle.require_line(line)
    after = rendered_layout({**node, **real.written}, plan.profile, plan.version)
    write_layout(after, tmp / "node")
    top = host_path(tmp / "node", plan.profile.config_path)
    dumped = oracle.dump(line, top)
    load = plan.effective.load
    load_refusals = [*load.refusals, *merge(load).refusals] if load else []
    assert dumped.ok == (not load_refusals), (dumped.error, load_refusals)
    if not dumped.ok:
        return
    if plan.effective.ambiguities:
        # containerd 2.x runs either table of a doubly named v1 plugin (a Go map walk):
        # no single prediction exists, so the plan must refuse it instead.
        assert [f for f in plan.findings if f.id == "FM03" and "changes from one start"
                in f.message and f.severity == "error"], plan.findings
        return
    assert oracle.effective_from_dump(line, dumped.config) == plan.effective.to_dict()
    if plan.effective.starts:
        return
    # The loader accepts it but the model says the CRI plugin refuses it (`config dump`
    # does not run the plugin): the real daemon must show the CRI plugin failing.
    with oracle.Daemon(line, top, tmp / "d") as daemon:
        daemon.require_started()
        assert daemon.plugin_status(_cri_plugin(line)) == "error", plan.effective.refusals


def _whole_dump(line: str, layout: dict[str, str], path: str, root: Path) -> dict[str, Any]:
    """`config dump` of `path` in `layout`, without `imports` (which lists the files read
    by their sandbox paths)."""
    write_layout(layout, root)
    dumped = oracle.dump(line, host_path(root, path))
    assert dumped.ok, dumped.error
    return {k: v for k, v in dumped.config.items() if k != "imports"}


@pytest.mark.parametrize(("name", "line", "toolkit", "opts", "base"), _cases())
def test_the_model_writes_what_the_real_toolkit_writes(
        name: str, line: str, toolkit: str, opts: str, base: str, tmp_path: Path) -> None:
    assert_toolkit_agrees(_plan(name, line, toolkit, opts, base), toolkit, tmp_path)


@pytest.mark.real
def test_without_gpuplanes_template_the_toolkit_strips_an_rke2_node(tmp_path: Path) -> None:
    """What the plan prevents, shown with the real toolkit: left to itself on RKE2 with
    containerd 2.0 (no template, the operator's default drop-in), toolkit 1.18.1 creates a
    template holding only `version` and `imports` (version 3, that of the config RKE2
    renders on 2.x), writes its drop-in into the host-wide /etc/containerd/conf.d, and the
    rendered config loses RKE2's own settings."""
    prof = PROFILES["rke2"]
    plan = _plan("rke2", "2.0", "1.18.1", "plain", "model")
    template = prof.edit_path(plan.version)
    env = operator_env(
        "v25.10.1", [e for e in plan.toolkit_env if e["name"] != "RUNTIME_DROP_IN_CONFIG"],
        cdi=False, runtime_class="nvidia")
    real = toolkit_oracle.run_toolkit("1.18.1", plan.baseline, env, tmp_path)
    assert tomllib.loads(real.written[template]) == {
        "version": 3, "imports": ["/etc/containerd/conf.d/*.toml"]}
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


@pytest.mark.real
@pytest.mark.parametrize("toolkit", TOOLKIT_VERSIONS)
def test_a_versionless_node_config_is_explained(toolkit: str) -> None:
    """A node config without `version` is version 1 to the toolkit (the differential above
    holds the model to the real installer on it); the plan says so and what to change."""
    for base, expected in (("versionless", 1), ("versionless-v1", 1), ("model", 0)):
        plan = _plan("kubeadm", "1.7", toolkit, "plain", base)
        hints = [f for f in plan.findings if f.id == "FM03" and f.severity == "warning"
                 and "no `version` key" in f.message]
        assert len(hints) == expected, (base, plan.findings)
        assert all("version = 2" in f.fix for f in hints)


# ---------------------------------------------------------------------------------------
# Generated captured files: what real nodes carry, within what a node could have written.

CRI_KEYS = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "cri")
GENERATED = int(os.environ.get("GPUPLANE_TOOLKIT_EXAMPLES", "200"))


def _cri_table(data: dict[str, Any]) -> dict[str, Any]:
    plugins = data.setdefault("plugins", {})
    for key in CRI_KEYS:
        if key in plugins:
            return plugins[key]
    return plugins.setdefault(CRI_KEYS[0], {})


@st.composite
def captured_node(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A profile and node files as a real node might hold them: the distribution's file
    with another root, runc options, extra runtimes, registry settings, comments, key
    order and a missing `version`, plus another writer's registry drop-in."""
    name = draw(st.sampled_from(sorted(PROFILES)))
    prof = PROFILES[name]
    files = prof.baseline(V2_LINE)   # version-2 tables, which the edits below address
    data = tomllib.loads(files[prof.config_path])
    if draw(st.booleans()):
        data["root"] = draw(st.sampled_from(["/data/containerd", "/var/lib/containerd"]))
    cri = _cri_table(data)
    ctd = cri.setdefault("containerd", {})
    runc = ctd.setdefault("runtimes", {}).setdefault("runc", {"runtime_type": RUNC})
    options = runc.setdefault("options", {})
    systemd = draw(st.sampled_from([True, False, None]))
    if systemd is None:
        options.pop("SystemdCgroup", None)
    else:
        options["SystemdCgroup"] = systemd
    options.update(draw(st.sampled_from([{}, {"BinaryName": "/usr/bin/runc"},
                                         {"NoNewKeyring": True}])))
    if draw(st.booleans()):
        ctd["default_runtime_name"] = "runc"
    if draw(st.booleans()):
        ctd["runtimes"]["kata"] = {"runtime_type": "io.containerd.kata.v2"}
    registry = draw(st.sampled_from([None, {"config_path": "/etc/containerd/registry.d"}]))
    if registry and "registry" not in cri:
        cri["registry"] = registry
    if draw(st.booleans()):
        data = dict(reversed(list(data.items())))
    text = tomlkit.dumps(data)
    if draw(st.booleans()):
        text = "# captured from the node\n" + text + "# end\n"
    if draw(st.integers(0, 5)) == 0:
        text = _without_version(text, v1_names=False)
    files[prof.config_path] = text
    if prof.dropin_dir and draw(st.booleans()):
        files[f"{prof.dropin_dir}/10-registry.toml"] = (
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n'
            'config_path = "/etc/containerd/other.d"\n')
    return name, files


@pytest.mark.real
@settings(max_examples=GENERATED, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(node=captured_node(), line=st.sampled_from(oracle.LINES),
       toolkit=st.sampled_from(TOOLKIT_VERSIONS), opts=st.sampled_from(sorted(OPTIONS)))
def test_generated_captured_files_agree_with_the_real_toolkit(
        node: tuple[str, dict[str, str]], line: str, toolkit: str, opts: str) -> None:
    name, files = node
    plan = _plan_from(PROFILES[name], line, toolkit, OPTIONS[opts], files)
    with tempfile.TemporaryDirectory(prefix="gp-tk-") as tmp:
        assert_toolkit_agrees(plan, toolkit, Path(tmp))


# ---------------------------------------------------------------------------------------
# Host toolkit: no installer runs; gpuplane writes the nvidia runtime itself. It must be
# the runtime NVIDIA's own host configuration gives containerd.

HOST_PROFILES = [n for n, p in PROFILES.items() if p.edit_mode is EditMode.DROP_IN]
HOST_OPTIONS = {
    "plain": ({}, []),
    "nvidia-default": ({"nvidia_default": True}, ["--set-as-default"]),
    "cdi": ({"cdi": True}, ["--enable-cdi"]),
    "runtime-gpu": ({"runtime_name": "gpu"}, ["--nvidia-runtime-name=gpu"]),
}


@pytest.mark.real
@pytest.mark.parametrize("opts", HOST_OPTIONS)
@pytest.mark.parametrize("line", oracle.LINES)
@pytest.mark.parametrize("name", HOST_PROFILES)
def test_host_mode_runs_what_nvidia_ctk_configures(name: str, line: str, opts: str,
                                                   tmp_path: Path) -> None:
    """gpuplane's host-toolkit files vs `nvidia-ctk runtime configure --runtime=containerd
    --drop-in-config=<the distro's drop-in dir>/99-nvidia.toml --nvidia-runtime-path=
    /usr/bin/nvidia-container-runtime` (toolkit 1.18.1) on the same node: real containerd
    runs both with the same CRI runtimes, default and CDI setting."""
    prof = PROFILES[name]
    plan_opts, ctk_args = HOST_OPTIONS[opts]
    plan = plan_node(prof, ContainerdVersion.parse(line),
                     PlanOptions(toolkit=ToolkitMode.HOST, **plan_opts))
    assert not plan.toolkit_files
    # k0s: the CRI table is in the file k0s generates; nvidia-ctk's drop-in goes where k0s
    # merges it (its edit of the generated file is discarded when k0s renders again).
    source = k0s_render.CRI_FILE if prof.generates_from_dropins else prof.config_path
    configured = toolkit_oracle.host_configure(
        "1.18.1", plan.baseline, config=source,
        dropin=f"{prof.dropin_dir}/99-nvidia.toml",
        args=["--nvidia-runtime-path=/usr/bin/nvidia-container-runtime", *ctk_args],
        tmp=tmp_path / "ctk")
    oracle.require_line(line)
    views = []
    for label, layout in (("gpuplane", {**plan.baseline, **plan.files}),
                          ("nvidia-ctk", configured)):
        # what containerd reads once the distribution has rendered (k0s merges its
        # drop-ins into a file it generates, unless a rewrite took the file from it)
        layout = rendered_layout(layout, prof, plan.version)
        write_layout(layout, tmp_path / label)
        dumped = oracle.dump(line, host_path(tmp_path / label, prof.config_path))
        assert dumped.ok, (label, dumped.error)
        views.append(oracle.effective_from_dump(line, dumped.config))
    ours, theirs = views
    assert ours == theirs
    assert ours == plan.effective.to_dict()


# ---------------------------------------------------------------------------------------
# Coverage: every toolkit a supported chart ships is built and held by the differential.

def test_every_supported_charts_toolkit_is_built_and_held() -> None:
    """The differential runs each toolkit a supported GPU Operator chart pins, with the
    env of a chart that pins it, and each has a wrapper module the set-up builds."""
    from gpuplane.toolkit.operator import CHART_TOOLKITS, toolkit_for_chart

    shipped = {toolkit_for_chart(chart) for chart in CHART_TOOLKITS}
    assert set(TOOLKIT_VERSIONS) == shipped
    for toolkit in TOOLKIT_VERSIONS:
        assert toolkit_for_chart(toolkit_oracle.chart_of(toolkit)) == toolkit
        builds = Path(__file__).parents[1] / "builds" / f"toolkit-{toolkit}"
        assert f"nvidia-container-toolkit v{toolkit}" in (builds / "go.mod").read_text()
