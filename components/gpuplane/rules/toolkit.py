"""The GPU Operator's toolkit container against the stack's intent: whether it runs (FM05,
FM01), its image flavour against the nodes' glibc (FM15), the containerd its env points at
(FM17, FM04 when that is a generated file) and whether it makes nvidia the default runtime
(FM11/FM13, FM09).

How the operator and the toolkit read `toolkit.env` (toolkit 1.17-1.20; the operator's
part per chart in gpuplane.toolkit.operator): the host config path is CONTAINERD_CONFIG,
else (chart >= v25.10) RUNTIME_CONFIG; the socket is CONTAINERD_SOCKET only (from v24.9 the
operator overwrites RUNTIME_SOCKET); the drop-in is RUNTIME_DROP_IN_CONFIG (toolkit >= 1.18,
chart >= v25.10); the config source is RUNTIME_CONFIG_SOURCE, default `command,file`;
set-as-default is NVIDIA_RUNTIME_SET_AS_DEFAULT before CONTAINERD_SET_AS_DEFAULT, default
true, and from chart v25.10 CDI mode sets the former to false unless toolkit.env sets it.
The default toolkit image is the chart's pin (an ubuntu20.04 flavour up to v25.3.x).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.distros.profiles import DistroProfile, EditMode, profile
from gpuplane.platforms.profiles import platform_profile
from gpuplane.rules._shared import finding, lookup, present
from gpuplane.rules.glibc import flavour_of, flavours_for, fmt, glibc_of
from gpuplane.rules.nodefiles import USER_ENV, check_node_files
from gpuplane.rules.opvalues import OperatorValues, containerd_version
from gpuplane.rules.pinning import split_ref
from gpuplane.rules.toolkit_version import toolkit_version
from gpuplane.toolkit.env import toolkit_env_for
from gpuplane.toolkit.installer import Installer
from gpuplane.toolkit.operator import (
    OPERATOR_DROPIN_FROM,
    chart_operator_env,
    known_toolkit_tag,
)
from gpuplane.toolkit.options import NEWEST_TOOLKIT, PlanOptions, ToolkitMode

DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SOCKET = "/run/containerd/containerd.sock"
DEFAULT_DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
DEFAULT_SOURCE = "command,file"
# toolkit.env names the operator takes each host path from, first set wins.
ENV_NAMES = {
    "CONTAINERD_CONFIG": ("CONTAINERD_CONFIG", "RUNTIME_CONFIG"),
    "CONTAINERD_SOCKET": ("CONTAINERD_SOCKET",),
    "RUNTIME_DROP_IN_CONFIG": ("RUNTIME_DROP_IN_CONFIG",),
}
ENV_DEFAULTS = {"CONTAINERD_CONFIG": DEFAULT_CONFIG, "CONTAINERD_SOCKET": DEFAULT_SOCKET,
                "RUNTIME_DROP_IN_CONFIG": DEFAULT_DROP_IN}
_BOOL = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}
_PATH_KEYS = "gpuplane:cluster.distro, gpuplane:cluster.containerdBaseDir"


def check_toolkit(ctx: OperatorValues) -> list[Finding]:
    """Every toolkit rule over one operator release's values."""
    return (_toolkit_switch(ctx) + _toolkit_flavour(ctx) + _toolkit_env(ctx)
            + _nvidia_default(ctx))


# ---------------------------------------------------------------- toolkit on/off

def _toolkit_switch(ctx: OperatorValues) -> list[Finding]:
    where = ctx.at("toolkit.enabled", "gpuplane:gpuOperator.toolkit")
    mode = ctx.intent.toolkit
    if ctx.toolkit_on and mode != "operator":
        shown = "true" if present(ctx.values, "toolkit.enabled") \
            else "not set (chart default: true)"
        return [finding(
            "FM05",
            f"toolkit.enabled is {shown} while gpuplane:gpuOperator.toolkit is {mode}: the "
            "operator's toolkit rewrites the containerd config that gpuplane manages on the "
            "nodes, and the two writers undo each other.",
            where,
            f"Keep `gpuplane:gpuOperator.toolkit: {mode}` and remove toolkit.enabled from "
            "`gpuplane:gpuOperator.values` (gpuplane renders it false), or set "
            "`gpuplane:gpuOperator.toolkit: operator`; raw Helm: --set toolkit.enabled=false.")]
    if not ctx.toolkit_on and mode == "operator":
        return [finding(
            "FM01",
            "toolkit.enabled is false while gpuplane:gpuOperator.toolkit is operator: nothing "
            "writes the nvidia runtime, so GPU pods fail with `no runtime for \"nvidia\" is "
            "configured`.",
            where,
            "Drop toolkit.enabled from `gpuplane:gpuOperator.values`, or set "
            "`gpuplane:gpuOperator.toolkit: host` to have gpuplane configure the host's "
            "toolkit; raw Helm: --set toolkit.enabled=true.")]
    return []


