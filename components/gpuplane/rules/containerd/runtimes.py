"""FM07, FM09, FM16 and refusals no other rule explains: what the effective runtimes
and CRI settings mean for the pods that will use them."""

from __future__ import annotations

from gpuplane.containerd import ContainerdVersion, RuntimeView
from gpuplane.containerd.effective import raw_options
from gpuplane.containerd.options import decoded, key_for, odd_spellings
from gpuplane.containerd.versions import RUNC_V2
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import (
    MISSING_IMPORT,
    NO_DEFAULT,
    PLUGIN_KEY,
    VERSION_REFUSAL,
    Analysis,
    ContainerdFacts,
    analyse,
    at,
    fmt,
    key_at,
    runtime_at,
    verb,
)

# ---------------------------------------------------------------- FM07: cgroups

def check_systemd_cgroup(facts: ContainerdFacts) -> list[Finding]:
    """FM07: runc-based runtimes disagree on SystemdCgroup, or with the kubelet."""
    return fm07(analyse(facts))


def fm07(a: Analysis) -> list[Finding]:
    eff, driver = a.eff, a.facts.kubelet_cgroup_driver
    line = eff.containerd_version
    # A SystemdCgroup lost by replacement or version mixing is reported there, once.
    lost = {x.runtime for x in a.losses
            if x.kind == "option" and (x.option or "").lower() == "systemdcgroup"}
    runc_based = {name: view for name, view in sorted(eff.runtimes.items())
                  if view.runtime_type == RUNC_V2 and name not in lost}
    # The value runc gets, by this line's own key matching (systemdCgroup counts).
    values = {name: decoded(view.options, "SystemdCgroup", line) is True
              for name, view in runc_based.items()}
    if not values:
        return []
    shown = ", ".join(f"{n}={fmt(v)}" for n, v in values.items()) + _spelling_note(
        runc_based, line)
    if driver is not None:
        want = driver == "systemd"
        bad = [n for n, v in values.items() if v != want]
        if not bad:
            return []
        return [Finding(
            "FM07", _severity(a, bad),
            f"the kubelet uses the {driver} cgroup driver, but SystemdCgroup is {shown}: "
            f"runtime(s) {', '.join(bad)} manage cgroups differently from the kubelet."
            + _unused_note(a, bad) + a.classes_note(bad),
            a.where(runtime_at(a, bad[0], "SystemdCgroup")),
            f"Set SystemdCgroup = {fmt(want)} in the options of {', '.join(bad)}"
            + (f" through {a.facts.owner}'s own configuration (docs/platforms.md)."
               if a.facts.owner else "."),
        )]
    if len(set(values.values())) < 2:
        return []
    # The default runtime is what every pod without a RuntimeClass gets: the others are
    # measured against it (against runc where the default is not runc-based).
    reference = values.get(eff.default_runtime, values.get("runc", next(iter(values.values()))))
    odd = [n for n, v in values.items() if v != reference]
    return [Finding(
        "FM07", _severity(a, odd),
        f"runc-based runtimes disagree on SystemdCgroup ({shown}; absent means false): "
        "containers of one runtime use another cgroup manager than the rest."
        + _unused_note(a, odd) + a.classes_note(odd),
        a.where(runtime_at(a, odd[0], "SystemdCgroup")),
        "Give every io.containerd.runc.v2 runtime the same SystemdCgroup, matching the "
        "kubelet's cgroupDriver (true for systemd, false for cgroupfs).",
    )]


def _used(a: Analysis) -> set[str]:
    """The runtimes pods are known to run: the default and those the plan relies on."""
    return {a.eff.default_runtime, *a.facts.expected_runtimes}


def _severity(a: Analysis, odd: list[str]) -> Severity:
    """An error when a runtime pods run is the odd one; a runtime nothing is known to use
    (containerd 2.x's built-in runc beside a vendor's default, AKS's `untrusted`) breaks
    no pod by itself: a warning."""
    if set(odd) & _used(a):
        return Severity.ERROR
    # On a managed platform nobody but the platform can change its own runtimes.
    return Severity.INFO if a.facts.owner else Severity.WARNING


def _unused_note(a: Analysis, odd: list[str]) -> str:
    if set(odd) & _used(a):
        return ""
    builtin = [n for n in odd if n not in a.defined]
    why = (f" ({', '.join(builtin)}: containerd's built-in runtime, which no file "
           "configures)" if builtin else "")
    return (f" Neither the default runtime ({a.eff.default_runtime}) nor a runtime the plan "
            f"uses is among them{why}: only pods whose RuntimeClass names "
            f"{', '.join(odd)} are affected."
            + (f" {a.facts.owner} writes these runtimes itself; gpuplane leaves its config "
               "alone." if a.facts.owner else ""))


def _spelling_note(runtimes: dict[str, RuntimeView], line: ContainerdVersion) -> str:
    """Why a runtime that looks set reads as unset: a key containerd `line` ignores."""
    ignored = [f"{name}.{key}" for name, view in runtimes.items()
               for key in odd_spellings(view.options, "SystemdCgroup")
               if decoded({key: True}, "SystemdCgroup", line) is None]
    if not ignored:
        return ""
    return (f"; containerd {line} does not read {', '.join(ignored)} as SystemdCgroup "
            "(1.x accepts SystemdCgroup, systemdCgroup, systemdcgroup, SYSTEMDCGROUP)")


# ---------------------------------------------------------------- FM01: shadowed binary

_NVIDIA_BINARY = "nvidia-container-runtime"


