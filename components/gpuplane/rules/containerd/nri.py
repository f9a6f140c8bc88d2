"""FM27 on one node's files: the GPU Operator's NRI plugin asked for where the merged
containerd config has NRI off (1.7's default) or containerd has none (1.6).

What containerd does by default is gpuplane.containerd.nri's model, held against each
line's real `config dump` (tests/real/test_nri_dump.py)."""

from __future__ import annotations

from gpuplane.containerd.nri import NRI_PLUGIN, nri_state
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import Analysis, ContainerdFacts, analyse, at


def check_nri_enabled(facts: ContainerdFacts) -> list[Finding]:
    """FM27: NRI off (or absent) in the merged config of a node that needs it."""
    return fm27(analyse(facts))


def fm27(a: Analysis) -> list[Finding]:
    if not a.facts.nri_requested:
        return []
    eff = a.eff
    state = nri_state(eff.plugins, eff.containerd_version, eff.disabled_plugins)
    if state.enabled:
        return []
    setters = [f for f in eff.files if "disable" in (f.plugins.get(NRI_PLUGIN) or {})]
    where = at(setters[-1], ("plugins", NRI_PLUGIN, "disable")) if setters \
        else (eff.files[0].path if eff.files else "containerd config")
    if eff.containerd_version.major == 1 and eff.containerd_version.minor < 7:
        fix = ("Upgrade containerd to 1.7.30+, 2.1 or 2.2, or leave the NRI plugin off "
               "(cdi.nriPluginEnabled=false).")
    else:
        fix = (f'Set `disable = false` under [plugins."{NRI_PLUGIN}"] in a file containerd '
               "reads (on 1.x in the last file holding that table: it replaces earlier "
               "ones whole; on RKE2/K3s in config.toml.tmpl after {{ template \"base\" . }}"
               ", on MicroK8s in containerd-template.toml, on k0s in a "
               "/etc/k0s/containerd.d drop-in) and restart containerd, or leave the NRI "
               "plugin off (cdi.nriPluginEnabled=false). gpuplane writes that file itself "
               "where it edits the node's files.")
    return [Finding(
        "FM27", Severity.ERROR,
        f"the GPU Operator's NRI plugin is asked for, but NRI is off on this node "
        f"({state.reason}): the toolkit's plugin cannot register, the operator's own pods "
        "(device plugin, GFD, DCGM) get no GPU, and no runtime was written to fall back on.",
        a.where(where), fix)]


__all__ = ["check_nri_enabled", "fm27"]
