"""FM04: files written on a template distribution that the distribution regenerates or
never renders.

RKE2, K3s and MicroK8s render their containerd config from a template at every start;
the generated file is overwritten, and the template that counts depends on the containerd
line (RKE2/K3s read config-v3.toml.tmpl with containerd 2.x, config.toml.tmpl with 1.x).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.distros.profiles import DistroProfile, EditMode
from gpuplane.rules._shared import at, finding

_STACK_KEYS = "gpuplane:cluster.distro, gpuplane:cluster.containerdVersion"


def check_node_files(profile: DistroProfile, written: Iterable[str], *, where: str,
                     version: ContainerdVersion) -> list[Finding]:
    """FM04 for each path in `written` (node paths something means to change)."""
    if profile.edit_mode is not EditMode.TEMPLATE:
        return []
    target = profile.edit_path(version)
    templates = {p for p in (profile.template_path, profile.template_v3_path) if p}
    out = []
    for path in dict.fromkeys(written):
        norm = posixpath.normpath(path)
        if norm == profile.config_path:
            problem = (f"{path} is the config {profile.title} generates from {target} at "
                       "every start: the change is lost at the next restart")
        elif norm in templates and norm != target:
            problem = (f"{path} is not the template {profile.title} renders with containerd "
                       f"{version} (that is {target}): the change never reaches containerd")
        else:
            continue
        out.append(finding(
            "FM04", f"{problem}.",
            at(where, path, _STACK_KEYS),
            f"Change {target} instead: gpuplane picks it from `gpuplane:cluster.distro: "
            f"{profile.name}` and `gpuplane:cluster.containerdVersion: \"{version}\"` (set "
            "them to what the nodes run); without gpuplane point the toolkit there with "
            f"toolkit.env CONTAINERD_CONFIG={target} and "
            f"RUNTIME_CONFIG_SOURCE=file={profile.config_path}.",
        ))
    return out


def check_frozen_template(profile: DistroProfile, files: dict[str, str],
                          baseline: dict[str, str], *, where: str,
                          version: ContainerdVersion) -> list[Finding]:
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
