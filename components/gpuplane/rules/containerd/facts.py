"""Facts about one node's containerd config and what the rules derive from them once:
each file's own CRI intent, the settings the effective config lost, the refusals."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gpuplane.containerd.effective import EffectiveConfig, FileCRI, file_cri, normalise_options
from gpuplane.containerd.load import LoadedFile
from gpuplane.containerd.settings import file_settings
from gpuplane.containerd.toml_io import line_of
from gpuplane.containerd.versions import CRI_V1, CRI_V2, CRI_V3_RUNTIME, ContainerdVersion
from gpuplane.core.intent import CgroupDriver

# The containerd model words its refusals; these tell them apart.
MISSING_IMPORT = re.compile(r"^(?P<path>.+?) imports (?P<target>.+?), which does not exist")
VERSION_REFUSAL = re.compile(r"^(unsupported config version|expected containerd config version)")
PLUGIN_KEY = re.compile(r'^invalid plugin key URI "(?P<key>[^"]*)"')
NO_DEFAULT = re.compile(r"^no corresponding runtime configured")
# The config version whose CRI plugin name each key is.
KEY_VERSION = {CRI_V1: 1, CRI_V2: 2, CRI_V3_RUNTIME: 3}


@dataclass(frozen=True)
class ContainerdFacts:
    """What the containerd rules need to know about one node.

    `expected_*` come from a plan (what gpuplane means to write); `unread_files` are TOML
    files found in drop-in-looking directories that containerd does not read.
    `config_key_prefix` (a stack key or node name) prefixes every `where`.
    """

    effective: EffectiveConfig
    expected_runtimes: frozenset[str] = frozenset()
    expected_files: tuple[str, ...] = ()
    unread_files: tuple[str, ...] = ()
    kubelet_cgroup_driver: CgroupDriver | None = None
    cdi_requested: bool | None = None
    # The GPU Operator's NRI plugin will run on the node (gpuOperator.nri, or
    # `containerd check --nri`): NRI must be on in the merged config (FM27).
    nri_requested: bool = False
    config_key_prefix: str | None = None
    # The managed platform that writes these files (gpuplane.platforms.profiles), None when the
    # node's owner may edit them.
    owner: str | None = None
    # (runtime, path) for each runtime whose BinaryName names an absolute path that is not
    # on the node (gpuplane.rules.nodecheck looks; the rules stay pure).
    missing_binaries: tuple[tuple[str, str], ...] = ()
    # (runtime, path) for each absolute BinaryName nothing could check (files copied
    # without their directories, no capture record): named as not checked, never missing.
    unchecked_binaries: tuple[tuple[str, str], ...] = ()
    # (RuntimeClass, handler) for each RuntimeClass of the node's cluster: its handler is a
    # runtime pods use (also in `expected_runtimes`); findings name the RuntimeClass.
    runtime_classes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Loss:
    """A setting some file made (the last one to set it) that the effective config lacks."""

    kind: Literal["runtime", "runtime_type", "option", "default_runtime_name", "enable_cdi",
                  "setting"]
    runtime: str | None
    option: str | None
    intended: Any
    source: LoadedFile
    key: str

    def describe(self) -> str:
        if self.kind == "setting":
            return f"{self.option} = {fmt(self.intended)}"
        if self.kind == "runtime":
            return f"runtime {self.runtime}"
        if self.kind == "option":
            return f"{self.option} = {fmt(self.intended)} of runtime {self.runtime}"
        if self.kind == "runtime_type":
            return f"runtime_type = {fmt(self.intended)} of runtime {self.runtime}"
        return f"{self.kind} = {fmt(self.intended)}"

    @property
    def dotted(self) -> tuple[str, ...]:
        """Where the source file set it, for `path:line`."""
        base = ("plugins", self.key)
        if self.kind == "setting":
            return (*base, *(self.option or "").split("."))
        if self.kind == "enable_cdi":
            return (*base, "enable_cdi")
        if self.kind == "default_runtime_name":
            return (*base, "containerd", "default_runtime_name")
        runtime = (*base, "containerd", "runtimes", self.runtime or "")
        if self.kind == "option":
            return (*runtime, "options", self.option or "")
        if self.kind == "runtime_type":
            return (*runtime, "runtime_type")
        return runtime


@dataclass
class Analysis:
    """Shared facts the rules derive once: per-file CRI intent, losses, refusals."""

    facts: ContainerdFacts
    cris: list[tuple[LoadedFile, FileCRI]]
    losses: list[Loss]
    refusals: list[str]
    default_refusal: str | None
    builtin_runc_replaced: bool
    defined: set[str] = field(default_factory=set)

    @property
    def eff(self) -> EffectiveConfig:
        return self.facts.effective

    def rule_of(self, loss: Loss) -> str:
        """1.x losses under the effective CRI key are table replacement; the rest are
        version mixing (2.x deep-merges, so a loss there always is)."""
        eff = self.eff
        if not eff.containerd_version.deep_merges and loss.key == eff.cri_key:
            return "FM02"
        return "FM03"

    def runtime_loss(self, name: str) -> Loss | None:
        return next((x for x in self.losses if x.kind == "runtime" and x.runtime == name), None)

    def default_owner(self) -> str | None:
        """The rule whose finding explains the default-runtime refusal, if there is one."""
        if self.default_refusal is None:
            return None
        default = self.eff.default_runtime
        loss = self.runtime_loss(default)
        if loss is not None:
            return self.rule_of(loss)
        if self.builtin_runc_replaced:
            return "FM02"
        if default in self.facts.expected_runtimes:
            return "FM01"
        return "FM09"

    def classes_of(self, runtime: str) -> list[str]:
        """The cluster's RuntimeClasses whose handler is `runtime`, sorted."""
        return sorted({c for c, h in self.facts.runtime_classes if h == runtime})

    def classes_note(self, runtimes: list[str]) -> str:
        """A sentence per runtime of `runtimes` that a RuntimeClass of the cluster names as
        its handler (" RuntimeClass gpu runs its pods with handler nvidia."); "" else."""
        notes = []
        for runtime in runtimes:
            classes = self.classes_of(runtime)
            if len(classes) == 1:
                notes.append(f" RuntimeClass {classes[0]} runs its pods with handler "
                             f"{runtime}.")
            elif classes:
                notes.append(f" RuntimeClasses {', '.join(classes)} run their pods with "
                             f"handler {runtime}.")
        return "".join(notes)

    def where(self, location: str) -> str:
        prefix = self.facts.config_key_prefix
        return f"{prefix}: {location}" if prefix else location