# ---------------------------------------------------------------- FM15 flavour

def _toolkit_tag(ctx: OperatorValues) -> tuple[str, str] | None:
    """(shown, tag) of the toolkit image the release runs."""
    version = lookup(ctx.values, "toolkit.version")
    if version not in (None, ""):
        return f"toolkit.version {version}", str(version)
    image = lookup(ctx.values, "toolkit.image")
    if isinstance(image, str) and not lookup(ctx.values, "toolkit.repository"):
        tag = split_ref(image)[1]
        if tag:
            return f"toolkit.image {image}", tag
    if ctx.chart is None:
        return None
    chart = "v" + ".".join(map(str, ctx.chart))
    tag = known_toolkit_tag(chart)
    return (f"the default toolkit image of chart {chart} ({tag})", tag) if tag else None


def _toolkit_flavour(ctx: OperatorValues) -> list[Finding]:
    if not ctx.toolkit_on:
        return []
    found = _toolkit_tag(ctx)
    flavour = flavour_of(found[1]) if found else None
    need = glibc_of(flavour) if flavour else None
    if not found or not need:
        return []
    by_os: dict[str, list[str]] = {}
    lowest = need
    for node in ctx.intent.gpu_nodes:
        have = glibc_of(node.os)
        if have is not None and have < need:
            by_os.setdefault(node.os, []).append(node.name)
            lowest = min(lowest, have)
    if not by_os:
        return []
    nodes = "; ".join(f"{', '.join(n)} run{'s' if len(n) == 1 else ''} {os} "
                      f"(glibc {fmt(glibc_of(os) or need)})" for os, n in sorted(by_os.items()))
    fits = flavours_for(lowest)
    choice = (f"a flavour built on glibc <= {fmt(lowest)} (known: "
              f"{', '.join('-' + f for f in fits)})") if fits else \
        f"a flavour built on glibc <= {fmt(lowest)}"
    return [finding(
        "FM15",
        f"{found[0]} is the {flavour} flavour (glibc {fmt(need)}), but {nodes}: the binaries "
        "the toolkit copies onto the host fail with `GLIBC_... not found` and every operator "
        "pod stays in Init.",
        ctx.at("toolkit.version", "gpuplane:gpuOperator.toolkitImage"),
        f"Set `gpuplane:gpuOperator.toolkitImage.tag` to {choice}, or install the toolkit on "
        "the hosts with `gpuplane:gpuOperator.toolkit: host`; raw Helm: toolkit.version=<that "
        "tag> (or toolkit.enabled=false).")]


# ---------------------------------------------------------------- FM17 env

def _env(values: Any) -> tuple[dict[str, str | None], str | None]:
    """toolkit.env as {name: value}; value None for valueFrom. The second item says why
    the list is malformed, if it is; the env is then what can still be read of it (the
    well-formed entries, or a mapping's name: value pairs), so that every other problem
    in it is reported at the same time as the malformation."""
    raw = lookup(values, "toolkit.env", [])
    if isinstance(raw, Mapping):
        readable = {str(k): None if v is None else str(v) for k, v in raw.items()
                    if not isinstance(v, Mapping | list)}
        return readable, f"toolkit.env is {type(raw).__name__}, not a list of {{name, value}}"
    if not isinstance(raw, list):
        return {}, f"toolkit.env is {type(raw).__name__}, not a list of {{name, value}}"
    env: dict[str, str | None] = {}
    malformed: str | None = None
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            malformed = malformed or f"toolkit.env[{i}] is not a {{name, value}} entry: {entry!r}"
            continue
        value = entry.get("value")
        env[entry["name"]] = None if value is None and "valueFrom" in entry else \
            ("" if value is None else str(value))
    return env, malformed


