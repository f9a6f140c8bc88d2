"""Plan a node's containerd change: the files gpuplane writes, the toolkit env, and the
combined result under that containerd's merge rules.

The plan is correct by construction and then checked: the combined layout (the
distribution's baseline, gpuplane's files and, in operator mode, the toolkit's own
output as the toolkit writes it) is merged by the containerd model and run through the
rulebook. A plan with error findings is never rolled out.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from gpuplane.containerd.effective import EffectiveConfig, effective_config
from gpuplane.containerd.errors import ConfigError
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.load import load_config
from gpuplane.containerd.merge import merge, migrate_v2_cri
from gpuplane.containerd.nri import nri_state
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import (
    AFTER_GPUPLANE,
    AFTER_TOOLKIT,
    AFTER_UNINSTALL,
    AS_FOUND,
    Finding,
)
from gpuplane.distros import k0s_render
from gpuplane.distros.docker_daemon import DAEMON_JSON, DockerPlan, DockerSettings, plan_docker
from gpuplane.distros.profiles import DistroProfile, EditMode
from gpuplane.plan.edits import (
    add_import,
    apply_patch,
    as_version_3,
    dropin,
    ensure_import,
    one_binary_spelling,
    v3_names_in_v2,
)
from gpuplane.plan.layout import (
    dropin_path,
    is_template,
    read_directly,
    rendered_layout,
    renders_dropins,
)
from gpuplane.plan.nri import nri_dropin, nri_dropin_path, nri_template
from gpuplane.plan.patch import cri_patch
from gpuplane.plan.rancher import detected_binaries, extends_rancher_base, rancher_files
from gpuplane.rules import ContainerdFacts
from gpuplane.rules.docker import check_docker_daemons
from gpuplane.rules.nodefiles import check_frozen_template
from gpuplane.rules.states import judge_states
from gpuplane.rules.toolkit_losses import check_distro_unmanaged, check_toolkit_losses
from gpuplane.rules.toolkit_source import check_toolkit_run, check_toolkit_source_version
from gpuplane.toolkit.env import toolkit_env_for
from gpuplane.toolkit.operator import installer_env
from gpuplane.toolkit.options import PlanOptions, ToolkitMode
from gpuplane.toolkit.output import Node, config_sources, toolkit_blocker, toolkit_writes


@dataclass
class NodeContainerdPlan:
    profile: DistroProfile
    version: ContainerdVersion
    options: PlanOptions
    files: dict[str, str]                 # what gpuplane writes, by node path
    toolkit_env: list[dict[str, str]]     # GPU Operator `toolkit.env`
    toolkit_files: dict[str, str]         # what the operator's toolkit will write (modelled)
    layout: dict[str, str]                # baseline + gpuplane + toolkit: the node after
    effective: EffectiveConfig
    written: EffectiveConfig              # baseline + gpuplane only: what the node agent
                                          # verifies before the operator's toolkit runs
    before: EffectiveConfig               # the baseline alone
    expected_runtimes: frozenset[str]
    findings: list[Finding] = field(default_factory=list)
    baseline: dict[str, str] = field(default_factory=dict)  # the node files planned from
    docker: DockerPlan | None = None      # Docker's daemon.json (`gpuplane:docker`), if asked

    @property
    def bases(self) -> dict[str, str | None]:
        """sha256 of each node file the plan was made from (None: planned as absent): every
        file gpuplane writes, and the top-level config its changes are derived from. The
        node agent refuses a node whose originals differ, instead of replacing settings
        the plan never saw."""
        paths = {*self.files, self.profile.config_path}
        return {p: _sha256(self.baseline[p]) if p in self.baseline else None
                for p in sorted(paths)}

    @property
    def restart_command(self) -> str:
        return self.profile.restart_command

    @cached_property
    def restarts(self) -> bool:
        """Whether writing the files changes what containerd runs (the agent restarts).
        Computed once per plan: every node planned from it asks (the report, the rollout
        rules), and `written` and `before` are set once, when the plan is made."""
        return self.written.to_dict() != self.before.to_dict() or _nri_on(self.written) \
            != _nri_on(self.before)


def plan_node(
    profile: DistroProfile,
    version: ContainerdVersion,
    options: PlanOptions,
    current: dict[str, str] | None = None,
    docker: DockerSettings | None = None,
) -> NodeContainerdPlan:
    """Plan the files for one node starting from `current` (default: the distro baseline).

    With `docker`, Docker's daemon.json is planned beside (from `current`'s copy of it,
    else as absent: the agent refuses a node whose file differs). It is kept apart from
    the containerd files: containerd never reads it, and it has its own restart."""
    containerd_files = None if current is None else \
        {path: text for path, text in current.items() if path != DAEMON_JSON}
    plan = _plan_containerd(profile, version, options, containerd_files)
    if docker is not None:
        plan.docker = plan_docker((current or {}).get(DAEMON_JSON), docker)
        env = {e["name"]: e["value"] for e in plan.toolkit_env} \
            if options.toolkit is ToolkitMode.OPERATOR else None
        plan.findings += check_docker_daemons(profile, env)
    return plan


def _plan_containerd(
    profile: DistroProfile,
    version: ContainerdVersion,
    options: PlanOptions,
    current: dict[str, str] | None = None,
) -> NodeContainerdPlan:
    """The containerd part of :func:`plan_node`."""
    recorded = dict(current if current is not None else profile.baseline(version))
    profile = node_profile(profile, recorded)
    files: dict[str, str] = {}
    top = profile.config_path
    baseline = _with_top(profile, version, recorded)
    if options.detected and profile.detects_nvidia_runtime:
        # RKE2's/K3s's detected mode (gpuplane.distros.rancher_mode): their own rendering adds the
        # runtimes once the toolkit has installed its binaries; gpuplane writes nothing but,
        # in NRI plugin mode, the template that switches NRI on where it is off.
        nri_files = nri_template(profile, version, recorded) \
            if options.nri and options.writes_files else {}
        return assess(profile, version, options, nri_files, recorded)
    if top in baseline and extends_rancher_base(profile, options,
                                                 baseline.get(profile.edit_path(version))):
        files = rancher_files(profile, version, options, baseline)
        return assess(profile, version, options, files if options.writes_files else {},
                      baseline)
    if profile.edit_mode is EditMode.TEMPLATE:
        target = profile.edit_path(version)
        # The node's own template; without one (RKE2/K3s render a built-in one), the
        # config it renders now.
        source = baseline[target] if target in baseline else baseline.get(top, "")
        patch = cri_patch(profile, version, options, baseline)
        text = apply_patch(source, patch, version)
        # The operator's toolkit edits the template, or creates one holding only its own
        # part (1.18: `version` + `imports`; 1.17: the nvidia runtimes), which the
        # distribution then renders into a config without any of its own settings.
        # gpuplane writes the whole template first; for 1.18 it imports the
        # distribution-local dir the toolkit is pointed at (gpuplane.toolkit.env).
        toolkit_runs = options.toolkit_configures_runtime
        toolkit_dir = _toolkit_dropin_dir(profile, options) if toolkit_runs else None
        if toolkit_dir:
            text = add_import(text, posixpath.join(toolkit_dir, "*.toml"))
        if (patch or toolkit_runs) and text != baseline.get(target):
            files[target] = text
        if options.nri:
            # NRI plugin mode: NRI on in what the distribution renders (1.7: off).
            files.update(nri_template(profile, version, {**baseline, **files}))
    else:
        patch = cri_patch(profile, version, options, baseline)
        if renders_dropins(profile, baseline):
            # k0s merges its drop-ins itself and rewrites the top-level file: the change
            # goes into gpuplane's drop-in, whatever the toolkit does, on every line.
            if patch and options.writes_files:
                files[dropin_path(profile)] = dropin(
                    rendered_layout(baseline, profile, version), top, version, patch,
                    whole=False)
            # NRI plugin mode: a drop-in without a CRI table, which k0s imports as it is.
            k0s_nri = nri_dropin(rendered_layout({**baseline, **files}, profile, version),
                                 top, version) if options.nri and options.writes_files else None
            if k0s_nri:
                files[nri_dropin_path(profile)] = k0s_nri
            return assess(profile, version, options, files, baseline)
        runs = options.toolkit_configures_runtime
        operator_dropin = runs and options.toolkit_dropin
        top_text = baseline[top]
        nri = nri_dropin(baseline, top, version) if options.nri else None
        if operator_dropin or (patch and not runs) or nri:
            top_text = ensure_import(top_text, profile, version, baseline)
        if runs and v3_names_in_v2(top_text, version):
            top_text = as_version_3(top_text)
        if runs:
            top_text = one_binary_spelling(top_text, version)
        if patch and runs:
            # The toolkit copies the CRI table from the top-level file (its config source)
            # into a drop-in merged last: a change anywhere else would be overwritten.
            top_text = apply_patch(top_text, patch, version)
        # A node without the file gets one whenever gpuplane writes anything, and always
        # before the operator's toolkit, which then edits gpuplane's file.
        if top_text != baseline[top] or (top not in recorded and (patch or runs or nri)):
            files[top] = top_text
        if patch and not runs:
            state = {**baseline, **files}
            files[dropin_path(profile)] = dropin(state, top, version, patch)
        if nri:
            # NRI plugin mode: the toolkit writes no runtime; NRI must be on (1.7: off).
            files[nri_dropin_path(profile)] = nri
    if not options.writes_files:
        files = {}
    return assess(profile, version, options, files, recorded)


def native_config(version: ContainerdVersion) -> str:
    """A top-level config holding only the line's native `version` (2 on 1.x, 3 on 2.x):
    exactly containerd's built-in defaults, which a node without the file runs on
    (tests/real/test_no_top_level_file_dump.py holds it against each line's `config dump`)."""
    return f"version = {version.max_config_version}\n"


def _with_top(profile: DistroProfile, version: ContainerdVersion,
              files: dict[str, str]) -> dict[str, str]:
    """`files` as the planner reads them: where the node has no top-level file and it is
    a plain file gpuplane edits, the defaults containerd runs on spelt as a file
    (:func:`native_config`), which the plan then edits like any other. The plan still
    records the file as absent (`bases`), and a template or k0s node without its rendered
    file is refused: the distribution never started there."""
    top = profile.config_path
    if top in files:
        return files
    if profile.edits_top_level_file:
        return {**files, top: native_config(version)}
    if profile.edit_path(version) not in files:
        made_by = ("renders it from its template" if profile.edit_mode is EditMode.TEMPLATE
                   else "generates it from its drop-ins")
        raise ConfigError(top, f"file not found: {profile.title} {made_by} at every start, "
                          "so a node without it has not started it; capture the file where "
                          f"{profile.title} runs (`sudo cat {top}`), or plan from gpuplane's "
                          "model (no baselineFiles)")
    return files


def node_profile(profile: DistroProfile, files: Mapping[str, str]) -> DistroProfile:
    """The profile with what this node's launcher substitutes (MicroK8s: revision dirs,
    runc.v1 on cgroup v1, the native snapshotter on zfs), learned from its captured
    template and rendered file; the model's values where either is missing."""
    template, rendered = files.get(profile.template_path or ""), files.get(profile.config_path)
    if template is None or rendered is None:
        return profile
    return profile.learn_substitutions(template, rendered)


def assess(profile: DistroProfile, version: ContainerdVersion, options: PlanOptions,
           files: dict[str, str], baseline: dict[str, str] | None = None) -> NodeContainerdPlan:
    """Judge `files` written onto `baseline`: the node after gpuplane, after the operator's
    toolkit (modelled), and the rulebook's findings. Plans and policies both use this, so
    a plan and the files read back from a node command are judged the same way."""
    baseline = dict(baseline if baseline is not None else profile.baseline(version))
    profile = node_profile(profile, baseline)
    top = profile.config_path
    # A drop-in distribution's node without a top-level file runs on the defaults.
    missing_ok = profile.edits_top_level_file
    after = rendered_layout({**baseline, **files}, profile, version,
                            detected_binaries(profile, options))
    written = effective_config(top, MemoryFiles(after), version, missing_ok=missing_ok)
    before = effective_config(top, MemoryFiles(rendered_layout(baseline, profile, version)),
                              version, missing_ok=missing_ok)
    toolkit_env: list[dict[str, str]] = []
    toolkit_files: dict[str, str] = {}
    losses: list[Finding] = []
    blocker: str | None = None
    if options.toolkit is ToolkitMode.OPERATOR:
        toolkit_env = toolkit_env_for(profile, version, options)
    if options.toolkit_configures_runtime:
        env = installer_env(toolkit_env, options)
        node = Node(version, (profile.containerd_binary,))
        blocker = toolkit_blocker(after, env, options.installer, node)
        toolkit_files = {} if blocker else toolkit_writes(after, env, options.installer, node)
        source = (config_sources(env) or [env["CONTAINERD_CONFIG"]])[0]
        written_layout = after
        after = rendered_layout({**after, **toolkit_files}, profile, version,
                                detected_binaries(profile, options, after_toolkit=True))
        unmanaged = (check_distro_unmanaged(
            top, written_layout.get(top), toolkit_files.get(top), k0s_render.MARKER,
            profile.title, where=_where(profile)) if profile.generates_from_dropins else [])
        losses = [*unmanaged, *check_toolkit_run(blocker, _where(profile)),
                  *check_toolkit_source_version(source, written_layout.get(source)),
                  *check_toolkit_losses(_merged(top, written_layout, version),
                                        _merged(top, after, version), where=_where(profile),
                                        origins=_origins(top, written_layout, version))]
    # NRI plugin mode: no nvidia runtime in containerd, the plugin injects the devices.
    expected = frozenset() if options.toolkit is ToolkitMode.NONE or options.nri \
        else {options.runtime_name}
    effective = effective_config(top, MemoryFiles(after), version, missing_ok=missing_ok)
    facts = ContainerdFacts(
        effective=effective,
        expected_runtimes=frozenset({own_default(before), *expected}),
        # In RKE2's/K3s's detected mode the toolkit's own edit lands in /etc/containerd,
        # which their containerd never reads, by design: only gpuplane's files must be read.
        expected_files=tuple(p for p in {**files, **({} if options.detected else toolkit_files)}
                             if p != top and not is_template(profile, p)
                             and read_directly(profile, p)),
        kubelet_cgroup_driver=options.kubelet_cgroup_driver,
        cdi_requested=options.cdi,
        nri_requested=options.nri,
        owner=profile.owned_by or None,
    )
    operator = options.toolkit_configures_runtime
    frozen = [] if operator else check_frozen_template(profile, files, baseline,
                                                       where=profile.title, version=version,
                                                       nri=options.nri)
    findings = judge_states(_states(options, files, facts, written, before, top, profile),
                            final=AFTER_TOOLKIT if operator else AFTER_GPUPLANE,
                            extra=[*(replace(f, state=AFTER_TOOLKIT) for f in losses),
                                   *(replace(f, state=AFTER_GPUPLANE) for f in frozen)])
    if blocker:
        # No prediction of the state after the toolkit: the refusal says why, and the
        # findings about that state would judge files the toolkit does not write.
        findings = [f for f in findings if f.state != AFTER_TOOLKIT
                    or (f.id == "FM03" and f.message.startswith(blocker))]
    return NodeContainerdPlan(profile, version, options, dict(files), toolkit_env,
                              toolkit_files, after, effective, written, before,
                              frozenset(expected), findings, baseline)


def _states(options: PlanOptions, files: dict[str, str], final: ContainerdFacts,
            written: EffectiveConfig, before: EffectiveConfig, top: str,
            profile: DistroProfile) -> list[tuple[str, ContainerdFacts]]:
    """The node's states in rollout order with what each must hold. Without the
    operator's toolkit the state after gpuplane is the final one; with it, gpuplane's files
    alone must already run (the agent restarts containerd on them) and must still run
    once the toolkit is uninstalled (the operator goes before the agent restores)."""
    # As found, the node is judged exactly as `gpuplane containerd check` judges its files
    # (gpuplane.rules.nodecheck): nothing is expected of it yet.
    as_found = ContainerdFacts(effective=before)
    if not options.toolkit_configures_runtime:
        return [(AS_FOUND, as_found), (AFTER_GPUPLANE, final)]
    mine = ContainerdFacts(
        effective=written, expected_runtimes=frozenset({own_default(before)}),
        expected_files=tuple(p for p in files if p != top and not is_template(profile, p)
                             and read_directly(profile, p)),
        kubelet_cgroup_driver=options.kubelet_cgroup_driver, owner=profile.owned_by or None)
    return [(AS_FOUND, as_found), (AFTER_GPUPLANE, mine), (AFTER_TOOLKIT, final),
            (AFTER_UNINSTALL, mine)]


def own_default(before: EffectiveConfig) -> str:
    """The runtime the node's pods run as found, which every later state must still
    define: its own default (EKS's and AKS's GPU nodes have no runc table), runc where the
    node as found does not start."""
    return before.default_runtime if before.starts else "runc"


def _nri_on(eff: EffectiveConfig) -> bool:
    """Whether containerd serves NRI with `eff` (a change of it needs a restart too)."""
    return nri_state(eff.plugins, eff.containerd_version, eff.disabled_plugins).enabled


def _merged(top: str, layout: dict[str, str], version: ContainerdVersion) -> dict[str, Any]:
    """Everything containerd would run with (every plugin, not only CRI), or {} when it
    would not start (the rulebook reports that on its own)."""
    try:
        merged = merge(load_config(top, MemoryFiles(layout), version))
    except ConfigError:
        return {}
    if version.major >= 2 and merged.version < 3:
        # As 2.x runs it (and prints it): a version-2 CRI table's keys in the v3 plugins,
        # so that a toolkit writing the dump back as version 3 loses nothing by the move.
        migrate_v2_cri(merged.plugins, version)
    return {"version": merged.version, "plugins": merged.plugins}


def _origins(top: str, layout: dict[str, str],
             version: ContainerdVersion) -> list[tuple[str, dict[str, Any]]]:
    """Each file containerd reads, with its own data, in merge order."""
    try:
        return [(f.path, f.data) for f in load_config(top, MemoryFiles(layout), version).files]
    except ConfigError:
        return []


def _where(profile: DistroProfile) -> str:
    return f"{profile.title}: {profile.config_path} after the GPU Operator's toolkit"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _toolkit_dropin_dir(profile: DistroProfile, options: PlanOptions) -> str | None:
    """The template distribution's own dir for the toolkit's drop-in, when the operator's
    toolkit writes one."""
    if options.toolkit is ToolkitMode.OPERATOR and options.toolkit_dropin:
        return profile.toolkit_dir
    return None


__all__ = ["NodeContainerdPlan", "PlanOptions", "ToolkitMode", "assess", "plan_node",
           "rendered_layout",
           "toolkit_env_for"]