@dataclass
class _Intent:
    """What the files mean, each setting from the last file (in merge order) setting it."""

    runtimes: dict[str, tuple[LoadedFile, str]] = field(default_factory=dict)
    runtime_types: dict[str, tuple[Any, LoadedFile, str]] = field(default_factory=dict)
    options: dict[tuple[str, str], tuple[Any, LoadedFile, str]] = field(default_factory=dict)
    default: tuple[Any, LoadedFile, str] | None = None
    cdi: tuple[Any, LoadedFile, str] | None = None


def _intent(cris: list[tuple[LoadedFile, FileCRI]]) -> _Intent:
    intent = _Intent()
    for f, cri in cris:
        for name, entry in cri.runtimes.items():
            intent.runtimes[name] = (f, cri.key)
            if "runtime_type" in entry:
                intent.runtime_types[name] = (entry["runtime_type"], f, cri.key)
            raw = entry.get("options")
            for option, value in (raw.items() if isinstance(raw, dict) else ()):
                intent.options[(name, option)] = (value, f, cri.key)
        if cri.default_runtime is not None:
            intent.default = (cri.default_runtime, f, cri.key)
        if cri.cdi is not None:
            intent.cdi = (cri.cdi, f, cri.key)
    return intent


def file_intent(f: LoadedFile) -> FileCRI:
    """The file's CRI settings read by its own `version`; failing that, under another
    version's plugin name (a file that forgot `version = 2` still means its tables)."""
    cri = file_cri(f)
    if cri.has_table:
        return cri
    for key, version in KEY_VERSION.items():
        if key != cri.key and isinstance(f.plugins.get(key), dict):
            return file_cri(replace(f, version=version))
    return cri


