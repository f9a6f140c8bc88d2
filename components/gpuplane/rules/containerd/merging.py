"""FM02 and FM03: settings lost while containerd merges files (whole-table replacement
on 1.x, version mixing on any line), refused config versions, runtimes without a type."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuplane.containerd.effective import EffectiveConfig, file_cri
from gpuplane.containerd.load import LoadedFile
from gpuplane.containerd.versions import CRI_V2, CRI_V3_RUNTIME, RUNC_V2, ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import (
    KEY_VERSION,
    PLUGIN_KEY,
    VERSION_REFUSAL,
    Analysis,
    ContainerdFacts,
    Loss,
    analyse,
    at,
    by_file,
    has_default,
    items,
    lost_text,
    refusal_note,
    runtime_at,
    verb,
)

# ---------------------------------------------------------------- FM02: replaced

def check_replaced_cri_table(facts: ContainerdFacts) -> list[Finding]:
    """FM02: on containerd < 2.1 a later file's CRI table replaced what earlier ones set."""
    return fm02(analyse(facts))


def fm02(a: Analysis) -> list[Finding]:
    replaced = [x for x in a.losses if a.rule_of(x) == "FM02"]
    losses = [x for x in replaced if x.kind != "setting"]
    settings = [x for x in replaced if x.kind == "setting"]
    if losses or a.builtin_runc_replaced:
        # One replacement, one finding: the other settings it drops are named there too.
        return [replace(f, message=f.message + _also(settings))
                for f in _fm02_runtimes(a, losses)]
    return _fm02_settings(a, settings)


def _also(settings: list[Loss]) -> str:
    if not settings:
        return ""
    dropped = "; ".join(f"{items(group)} (set in {path})" for path, group in by_file(settings))
    return (f" It also drops these CRI settings, for which containerd then uses its "
            f"built-in defaults: {dropped}.")


# Settings whose loss breaks every pod: containerd's built-in CNI dirs differ between
# builds (measured: Debian's 1.6.20 dumps bin_dir /opt/cni/bin, its 1.7.24 /usr/lib/cni),
# so pod networking may stop. Others (sandbox image, registry mirrors and auth, ...) fall
# back to defaults that still work where the default registry is reachable.
_BREAKS_PODS = ("cni.", "sandbox_image", "registry.")


def _fm02_settings(a: Analysis, losses: list[Loss]) -> list[Finding]:
    """The CRI settings other than runtimes a later file's table silently drops."""
    if not losses:
        return []
    eff = a.eff
    key, line = eff.cri_key, eff.containerd_version
    winner = next((f for f in reversed(eff.files) if key in f.plugins), eff.files[-1])
    dropped = [f"{items(group)} (set in {path})" for path, group in by_file(losses)]
    breaking = [x for x in losses if (x.option or "").startswith(_BREAKS_PODS)]
    severity = Severity.ERROR if breaking else Severity.WARNING
    sources = sorted({x.source.path for x in losses} - {winner.path})
    return [Finding(
        "FM02", severity,
        f"containerd {line} replaces the whole `plugins.\"{key}\"` table with each file that "
        f"has one, and {winner.path} is read last without these CRI settings: it drops "
        f"{'; '.join(dropped)}. containerd runs with its built-in defaults instead"
        + (" (CNI dirs: pod networking may stop)." if breaking else "."),
        a.where(at(winner, ("plugins", key))),
        f"On containerd < 2.1 keep the whole CRI table in one file: copy these settings "
        f"from {', '.join(sources) or 'the earlier files'} into {winner.path}; or upgrade "
        "containerd to 2.1 or later, which deep-merges drop-ins.")]


def _fm02_runtimes(a: Analysis, losses: list[Loss]) -> list[Finding]:
    eff = a.eff
    key, line = eff.cri_key, eff.containerd_version
    winner = next((f for f in reversed(eff.files) if key in f.plugins), eff.files[-1])
    dropped = [f"{items(group)} (set in {path})" for path, group in by_file(losses)]
    if a.builtin_runc_replaced:
        dropped.append("the built-in runc runtime (its `runtimes` table replaces containerd's"
                       " own, which held runc)")
    holders = [f for f in eff.files if key in f.plugins]
    last = "is read last" if len(holders) > 1 else "is the only file with one"
    message = (
        f"containerd {line} replaces the whole `plugins.\"{key}\"` table with each file that "
        f"has one, and {winner.path} {last}: it drops {'; '.join(dropped)}."
        f"{refusal_note(a, 'FM02')}"
    )
    sources = sorted({x.source.path for x in losses} - {winner.path})
    what = (f"what {', '.join(sources)} {verb(sources, 'defines', 'define')}" if sources
            else "a runc runtime")
    fix = (
        f"On containerd < 2.1 keep the whole CRI table in one drop-in: copy {what} into "
        f"{winner.path}, so it holds default_runtime_name, runc and nvidia, each with its "
        "options; or upgrade containerd to 2.1 or later, which deep-merges drop-ins."
    )
    return [Finding("FM02", Severity.ERROR, message,
                    a.where(at(winner, ("plugins", key))), fix)]


# ---------------------------------------------------------------- FM03: versions

