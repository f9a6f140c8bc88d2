"""gpuplane's NRI drop-in: where the GPU Operator runs in NRI plugin mode
(`gpuplane:gpuOperator.nri`) and the node's merged containerd config has NRI off (1.7's
default), the file that switches it on, in each distribution's own way: a drop-in where
containerd reads a plain config (kubeadm) or k0s generates it from its drop-ins; the
template where RKE2, K3s or MicroK8s render it. Nothing else changes: in that mode the
toolkit writes no runtime (gpuplane.toolkit.options.PlanOptions.toolkit_configures_runtime).

tests/real/test_nri_dump.py holds the drop-in against real containerd 1.7 and 2.x
`config dump`."""

from __future__ import annotations

import posixpath

import tomlkit
import tomlkit.exceptions

from gpuplane.containerd.effective import effective_config
from gpuplane.containerd.errors import ConfigError
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.nri import NRI_PLUGIN, nri_state, nri_table
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import DistroProfile
from gpuplane.plan.layout import rendered_layout

NRI_DROPIN = "40-gpuplane-nri.toml"


def nri_dropin_path(profile: DistroProfile) -> str:
    assert profile.dropin_dir
    return posixpath.join(profile.dropin_dir, NRI_DROPIN)


def nri_dropin(layout: dict[str, str], top: str, version: ContainerdVersion) -> str | None:
    """The drop-in that switches NRI on over `layout`, or None where NRI is already on
    (or the line has no NRI, 1.6: FM27 says so; no file can add it)."""
    eff = effective_config(top, MemoryFiles(layout), version, missing_ok=True)
    state = nri_state(eff.plugins, version, eff.disabled_plugins)
    if state.enabled or version < ContainerdVersion(1, 7) \
            or NRI_PLUGIN in eff.disabled_plugins:
        return None
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Written by gpuplane: NRI on for the GPU Operator's NRI plugin. "
                            "Do not edit;"))
    doc.add(tomlkit.comment("change the stack config and run `pulumi up` instead."))
    doc["version"] = version.max_config_version
    doc["plugins"] = {NRI_PLUGIN: nri_table(eff.plugins, version)}
    return tomlkit.dumps(doc)


def nri_rendered_off(layout: dict[str, str], profile: DistroProfile,
                     version: ContainerdVersion) -> bool:
    """Whether containerd runs with NRI off on a node whose files are `layout`, as the
    distribution renders (RKE2/K3s/MicroK8s) or generates (k0s) the config it reads, and a
    file can switch it on: not on 1.6 (no NRI plugin) nor where `disabled_plugins` names it
    (the node's own choice; FM27 says so)."""
    return _rendered_nri(layout, profile, version) is False


def _rendered_nri(layout: dict[str, str], profile: DistroProfile,
                  version: ContainerdVersion) -> bool | None:
    """NRI in the config rendered from `layout`: None where no file can change it (1.6,
    `disabled_plugins`) or containerd would not load it (the rulebook says why)."""
    top = profile.config_path
    rendered = rendered_layout(layout, profile, version)
    if top not in rendered or version < ContainerdVersion(1, 7):
        return None
    try:
        eff = effective_config(top, MemoryFiles(rendered), version)
    except ConfigError:
        return None
    if NRI_PLUGIN in eff.disabled_plugins:
        return None
    return nri_state(eff.plugins, version, eff.disabled_plugins).enabled


def nri_template(profile: DistroProfile, version: ContainerdVersion,
                 layout: dict[str, str]) -> dict[str, str]:
    """Template distributions (RKE2, K3s, MicroK8s): the template gpuplane writes so that
    the config they render has NRI on, or {} where it is on already (or no file can).

    - RKE2/K3s with no template of the node's own, or one extending their base
      (`{{ template "base" . }}`): the NRI table after the base. Their built-in template
      renders no NRI table (gpuplane.distros.rancher_render), so the table is defined
      once; where the template's own text after the base holds it, `disable` is set
      there instead. Where neither gives valid TOML (the rendered base holds the table
      too), a drop-in where the rendered config imports their drop-in dir (k3s-io/k3s PR
      #13680), else the whole rendered config is the template, as for runtimes (FM04).
    - A whole template (MicroK8s's `containerd-template.toml`, or a node's own on
      RKE2/K3s): `disable = false` set in its NRI table, added where it has none.

    On containerd 2.x with only a version-2 `config.toml.tmpl` (RKE2/K3s render it as
    version 2), gpuplane writes nothing: the version-3 template it edits would replace the
    node's own; FM27 then names the file."""
    if not nri_rendered_off(layout, profile, version):
        return {}
    target = profile.edit_path(version)
    if profile.read_template(version, layout) not in (None, target):
        return {}
    own = layout.get(target)
    top = profile.config_path
    rendered = rendered_layout(layout, profile, version)
    if profile.detects_nvidia_runtime and (own is None or rancher_render.extends_base(own)):
        text = own if own is not None else rancher_render.BASE + "\n"
        base = rancher_render.base_of(layout[top], own) if own is not None else layout[top]
        for candidate in (text.rstrip("\n") + "\n\n" + _NRI_APPENDED, _in_tail(text)):
            if candidate is not None and rancher_render.loads_ok(
                    rancher_render.render(candidate, base)) is None \
                    and _renders_on(profile, version, {**layout, target: candidate}):
                return {target: candidate}
        dropins = rancher_render.imported_dropin_dir(rendered[top], target)
        dropin = nri_dropin(rendered, top, version) if dropins else None
        if dropins and dropin:
            return {posixpath.join(dropins, NRI_DROPIN): dropin}
        whole = _set_nri_on(rendered[top])
    else:
        whole = _set_nri_on(own if own is not None else rendered[top])
    return {target: whole} if whole is not None else {}


def _renders_on(profile: DistroProfile, version: ContainerdVersion,
                layout: dict[str, str]) -> bool:
    return _rendered_nri(layout, profile, version) is True


def _set_nri_on(text: str) -> str | None:
    """`text` (a whole config, or a template that is TOML) with `disable = false` in its
    NRI table, comments and layout kept; None where `text` is no TOML (template actions)."""
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError:
        return None
    plugins = doc.setdefault("plugins", tomlkit.table(is_super_table=True))
    table = plugins.setdefault(NRI_PLUGIN, tomlkit.table())
    table["disable"] = False
    return tomlkit.dumps(doc)


def _in_tail(template: str) -> str | None:
    """A base-extending template with `disable = false` set in the NRI table its own text
    after the base holds, or None where that text is no TOML of its own."""
    head, base, tail = rancher_render.split_base(template)
    edited = _set_nri_on(tail)
    return None if edited is None else head + base + edited


def _appended() -> str:
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Added by gpuplane: NRI on for the GPU Operator's NRI plugin; "
                            "do not edit."))
    plugins = tomlkit.table(is_super_table=True)
    table = tomlkit.table()
    table["disable"] = False
    plugins[NRI_PLUGIN] = table
    doc["plugins"] = plugins
    return tomlkit.dumps(doc)


_NRI_APPENDED = _appended()


__all__ = ["NRI_DROPIN", "nri_dropin", "nri_dropin_path", "nri_rendered_off", "nri_template"]