def _toolkit(ctx: OperatorValues) -> str:
    """The toolkit release the operator deploys (image override, else the chart's pin)."""
    chart = "v{}.{}.{}".format(*ctx.chart) if ctx.chart else None
    found = toolkit_version(ctx.values, chart)
    return ".".join(str(p) for p in found[0]) if found else NEWEST_TOOLKIT


def _first(env: Mapping[str, str | None], names: tuple[str, ...]) -> tuple[str | None, str]:
    """(value, env name) of the first name set; (None, "") when none is."""
    for name in names:
        if env.get(name):
            return env[name], name
    return None, ""


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _source_reads(source: str, prof: DistroProfile, version: ContainerdVersion,
                  config: str) -> bool:
    """Whether the toolkit's config source yields the kubelet's containerd config.

    `command` runs `containerd config dump` without --config: the default path, through
    whatever containerd is on the host's PATH (Docker's, on a two-daemon host).
    """
    good = {_norm(prof.config_path), _norm(prof.edit_path(version)),
            _norm(prof.toolkit_source)}
    for src in (s.strip() for s in source.split(",")):
        if src == "command":
            return _norm(prof.config_path) == DEFAULT_CONFIG
        if src.startswith("file="):
            return _norm(src[5:]) in good
        if src == "file":
            return _norm(config) in good
    return False


def _toolkit_env(ctx: OperatorValues) -> list[Finding]:
    intent = ctx.intent
    if not ctx.toolkit_on or intent.toolkit != "operator":
        return []
    env, malformed = _env(ctx.values)
    where = ctx.at("toolkit.env", _PATH_KEYS)
    found = _toolkit_env_paths(ctx, env, where)
    if not malformed:
        return found
    # One FM17: the malformation first, then whatever the readable entries get wrong.
    fm17 = next((f for f in found if f.id == "FM17" and f.where == where), None)
    rest = [f for f in found if f is not fm17]
    message = (f"{malformed}: the operator cannot tell the toolkit which containerd to "
               "configure (the ClusterPolicy takes a list of {name, value} entries only).")
    fix = ("Let gpuplane render toolkit.env from `gpuplane:cluster.distro` (and "
           "`containerdBaseDir`); by hand write a list of {name: ..., value: ...} entries.")
    if fm17 is not None:
        message += " Read as meant, it is also wrong: " + fm17.message
        fix += " " + fm17.fix
    return [finding("FM17", message, where, fix), *rest]