def fm01_shadowed_binary(a: Analysis) -> list[Finding]:
    """FM01: a runtime one of whose `BinaryName` spellings names NVIDIA's runtime while
    the spelling this containerd line reads names another binary. Kubespray <= 2.27
    writes runc's `binaryName`; the operator's toolkit copies runc's options into its
    nvidia runtime and sets `BinaryName`; containerd 2.x reads the last spelling in byte
    order (`binaryName`), so the nvidia runtime runs plain runc and its pods get no GPU,
    with nothing failing (gpuplane.containerd.options)."""
    line = a.eff.containerd_version
    out = []
    for name in sorted(a.eff.runtimes):
        raw = raw_options(a.eff, name)
        spelled = {k: v for k, v in raw.items() if k.lower() == "binaryname"}
        nvidia = [k for k, v in spelled.items() if _NVIDIA_BINARY in str(v)]
        read = key_for(raw, "BinaryName", line)
        if not nvidia or read is None or _NVIDIA_BINARY in str(raw[read]):
            continue
        out.append(Finding(
            "FM01", Severity.ERROR,
            f"runtime {name} sets {nvidia[0]} = {fmt(spelled[nvidia[0]])}, but containerd "
            f"{line} reads {read} = {fmt(raw[read])} instead: pods of runtime {name} run "
            f"{raw[read]} without the NVIDIA hook and get no GPU, while nothing fails.",
            a.where(runtime_at(a, name, read)),
            f"Spell the option BinaryName once: remove {read} from runtime {name}, and from "
            "runc's options wherever a tool copies them (Kubespray <= 2.27 writes "
            "`binaryName`; the GPU Operator's toolkit copies runc's table into nvidia).",
        ))
    return out


# ---------------------------------------------------------------- FM09: default

def check_default_runtime(facts: ContainerdFacts) -> list[Finding]:
    """FM09: the default runtime names a runtime no file defines (and nothing else
    explains it, e.g. a leftover `default_runtime_name = "nvidia"` after an uninstall)."""
    return fm09(analyse(facts))


def fm09(a: Analysis) -> list[Finding]:
    if a.default_owner() != "FM09":
        return []
    name = a.eff.default_runtime
    where = a.eff.files[0].path
    for f, cri in reversed(a.cris):
        if cri.default_runtime == name:
            where = at(f, ("plugins", cri.key, "containerd", "default_runtime_name"))
            break
    return [Finding(
        "FM09", Severity.ERROR,
        f'default_runtime_name is "{name}", but no file containerd reads defines that '
        f"runtime: {a.default_refusal}.",
        a.where(where),
        f'Set default_runtime_name = "runc", or define the {name} runtime in the same file.',
    )]


# ---------------------------------------------------------------- FM16: CDI on 1.6

def check_cdi_support(facts: ContainerdFacts) -> list[Finding]:
    """FM16: CDI requested where containerd (1.6) has no CDI at all."""
    return fm16(analyse(facts))


def fm16(a: Analysis) -> list[Finding]:
    line = a.eff.containerd_version
    if line.supports_cdi:
        return []
    setters = [(f, cri) for f, cri in a.cris if cri.cdi is True]
    if not setters and a.facts.cdi_requested is not True:
        return []
    reasons = []
    if a.facts.cdi_requested:
        reasons.append("the plan asks for CDI (gpuOperator.cdi)")
    if setters:
        sets = verb(setters, "sets", "set")
        reasons.append(f"{', '.join(f.path for f, _ in setters)} {sets} enable_cdi = true")
    if setters:
        f, cri = setters[-1]
        where = at(f, ("plugins", cri.key, "enable_cdi"))
    else:
        where = "gpuOperator.cdi"
    return [Finding(
        "FM16", Severity.ERROR,
        f"{' and '.join(reasons)}, but containerd {line} has no CDI support and ignores "
        "enable_cdi: GPUs announced through CDI are never allocated to pods.",
        a.where(where),
        "Upgrade containerd to 1.7 or later, or turn CDI off (remove enable_cdi; with "
        "gpuplane: `gpuplane:gpuOperator.cdi: false`).",
    )]


# ---------------------------------------------------------------- other refusals

def check_other_refusals(facts: ContainerdFacts) -> list[Finding]:
    """Refusals no rule above explains: wrongly typed CRI fields and the like."""
    return unexplained_refusals(analyse(facts))


_OTHER_KEYS = (
    ("default_runtime_name", ("containerd", "default_runtime_name")),
    ("enable_cdi", ("enable_cdi",)),
    ("runtime_type", ("containerd", "runtimes")),
    ("runtimes", ("containerd", "runtimes")),
    ("runtime ", ("containerd", "runtimes")),
    ("containerd", ("containerd",)),
)


def unexplained_refusals(a: Analysis) -> list[Finding]:
    out = []
    for refusal in a.refusals:
        if any(p.match(refusal) for p in (MISSING_IMPORT, VERSION_REFUSAL, PLUGIN_KEY, NO_DEFAULT)):
            continue
        # containerd refuses a CRI table whose typed fields have the wrong type. No failure
        # mode is about types as such; FM03 is the one about configuration containerd will
        # not load, so these are reported under it.
        suffix = next((s for word, s in _OTHER_KEYS if word in refusal), ())
        out.append(Finding(
            "FM03", Severity.ERROR,
            f"containerd {a.eff.containerd_version} refuses this configuration: {refusal}.",
            a.where(key_at(a, suffix)),
            "Give the field the type containerd expects (strings quoted, booleans true or "
            "false, runtimes as tables).",
        ))
    return out
