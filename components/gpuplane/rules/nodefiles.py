"""FM04: files written on a template distribution that the distribution regenerates or
never renders.

RKE2, K3s and MicroK8s render their containerd config from a template at every start;
the generated file is overwritten, and the template that counts depends on the containerd
line (RKE2/K3s read config-v3.toml.tmpl with containerd 2.x, config.toml.tmpl with 1.x).
"""

from __future__ import annotations

import posixpath
from collections.abc import Container, Iterable

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.distros.profiles import DistroProfile, EditMode
from gpuplane.rules._shared import at, finding

_STACK_KEYS = "gpuplane:cluster.distro, gpuplane:cluster.containerdVersion"
# The stack key of a user's toolkit.env (a Helm list: it replaces gpuplane's whole env).
USER_ENV = "gpuplane:gpuOperator.values.toolkit.env"


def check_node_files(profile: DistroProfile, written: Iterable[str], *, where: str,
                     version: ContainerdVersion, present: Container[str] = (),
                     env_name: str = "") -> list[Finding]:
    """FM04 for each path in `written` (node paths something means to change); `present`:
    the files the node has (a version-3 template there makes RKE2/K3s on 2.x ignore the
    version-2 one); `env_name`: the toolkit env name that points there, if one does (the
    fix then removes it, so that gpuplane's own env applies)."""
    if profile.edit_mode is not EditMode.TEMPLATE:
        return []
    target = profile.edit_path(version)
    templates = {p for p in (profile.template_path, profile.template_v3_path) if p}
    fallback = profile.template_fallback(version)
    out = []
    for path in dict.fromkeys(written):
        norm = posixpath.normpath(path)
        if norm == profile.config_path:
            problem = (f"{path} is the config {profile.title} generates from {target} at "
                       "every start: the change is lost at the next restart")
        elif norm == fallback and profile.template_v3_path not in present:
            # k3s-io/k3s pkg/agent/containerd/config.go `templateGenerations`: v3, then v2.
            problem = (f"{path} is read by {profile.title} with containerd {version} while "
                       f"{target} is absent: it is rendered, as version 2, in place of "
                       f"{profile.title}'s built-in template, so every setting that template "
                       "renders and the file does not hold (sandbox image, CNI paths, "
                       f"registries, the runtimes {profile.title} detects) is gone; a "
                       f"template created by the toolkit holds only `version` and `imports`")
        elif norm in templates and norm != target:
            problem = (f"{path} is not the template {profile.title} renders with containerd "
                       f"{version} (that is {target}): the change never reaches containerd")
        else:
            continue
        out.append(finding(
            "FM04", f"{problem}.",
            at(where, path, _STACK_KEYS),
            _fix(profile, version, target, env_name),
            changes=((USER_ENV, None),) if env_name else (),
        ))
    return out


def _fix(profile: DistroProfile, version: ContainerdVersion, target: str,
         env_name: str) -> str:
    """FM04's fix: let gpuplane choose the file. Pointing the toolkit at the template by
    hand (CONTAINERD_CONFIG=<template>, RUNTIME_CONFIG_SOURCE=file=<config>) is no fix: the
    toolkit then writes a template of its own holding only `version` and `imports`, which
    replaces the built-in one (FM05; gpu-operator#992)."""
    keys = (f"`gpuplane:cluster.distro: {profile.name}` and "
            f"`gpuplane:cluster.containerdVersion: \"{version}\"` (set them to what the nodes "
            "run)")
    if env_name:
        return (f"Remove toolkit.env (its {env_name}) from `gpuplane:gpuOperator.values`, "
                "where a list replaces the whole env gpuplane renders: gpuplane renders the "
                f"toolkit's env from {keys}. For a runtime in "
                f"{target} gpuplane writes the whole template first "
                "(`gpuplane:gpuOperator.runtimeSetup: template`, with node access); "
                f"otherwise {profile.title} detects the toolkit's runtime itself "
                "(`runtimeSetup: detected`, toolkit.env CONTAINERD_SOCKET only). Do not "
                "point the toolkit at the template by hand: it creates one holding only "
                "`version` and `imports`, which replaces the built-in template.")
    return (f"Change {target} instead: gpuplane picks it from {keys}.")


def check_frozen_template(profile: DistroProfile, files: dict[str, str],
                          baseline: dict[str, str], *, where: str,
                          version: ContainerdVersion, nri: bool = False) -> list[Finding]:
    """FM04 (warning): gpuplane had to write RKE2's/K3s's whole rendered config as the
    template, because what it adds redefines a table their base template renders. The
    distribution then renders that copy for good: no runtime it detects later, and its own
    settings (pause image, registries, CNI paths) stay as they are today after upgrades."""
    from gpuplane.distros import rancher_render

    target = profile.edit_path(version) if profile.edit_mode is EditMode.TEMPLATE else ""
    if (not profile.detects_nvidia_runtime or target not in files or target in baseline
            or rancher_render.extends_base(files[target])):
        return []
    dropins = rancher_render.dropin_dir(target, 3 if version.major >= 2 else 2)
    if nri:   # NRI plugin mode: the table is NRI's (gpuplane.plan.nri), no runtime is added
        return [finding(
            "FM04",
            f"{target} is written as a copy of the config {profile.title} renders now: "
            "the NRI table gpuplane sets `disable = false` in is one "
            f"{profile.title}'s base template renders, which containerd refuses twice after "
            '`{{ template "base" . }}`. From now on the copy is rendered instead of the '
            f"built-in template: {profile.title} keeps today's pause image, registries and "
            "CNI paths after an upgrade.",
            at(where, target, "gpuplane:gpuOperator.nri"),
            f"Run a {profile.title} release whose rendered config imports {dropins}/*.toml "
            "(k3s-io/k3s PR #13680), where gpuplane writes a drop-in instead, or one "
            "whose containerd has NRI on (2.1, 2.2).",
            severity=Severity.WARNING,
        )]
    return [finding(
        "FM04",
        f"{target} is written as a copy of the config {profile.title} renders now: what "
        "gpuplane adds (the default runtime, or runtime options) redefines a table "
        f"{profile.title}'s base template renders, which containerd refuses after "
        '`{{ template "base" . }}`. From now on the copy is rendered instead of the '
        f"built-in template: {profile.title} adds no runtime it detects later, and keeps "
        "today's pause image, registries and CNI paths after an upgrade.",
        at(where, target, "gpuplane:runtime.nvidiaDefault"),
        f"Run a {profile.title} release whose rendered config imports {dropins}/*.toml "
        "(k3s-io/k3s PR #13680), where gpuplane writes a drop-in instead; or leave "
        f"`gpuplane:runtime.nvidiaDefault` false and set {profile.title}'s own "
        "`default-runtime: nvidia` in its config.yaml.",
        severity=Severity.WARNING,
    )]