def _toolkit_env_paths(ctx: OperatorValues, env: Mapping[str, str | None],
                       where: str) -> list[Finding]:
    """FM17/FM04 over the host paths and config source that `env` gives the toolkit."""
    intent = ctx.intent
    prof = profile(intent.distro, intent.containerd_base_dir)
    version = containerd_version(intent)
    cdi_on, _ = ctx.cdi
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR, nvidia_default=intent.nvidia_default,
                          cdi=cdi_on, runtime_name=intent.runtime_class,
                          toolkit_version=_toolkit(ctx), runtime_setup=intent.runtime_setup)
    expected = {e["name"]: e["value"] for e in toolkit_env_for(prof, version, options)}
    out: list[Finding] = []
    if options.detected and prof.detects_nvidia_runtime:
        out += _detected_config(ctx, env, prof, version)
    wrong: list[str] = []
    fixes: list[str] = []
    config = ENV_DEFAULTS["CONTAINERD_CONFIG"]
    for key, names in ENV_NAMES.items():
        if key not in expected:
            continue
        if key == "CONTAINERD_CONFIG" and ctx.chart is not None \
                and ctx.chart < OPERATOR_DROPIN_FROM:
            names = ("CONTAINERD_CONFIG",)   # RUNTIME_CONFIG is read from chart v25.10
        value, name = _first(env, names)
        effective = value or ENV_DEFAULTS[key]
        if key == "CONTAINERD_CONFIG":
            config = effective
            if prof.edit_mode is EditMode.TEMPLATE and value:
                fm04 = check_node_files(prof, [effective], where=ctx.at(
                    f"toolkit.env {name}", None), version=version, env_name=name)
                if fm04:
                    out += fm04
                    continue
        if value is None and any(n in env and env[n] is None for n in names):
            continue  # set through valueFrom: not knowable here
        if _norm(effective) == _norm(expected[key]):
            continue
        shown = f"{name} is {value}" if value else \
            f"{key} is not set (toolkit default {ENV_DEFAULTS[key]})"
        if key == "CONTAINERD_SOCKET" and not value and env.get("RUNTIME_SOCKET"):
            shown += " and the operator overwrites RUNTIME_SOCKET"
        wrong.append(f"{shown}, but the kubelet's containerd uses {expected[key]}")
        fixes.append(f"- {{name: {key}, value: {expected[key]}}}")
    source = env.get("RUNTIME_CONFIG_SOURCE") or DEFAULT_SOURCE
    source_only = False
    paths_wrong = bool(wrong)   # another daemon; else the right one from a wrong source
    # The installer reads RUNTIME_CONFIG_SOURCE from toolkit 1.18; 1.17 edits CONTAINERD_CONFIG.
    if "RUNTIME_CONFIG_SOURCE" in expected and Installer.of(_toolkit(ctx)).writes_dropin \
            and not _source_reads(source, prof, version, config):
        source_only = not wrong
        state = f"RUNTIME_CONFIG_SOURCE is {source}" if env.get("RUNTIME_CONFIG_SOURCE") \
            else f"RUNTIME_CONFIG_SOURCE is not set (toolkit default {DEFAULT_SOURCE})"
        wrong.append(f"{state}, which does not read {prof.config_path} (`command` dumps "
                     f"{DEFAULT_CONFIG} through whatever containerd is on the host's PATH)")
        fixes.append(f"- {{name: RUNTIME_CONFIG_SOURCE, value: "
                     f"{expected['RUNTIME_CONFIG_SOURCE']}}}")
    plat = platform_profile(intent.platform) if intent.platform else None
    first = source.split(",")[0].strip().partition("=")[0]
    if plat is not None and plat.dump_rewrites(intent.kubernetes_version, version.major) \
            and Installer.of(_toolkit(ctx)).writes_dropin and first != "file" \
            and "RUNTIME_CONFIG_SOURCE" in expected:
        # FM17-config-dump: on this platform the dump carries what breaks the node, even
        # where it dumps the kubelet's own containerd.
        source_only = False
        if not any(w.startswith("RUNTIME_CONFIG_SOURCE") for w in wrong):
            fixes.append(f"- {{name: RUNTIME_CONFIG_SOURCE, value: "
                         f"{expected['RUNTIME_CONFIG_SOURCE']}}}")
        wrong.append(f"RUNTIME_CONFIG_SOURCE is {source}: on {plat.title} {plat.dump_harm}")
    if not wrong:
        return out
    base = f", containerd base dir {intent.containerd_base_dir}" \
        if intent.containerd_base_dir else ""
    raw = "raw Helm toolkit.env:\n" + "\n".join(fixes)
    if paths_wrong:
        message = (f"toolkit.env points the toolkit at another containerd than the kubelet's "
                   f"({prof.title}{base}): {'; '.join(wrong)}. The toolkit configures a "
                   "daemon the kubelet does not use, and GPU pods fail with `no runtime for "
                   "\"nvidia\" is configured`.")
        fix = (f"Set `gpuplane:cluster.distro: {prof.name}`"
               + (f" and `gpuplane:cluster.containerdBaseDir: {intent.containerd_base_dir}`"
                  if intent.containerd_base_dir else "")
               + " to what the nodes run and remove toolkit.env from "
               "`gpuplane:gpuOperator.values`, where a list replaces the whole env gpuplane "
               "renders; " + raw)
    else:
        # The kubelet's containerd is the one configured; what is wrong is where the
        # toolkit takes the config it writes back from.
        title = plat.title if plat is not None else prof.title
        message = (f"toolkit.env points the toolkit at the kubelet's containerd "
                   f"({title}{base}), but the config it starts from does not fit: "
                   f"{'; '.join(wrong)}."
                   + (" The config the toolkit writes back is built from that copy, not from "
                      f"{prof.config_path}, so the node's own settings there are not carried "
                      "over." if source_only else ""))
        fix = ("Remove RUNTIME_CONFIG_SOURCE from toolkit.env in "
               "`gpuplane:gpuOperator.values` (gpuplane renders it from "
               "`gpuplane:cluster.distro`" + (" and `gpuplane:cluster.platform`"
                                              if plat is not None else "")
               + "), or set it to the file; " + raw)
    out.append(finding(
        "FM17", message, where, fix,
        severity=Severity.WARNING if source_only else None,
        changes=((USER_ENV, None),) if env else ()))
    return out


