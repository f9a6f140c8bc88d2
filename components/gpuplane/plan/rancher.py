"""RKE2 and K3s: what gpuplane adds to what the distribution renders itself.

Both render containerd's config from a built-in template and detect NVIDIA runtime
binaries on the host; gpuplane builds on that rendering (a drop-in, or a template that
extends the base) and writes only what the rendering lacks
(gpuplane.distros.rancher_render models the rendering)."""

from __future__ import annotations

import posixpath
import tomllib

from gpuplane.containerd.effective import effective_config
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import DistroProfile
from gpuplane.plan.edits import GPUPLANE_DROPIN, apply_patch, cri_key, dropin
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.patch import cri_patch, unmet
from gpuplane.toolkit.options import PlanOptions, ToolkitMode


def extends_rancher_base(profile: DistroProfile, options: PlanOptions,
                          own: str | None) -> bool:
    """Whether gpuplane builds on RKE2's/K3s's own rendering (built-in template, runtime
    detection, drop-in dir) instead of writing a whole template: without the operator's
    toolkit (which edits a whole template itself), where the node has no template of its
    own or one extending the base."""
    return (profile.detects_nvidia_runtime and options.toolkit is not ToolkitMode.OPERATOR
            and (own is None or rancher_render.extends_base(own)))


def detected_binaries(profile: DistroProfile, options: PlanOptions,
                      after_toolkit: bool = False) -> tuple[str, ...]:
    """The runtime binaries RKE2/K3s find on a node gpuplane planned, in their search
    order: the host toolkit's; once the operator's toolkit has run (`after_toolkit`), the
    binaries it installed into /usr/local/nvidia/toolkit."""
    if not profile.detects_nvidia_runtime:
        return ()
    if options.toolkit is ToolkitMode.HOST:
        return rancher_render.HOST_TOOLKIT_BINARIES
    if options.toolkit is ToolkitMode.OPERATOR and after_toolkit:
        return rancher_render.OPERATOR_TOOLKIT_BINARIES
    return ()


def rancher_files(profile: DistroProfile, version: ContainerdVersion, options: PlanOptions,
                   baseline: dict[str, str]) -> dict[str, str]:
    """RKE2/K3s: only what their own rendering lacks once the host toolkit is detected.

    Nothing when the detected runtimes are all the plan needs and the node already runs
    them; else a drop-in where the rendered config imports K3s's drop-in dir; else a
    template extending the base; else (the addition redefines a table the base renders,
    which containerd refuses) the whole rendered config as the template, as before."""
    top, target = profile.config_path, profile.edit_path(version)
    detected = detected_binaries(profile, options)
    rendered = rendered_layout(baseline, profile, version, detected)
    patch = unmet(cri_patch(profile, version, options, rendered), rendered, top, version)
    now = effective_config(top, MemoryFiles(rendered_layout(baseline, profile, version)),
                           version)
    later = effective_config(top, MemoryFiles(rendered), version)
    if not patch and later.to_dict() == now.to_dict():
        return {}
    dropins = rancher_render.imported_dropin_dir(rendered[top], target)
    if dropins:
        return {posixpath.join(dropins, GPUPLANE_DROPIN): dropin(rendered, top, version,
                                                                   patch)}
    own = baseline.get(target)
    config_version = int(tomllib.loads(rendered[top]).get("version", 2))
    key = cri_key(config_version, version, set(tomllib.loads(rendered[top]).get("plugins", {})))
    text = own if own is not None else rancher_render.BASE + "\n"
    if patch:
        text = text.rstrip("\n") + "\n\n" + rancher_render.appended(
            patch, key, "Added by gpuplane to what the distribution renders; do not edit.")
    base = rancher_render.base_of(baseline.get(top, ""), own) if own else baseline.get(top, "")
    if rancher_render.loads_ok(rancher_render.render(
            text, rancher_render.detect(base, detected))) is None:
        return {target: text}
    # The whole config as the template (it renders no detected runtime): everything the
    # plan adds goes in, and a template of the node's own is kept as it renders now.
    source = rendered[top] if own is not None else baseline.get(top, "")
    return {target: apply_patch(source, cri_patch(profile, version, options, baseline), version)}


__all__ = ["detected_binaries", "extends_rancher_base", "rancher_files"]