def analyse(facts: ContainerdFacts) -> Analysis:
    """Compare what each file meant (read by its own `version`) with the effective config.

    Every difference is a Loss; which rule reports it depends on why it was lost.
    """
    eff = facts.effective
    cris = [(f, file_intent(f)) for f in eff.files]
    intent = _intent(cris)
    losses: list[Loss] = []
    for name, (f, key) in intent.runtimes.items():
        if name not in eff.runtimes:
            losses.append(Loss("runtime", name, None, None, f, key))
    for name, (value, f, key) in intent.runtime_types.items():
        view = eff.runtimes.get(name)
        if view is not None and isinstance(value, str) and value and view.runtime_type != value:
            losses.append(Loss("runtime_type", name, None, value, f, key))
    for (name, option), (value, f, key) in intent.options.items():
        view = eff.runtimes.get(name)
        wanted = normalise_options({option: value}).get(option)
        if view is not None and view.options.get(option) != wanted:
            losses.append(Loss("option", name, option, value, f, key))
    if intent.default is not None and intent.default[0] != eff.default_runtime:
        losses.append(Loss("default_runtime_name", None, None, *intent.default))
    if (intent.cdi is not None and eff.containerd_version.supports_cdi
            and intent.cdi[0] != eff.cdi):
        losses.append(Loss("enable_cdi", None, None, *intent.cdi))
    losses += _setting_losses(eff, cris)
    losses += v2_setting_losses(eff)
    default_refusal = next((r for r in eff.refusals if NO_DEFAULT.match(r)), None)
    # 1.x: a `runtimes` table replaces the built-in one, so runc is gone unless defined.
    replaced = (
        default_refusal is not None
        and not eff.containerd_version.deep_merges
        and eff.default_runtime == "runc"
        and "runc" not in intent.runtimes
    )
    return Analysis(facts, cris, losses, list(eff.refusals), default_refusal, replaced,
                    set(intent.runtimes))


# Parts of the CRI table the losses above already cover, by what they mean.
_RUNTIME_PARTS = (("containerd", "runtimes"), ("containerd", "default_runtime_name"),
                  ("enable_cdi",))