def check_config_versions(facts: ContainerdFacts) -> list[Finding]:
    """FM03: config versions containerd refuses or mixes away; runtimes without a type."""
    return fm03(analyse(facts))


def fm03(a: Analysis) -> list[Finding]:
    eff = a.eff
    line = eff.containerd_version
    pending = [x for x in a.losses if a.rule_of(x) == "FM03"]
    note = refusal_note(a, "FM03")
    out: list[Finding] = []

    def take(files: Iterable[LoadedFile]) -> list[Loss]:
        paths = {f.path for f in files}
        taken = [x for x in pending if x.source.path in paths]
        for x in taken:
            pending.remove(x)
        return taken

    for refusal in a.refusals:
        if VERSION_REFUSAL.match(refusal):
            culprits = [f for f in eff.files if f.version == eff.config_version] or eff.files
            src = culprits[-1]
            lost = take(culprits)
            target = "version 2 (or upgrade containerd to 2.x)" if line.major < 2 else "3"
            out.append(Finding(
                "FM03", Severity.ERROR,
                f"{src.path} sets `version = {src.version}`, which containerd {line} does not "
                f"accept: it refuses to start ({refusal}).{lost_text(lost)}"
                f"{note if has_default(lost, eff) else ''}",
                a.where(at(src, ("version",))),
                f"Write {', '.join(f.path for f in culprits)} as config {target}.",
            ))
            continue
        match = PLUGIN_KEY.match(refusal)
        if match:
            key = match["key"]
            culprits = [f for f in eff.files if key in f.plugins] or [eff.files[0]]
            lost = take(culprits)
            decider = _decider(eff)
            out.append(Finding(
                "FM03", Severity.ERROR,
                f"{', '.join(f.path for f in culprits)} {verb(culprits, 'uses', 'use')} the "
                f"version-1 plugin name `plugins.{key}` in a version-{eff.config_version} "
                f"configuration ({decider}): containerd {line} refuses to start ({refusal})."
                f"{lost_text(lost)}{note if has_default(lost, eff) else ''}",
                a.where(at(culprits[0], ("plugins", key))),
                f"Rewrite {', '.join(f.path for f in culprits)} as version 2: `version = 2` "
                f'and full plugin names (`plugins.cri` becomes `plugins."{CRI_V2}"`).',
            ))
    for _, group in by_file(pending):
        src = group[0].source
        out.append(Finding(
            "FM03", Severity.ERROR,
            _mixing_message(eff, src, group) + (note if has_default(group, eff) else ""),
            a.where(at(src, group[0].dotted)),
            _mixing_fix(eff, src, group[0].key),
        ))
    for ambiguity in eff.ambiguities:
        path = ambiguity.split(":", 1)[0]
        out.append(Finding(
            "FM03", Severity.ERROR,
            f"{ambiguity}: containerd {line} renames version-1 plugin names while walking an "
            "unordered map, so which of the two tables it runs with changes from one start "
            "to the next (both outcomes seen with the real 2.0 and 2.2).",
            a.where(path),
            f"Write {path} as version 2 (`version = 2`, full plugin names only); if the GPU "
            "Operator's toolkit wrote it, give the file it reads a `version` key first.",
        ))
    out += _newer_than_root(a, out)
    lost_types = {x.runtime for x in a.losses if x.kind == "runtime_type"}
    for name, view in sorted(eff.runtimes.items()):
        if view.runtime_type is None and name not in lost_types:
            where = runtime_at(a, name)
            out.append(Finding(
                "FM03", Severity.ERROR,
                f"runtime {name!r} has no runtime_type: containerd cannot choose a shim for "
                "it (2.3 refuses the config with `container.Runtime.Name must be set`).",
                a.where(where),
                f'Add runtime_type = "{RUNC_V2}" to the {name} runtime table.',
            ))
    return out


# containerd 2.3 refuses an imported file whose `version` is above the top-level file's
# (NVIDIA/aicr#1688, AKS Ubuntu 24.04 images: containerd 2.3.x). Not measured here: the
# suite runs 2.0-2.2, which accept it (tests/real/test_platform_rules.py holds that).
STRICT_IMPORT_VERSIONS = ContainerdVersion(2, 3)


def _newer_than_root(a: Analysis, reported: list[Finding]) -> list[Finding]:
    """FM03-dropin-newer: a drop-in in a newer config version than the root's, which
    this line accepts (a version it refuses, or a mix that loses settings, is reported
    above, once)."""
    eff = a.eff
    line = eff.containerd_version
    root = eff.files[0]
    if root.version < 2 or not line.deep_merges:
        return []   # version 1 roots and 1.x's version limits are the checks above
    out = []
    for f in eff.files[1:]:
        where = a.where(at(f, ("version",)))
        if f.version <= root.version or f.version > line.max_config_version \
                or any(f.path in r.where or f.path in r.message for r in reported):
            continue
        strict = line >= STRICT_IMPORT_VERSIONS
        out.append(Finding(
            "FM03", Severity.ERROR if strict else Severity.WARNING,
            f"{f.path} says `version = {f.version}`, newer than {root.path} (`version = "
            f"{root.version}`), which imports it: containerd 2.3 refuses an imported file "
            "newer than its root and exits (AKS nodes NotReady, NVIDIA/aicr#1688)"
            + ("." if strict else f"; containerd {line} still accepts it, so the node breaks "
               "when containerd is upgraded."),
            where,
            f"Write {f.path} as version {root.version} like {root.path} (or {root.path} as "
            f"version {f.version}); for the GPU Operator's toolkit set RUNTIME_CONFIG_SOURCE="
            f"file={root.path} so its drop-in copies the root's version.",
        ))
    return out