def _detected_config(ctx: OperatorValues, env: Mapping[str, str | None], prof: DistroProfile,
                     version: ContainerdVersion) -> list[Finding]:
    """RKE2/K3s detected mode (gpuplane.distros.rancher_mode): toolkit.env must leave the toolkit's
    config alone. Pointed at the distribution's template, the toolkit writes a template
    of its own, which replaces the built-in one and with it the detected runtimes and the
    distribution's settings (FM17, error); pointed at the config the distribution
    generates, its edit is lost when that file is generated again at the next start
    (FM04, error); pointed at any other file, it edits one their containerd never reads,
    which says something that is not so (warning)."""
    value, name = _first(env, ENV_NAMES["CONTAINERD_CONFIG"])
    if not value:
        return []
    own = {_norm(prof.config_path), _norm(prof.edit_path(version))}
    # On containerd 2.x RKE2/K3s render config.toml.tmpl (as version 2) where no
    # config-v3.toml.tmpl exists, as on a node in detected mode (DistroProfile.read_template).
    fallback = prof.template_fallback(version)
    where = ctx.at(f"toolkit.env {name}", "gpuplane:gpuOperator.runtimeSetup")
    fix = (f"Remove toolkit.env (its {name}) from `gpuplane:gpuOperator.values` (in "
           f"detected mode gpuplane's toolkit.env sets only CONTAINERD_SOCKET={prof.socket}), "
           "or set `gpuplane:gpuOperator.runtimeSetup: template` to have gpuplane write the "
           f"whole template and point the toolkit at it; raw Helm toolkit.env (the "
           f"distribution's detection adds the runtimes):\n- {{name: CONTAINERD_SOCKET, value: "
           f"{prof.socket}}}")
    changes = ((USER_ENV, None),)
    if _norm(value) == _norm(prof.config_path):
        return [finding(
            "FM04",
            f"{name} is {value} while gpuplane:gpuOperator.runtimeSetup is detected: that is "
            f"the config {prof.title} generates from its template at every start, so the "
            "toolkit's edit there is lost at the next restart of "
            f"{prof.title}; the runtimes come from the distribution's detection.",
            where, fix, changes=changes)]
    if _norm(value) in own or _norm(value) == fallback:
        read = (f" ({prof.title} on containerd {version} renders {fallback} as version 2 "
                f"when {prof.edit_path(version)} is absent, in place of its built-in "
                "template)") if _norm(value) == fallback else ""
        return [finding(
            "FM17",
            f"{name} is {value} while gpuplane:gpuOperator.runtimeSetup is detected: the "
            f"toolkit writes a {prof.title} template of its own there{read}, which replaces "
            "the built-in template, so the distribution no longer renders its own settings "
            "or the runtimes it detects.", where, fix, changes=changes)]
    return [finding(
        "FM17",
        f"{name} is {value} while gpuplane:gpuOperator.runtimeSetup is detected: "
        f"{prof.title}'s containerd never reads that file (it reads {prof.config_path}, "
        "rendered at every start), so the toolkit's edit there does nothing; the runtimes "
        "come from the distribution's detection.", where, fix, severity=Severity.WARNING,
        changes=changes)]


def _sets_default(env: Mapping[str, str | None], cdi_on: bool,
                  chart: tuple[int, int, int] | None) -> tuple[bool | None, str]:
    """Whether the toolkit makes nvidia the default runtime, from the env chart `chart`'s
    operator gives it (from v25.10 CDI mode adds NVIDIA_RUNTIME_SET_AS_DEFAULT=false)."""
    given = [{"name": k, "value": v} for k, v in env.items() if v is not None]
    final = chart_operator_env(chart, given, cdi=cdi_on, runtime_class="")
    for name in ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "CONTAINERD_SET_AS_DEFAULT"):
        raw = final.get(name)
        if raw:
            value = _BOOL.get(raw.strip().lower())
            if value is None:
                return None, f"{name}={raw!r} is not a boolean the toolkit accepts"
            if env.get(name) != raw:
                return value, f"CDI mode makes the operator set {name}={raw}"
            return value, f"toolkit.env sets {name}={raw}"
    return True, "no toolkit.env entry sets it and the toolkit defaults to true"


