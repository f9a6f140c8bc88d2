"""What containerd reads from a node's files: the config a template distribution renders
at start (K3s/RKE2 with the runtimes they detect, MicroK8s), what k0s generates from its
drop-ins, and which of gpuplane's files containerd itself reads."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import k0s_render, rancher_render
from gpuplane.distros.profiles import DistroProfile, EditMode
from gpuplane.plan.edits import GPUPLANE_DROPIN


def renders_dropins(profile: DistroProfile, baseline: Mapping[str, str]) -> bool:
    """Whether the distribution merges gpuplane's drop-in into the config containerd reads
    itself, at its restart (k0s while it manages its top-level file)."""
    return profile.generates_from_dropins and k0s_render.is_managed(
        baseline.get(profile.config_path))


def read_directly(profile: DistroProfile, path: str) -> bool:
    """Whether containerd itself must read `path`; k0s folds its drop-ins into the file it
    generates instead (what they set is checked through the runtimes)."""
    return not (profile.generates_from_dropins and profile.dropin_dir is not None
                and posixpath.dirname(path) == profile.dropin_dir)


def is_template(profile: DistroProfile, path: str) -> bool:
    return path in (profile.template_path, profile.template_v3_path)


def dropin_path(profile: DistroProfile) -> str:
    assert profile.dropin_dir
    return posixpath.join(profile.dropin_dir, GPUPLANE_DROPIN)


def rendered_layout(layout: dict[str, str], profile: DistroProfile,
                    version: ContainerdVersion,
                    detected: tuple[str, ...] = ()) -> dict[str, str]:
    """Template distributions regenerate config.toml from the template at start; RKE2 and
    K3s also add the runtimes they detect among `detected` (binaries on the node) wherever
    their built-in template renders, alone or as a user template's base
    (gpuplane.distros.rancher_render)."""
    if profile.edit_mode is EditMode.TEMPLATE:
        # RKE2/K3s on 2.x fall back to config.toml.tmpl when config-v3.toml.tmpl is absent.
        template = profile.read_template(version, layout) or profile.edit_path(version)
        top = profile.config_path
        own = layout.get(template)
        if profile.detects_nvidia_runtime and (own is None or rancher_render.extends_base(own)):
            base = layout.get(top)
            if base is None:
                return layout
            if own is not None:
                base = rancher_render.base_of(base, own)
            base = rancher_render.detect(base, detected)
            return {**layout, top: base if own is None else rancher_render.render(own, base)}
        if own is not None:
            return {**layout, top: profile.render(own)}
    if profile.generates_from_dropins:
        return k0s_render.render(layout, profile.config_path)
    return layout


__all__ = ["dropin_path", "is_template", "read_directly", "rendered_layout", "renders_dropins"]