def _mixing_message(eff: EffectiveConfig, src: LoadedFile, losses: list[Loss]) -> str:
    line, merged = eff.containerd_version, eff.config_version
    own = f"version {src.version}" if src.version else "version 1 (no `version` key)"
    lost = items(losses)
    key = losses[0].key
    if key != file_cri(src).key:
        return (f"{src.path} is {own} but names the CRI plugin `plugins.\"{key}\"`, the "
                f"version-{KEY_VERSION.get(key, 3)} name: containerd {line} reads the merged "
                f"config "
                f"as version {merged or 1} ({_decider(eff)}) and ignores that table, losing "
                f"{lost}.")
    if not line.deep_merges:
        if src.version >= 3:
            return (f"containerd {line} does not know config version 3: it reads "
                    f"{src.path}'s `plugins.\"{CRI_V3_RUNTIME}\"` table as an unknown plugin"
                    f" and ignores it, losing {lost}.")
        return (f"{src.path} is {own}, but containerd {line} reads the merged config as "
                f"version {merged or 1} ({_decider(eff)}) and takes CRI settings from "
                f"`plugins.\"{eff.cri_key}\"`: {src.path}'s `plugins.\"{losses[0].key}\"` "
                f"table is ignored, losing {lost}.")
    v3 = [f.path for f in eff.files if f.version >= 3 or _v3_names(f)]
    if merged >= 3:
        return (f"containerd {line} settles on the last file's config version: the merged "
                f"config is version 3 ({_decider(eff)}), and a version-3 config ignores every "
                f"version-2 CRI section (`plugins.\"{CRI_V2}\"`). {src.path} is {own}, so its "
                f"{lost} {'is' if len(losses) == 1 else 'are'} ignored.")
    return (f"the merged config ends at version {merged} ({_decider(eff)}), so containerd "
            f"{line} migrates the version-2 CRI section into `plugins.\"{CRI_V3_RUNTIME}\"`,"
            f" keeping what {', '.join(v3) or 'no file'} already set"
            f"{'s' if len(v3) == 1 else ''} there under the version-3 names: {src.path} is "
            f"{own} and its {lost} {'is' if len(losses) == 1 else 'are'} dropped in the "
            "migration.")


def _mixing_fix(eff: EffectiveConfig, src: LoadedFile, key: str) -> str:
    top, path = eff.files[0], src.path
    if key != file_cri(src).key:
        return (f"Set `version = {KEY_VERSION.get(key, 3)}` in {path} to match the plugin names it "
                "uses, and write every file containerd reads in one config version.")
    if not eff.containerd_version.deep_merges:
        return (f"Write {path} in the top-level's version (version 2, CRI table "
                f'`plugins."{CRI_V2}"`), like every file containerd 1.x reads.')
    if top.version >= 3:
        return (f"Rewrite {path} as version 3 (`version = 3`, CRI runtimes under "
                f'`plugins."{CRI_V3_RUNTIME}"`), the version of {top.path}.')
    named = [f.path for f in eff.files if f is not src and f.version < 3 and _v3_names(f)]
    if named:
        # AKS's AgentBaker root: version 2 spelt with the version-3 names, whose table the
        # migration keeps over any version-2 drop-in's (measured, real containerd 2.0-2.2).
        return (f"{', '.join(named)} {verb(named, 'is', 'are')} version 2 but "
                f'{verb(named, "sets", "set")} the CRI runtimes under the version-3 name '
                f'`plugins."{CRI_V3_RUNTIME}"`, which the migration keeps: put {path}\'s '
                "runtimes under that name too, or leave them out where the node's own "
                "config already has the runtime they are for (a GPU image whose toolkit "
                "configures NVIDIA's runtime needs no second toolkit).")
    others = [f.path for f in eff.files if f.version >= 3]
    return (f"Use one config version in every file: make {', '.join(others) or path} "
            f"version 2 like {top.path}, or rewrite all files as version 3.")


def _v3_names(f: LoadedFile) -> bool:
    """A file below version 3 that names the version-3 CRI runtime plugin."""
    return f.version < 3 and CRI_V3_RUNTIME in f.plugins


def _decider(eff: EffectiveConfig) -> str:
    """Which file set the merged config version (the last one with a `version`)."""
    floor = 2 if eff.containerd_version.deep_merges else 1
    decider = next((f for f in reversed(eff.files) if f.version >= floor), None)
    if decider is None:
        if eff.containerd_version.deep_merges:
            return "no file sets version 2 or 3, so containerd 2.x assumes 3"
        return "no file sets a version"
    return f"{decider.path} says version {decider.version}"