def _nvidia_default(ctx: OperatorValues) -> list[Finding]:
    if not ctx.toolkit_on or ctx.intent.toolkit != "operator":
        return []
    # A malformed list is FM17 (_toolkit_env); what can be read of it is judged here too.
    env, _ = _env(ctx.values)
    cdi_on, _ = ctx.cdi
    sets, why = _sets_default(env, cdi_on, ctx.chart)
    want = ctx.intent.nvidia_default
    where = ctx.at("toolkit.env", "gpuplane:runtime.nvidiaDefault")
    detected = ctx.intent.runtime_setup == "detected" and \
        profile(ctx.intent.distro, ctx.intent.containerd_base_dir).detects_nvidia_runtime
    if sets is None:
        # The toolkit parses its flags before anything else: in every mode it exits.
        return [finding(
            "FM01",
            f"toolkit.env: {why}; the toolkit exits at start and no nvidia runtime is "
            "configured, so GPU pods fail with `no runtime for \"nvidia\" is configured`.",
            where,
            "Let gpuplane render toolkit.env from `gpuplane:runtime.nvidiaDefault`; raw Helm: "
            "use true or false as the value.")]
    if detected:
        # The toolkit's default lands in /etc/containerd, which RKE2's/K3s's containerd
        # never reads; the detected runtimes are never the default. Asked for by hand
        # against the stack's word, it is still said (beside any FM17 on the same list).
        if sets and not want and why.startswith("toolkit.env sets"):
            title = profile(ctx.intent.distro, ctx.intent.containerd_base_dir).title
            return [finding(
                "FM09",
                f"gpuplane:runtime.nvidiaDefault is false but {why}: in detected mode "
                f"{title}'s containerd never reads the file the toolkit sets it in, so it "
                f"does not make nvidia {title}'s default runtime, and that file, left in "
                "/etc/containerd after an uninstall, makes nvidia the default of any other "
                "containerd on the host that reads it (Docker's).",
                where,
                "Remove the set-as-default entry from toolkit.env in "
                "`gpuplane:gpuOperator.values`; to make nvidia the default runtime set "
                "`gpuplane:runtime.nvidiaDefault: true`.", severity=Severity.WARNING)]
        return []
    if want and not sets:
        rule = "FM13" if ctx.hami else "FM11"
        return [finding(
            rule,
            f"gpuplane:runtime.nvidiaDefault is {str(want).lower()} but the toolkit will "
            f"not make nvidia containerd's default runtime: {why}. GPU pods without "
            "runtimeClassName (HAMi's device plugin among them) see no GPU.",
            where,
            "Set `gpuplane:runtime.nvidiaDefault: false` and give GPU pods "
            "`runtimeClassName` (HAMi: devicePlugin.runtimeClassName), or keep it true with "
            "`gpuplane:gpuOperator.cdi: false`; raw Helm: toolkit.env "
            "NVIDIA_RUNTIME_SET_AS_DEFAULT=true.")]
    if sets and not want:
        return [finding(
            "FM09",
            f"gpuplane:runtime.nvidiaDefault is false but the toolkit will make nvidia "
            f"containerd's default runtime: {why}. Every pod then runs through the nvidia "
            "runtime, and removing the toolkit without restoring the config leaves "
            "`default_runtime_name = \"nvidia\"` behind.",
            where,
            "Let gpuplane render toolkit.env (it sets CONTAINERD_SET_AS_DEFAULT from "
            "`gpuplane:runtime.nvidiaDefault`), or set `gpuplane:runtime.nvidiaDefault: true` "
            "if that is what you want; raw Helm: toolkit.env CONTAINERD_SET_AS_DEFAULT=false.",
            severity=Severity.WARNING)]
    return []



__all__ = ["DEFAULT_CONFIG", "DEFAULT_DROP_IN", "DEFAULT_SOCKET", "ENV_NAMES", "check_toolkit"]