def _leaves(table: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(table, dict) and table:
        return [leaf for k, v in table.items() for leaf in _leaves(v, (*prefix, str(k)))]
    return [(prefix, table)]


def _get(table: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(table, dict) or part not in table:
            return _MISSING
        table = table[part]
    return table


_MISSING = object()


def _setting_losses(eff: EffectiveConfig,
                    cris: list[tuple[LoadedFile, FileCRI]]) -> list[Loss]:
    """1.x: every other CRI setting (sandbox image, registry, CNI dirs, ...) a file made
    that a later file's whole CRI table replaced: containerd runs with its own default
    instead (the runtimes are compared above, by what they mean)."""
    if eff.containerd_version.deep_merges:
        return []
    intended: dict[tuple[str, ...], tuple[Any, LoadedFile]] = {}
    for f, cri in cris:
        table = f.plugins.get(eff.cri_key)
        if cri.key != eff.cri_key or not isinstance(table, dict):
            continue
        for path, value in _leaves(table):
            if path and not any(path[:len(p)] == p for p in _RUNTIME_PARTS):
                intended[path] = (value, f)
    merged = eff.plugins.get(eff.cri_key)
    defaults = cri_defaults(eff.containerd_version)
    return [Loss("setting", None, ".".join(path), value, f, eff.cri_key)
            for path, (value, f) in intended.items()
            if _get(merged, path) != value and defaults.get(".".join(path), _MISSING) != value]


def cri_defaults(line: ContainerdVersion) -> dict[str, Any]:
    """containerd 1.x's own value of CRI settings a dropped file may have restated
    (`pkg/cri/config/config_unix.go` DefaultConfig@v1.6.20 and @v1.7.24): losing a
    setting equal to it loses nothing. `cni.bin_dir` is left out on purpose: builds
    change it (Debian's 1.7.24 uses /usr/lib/cni)."""
    return {"sandbox_image": "registry.k8s.io/pause:3.8" if line.minor >= 7
            else "registry.k8s.io/pause:3.6",
            "cni.conf_dir": "/etc/cni/net.d", "registry.config_path": ""}


# ---------------------------------------------------------------- helpers

def fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def verb(things: list[Any], one: str, many: str) -> str:
    return one if len(things) == 1 else many


def items(losses: list[Loss]) -> str:
    return ", ".join(x.describe() for x in losses)


def by_file(losses: list[Loss]) -> list[tuple[str, list[Loss]]]:
    groups: dict[str, list[Loss]] = {}
    for x in losses:
        groups.setdefault(x.source.path, []).append(x)
    return list(groups.items())


def lost_text(losses: list[Loss]) -> str:
    return f" Lost with it: {items(losses)}." if losses else ""


def has_default(losses: list[Loss], eff: EffectiveConfig) -> bool:
    return any(x.kind == "runtime" and x.runtime == eff.default_runtime for x in losses)


def refusal_note(a: Analysis, rule: str) -> str:
    if a.default_owner() != rule:
        return ""
    return f" containerd then refuses the CRI config: {a.default_refusal}."


def file_named(eff: EffectiveConfig, path: str) -> LoadedFile | None:
    return next((f for f in eff.files if f.path == path), None)


# 2.x CRI settings beyond the runtimes (#39: the whole config; findings in .whole).

def _kept(effective: Any, intended: Any) -> bool:
    if isinstance(intended, dict) and isinstance(effective, dict):
        return all(effective.get(k) == v for k, v in intended.items())
    return bool(effective == intended)


def v2_setting_losses(eff: EffectiveConfig) -> list[Loss]:
    """2.x: settings a file made (read by its own version) that are not in effect."""
    line = eff.containerd_version
    if not line.deep_merges or eff.no_file:
        return []
    intended: dict[str, tuple[Any, Any, str, str]] = {}
    for f in eff.files:
        for name, (value, key, path) in file_settings(f, line).items():
            intended[name] = (value, f, key, path)
    own = _defaults_v2(line)
    return [Loss("setting", None, path, value, f, key)
            for name, (value, f, key, path) in intended.items()
            if not _kept(eff.settings.get(name), value) and own.get(name) != value]


def _defaults_v2(line: Any) -> dict[str, Any]:
    """containerd 2.x's own values (its `config dump` of an empty file: 2.0.11, 2.1.9,
    2.2.7): restating one loses nothing. The CNI bin dirs differ between builds and are
    left out, as on 1.x (gpuplane.rules.containerd.facts.cri_defaults)."""
    return {"cni.conf_dir": "/etc/cni/net.d",
            "sandbox_image": "registry.k8s.io/pause:3.10.1" if line.minor >= 2
            else "registry.k8s.io/pause:3.10"}


def at(f: LoadedFile, dotted: tuple[str, ...]) -> str:
    line = line_of(f.text, dotted)
    return f"{f.path}:{line}" if line else f.path


def runtime_at(a: Analysis, name: str, option: str | None = None) -> str:
    """The last file (in merge order) defining runtime `name`, at its option or table."""
    for f, cri in reversed(a.cris):
        if name in cri.runtimes:
            base = ("plugins", cri.key, "containerd", "runtimes", name)
            if option is not None:
                line = line_of(f.text, (*base, "options", option))
                if line:
                    return f"{f.path}:{line}"
            return at(f, base)
    return a.eff.files[0].path


def key_at(a: Analysis, suffix: tuple[str, ...]) -> str:
    for f, cri in reversed(a.cris):
        if cri.has_table:
            line = line_of(f.text, ("plugins", cri.key, *suffix))
            if line:
                return f"{f.path}:{line}"
    return a.eff.files[0].path
