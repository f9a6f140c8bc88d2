"""FM01: what containerd never reads: planned drop-ins outside `imports`, runtimes no
read file defines, unread TOML files, imports that match nothing or resolve elsewhere."""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import replace
from typing import Literal

from gpuplane.containerd.effective import EffectiveConfig
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import (
    MISSING_IMPORT,
    Analysis,
    ContainerdFacts,
    analyse,
    at,
    file_named,
    refusal_note,
)


def check_not_read(facts: ContainerdFacts) -> list[Finding]:
    """FM01: planned files or runtimes containerd never reads; imports that read nothing."""
    return fm01(analyse(facts))


def fm01(a: Analysis) -> list[Finding]:
    eff, top = a.eff, a.eff.files[0]
    read = {f.path for f in eff.files}
    out = _missing_imports(a)
    errors, covered = _missing_planned(a, read)
    unread = [p for p in a.facts.unread_files if p not in read]
    if errors:
        # The unread files and relative globs are why the plan is not read: one finding.
        unread = [p for p in unread if p not in a.facts.expected_files]
        note = f" Unread TOML files that may hold it: {', '.join(unread)}." if unread else ""
        cwd = _cwd_globs(a)
        note += "".join(f" {text}" for text, _, _ in cwd)
        fix = "".join(f"{fix} " for _, fix, _ in cwd)
        errors[0] = replace(errors[0], message=errors[0].message + note,
                            fix=fix + errors[0].fix)
        out += errors
        unread, cwd = [], []
    else:
        cwd = _cwd_globs(a)
    for path in unread:
        out.append(Finding(
            "FM01", Severity.WARNING,
            f"{path} looks like a containerd drop-in, but no `imports` entry reads it: its "
            "settings have no effect.",
            a.where(path),
            _import_fix(a, posixpath.join(posixpath.dirname(path), "*.toml"))
            + ", or remove the file.",
        ))
    relative = {posixpath.normpath(posixpath.join("/", raw)) for _, raw in _load_globs(eff, "cwd")}
    for importer, pattern in _load_globs(eff, "empty"):
        if pattern in covered or pattern in relative:
            continue
        out.append(Finding(
            "FM01", Severity.INFO,
            f"the imports glob {pattern} in {importer} matches no file: nothing is read "
            "from there.",
            a.where(at(file_named(eff, importer) or top, ("imports",))),
            "Nothing to do if that directory is meant to be empty; otherwise check that "
            "drop-ins are written there.",
        ))
    out += [Finding("FM01", Severity.WARNING, text, where, fix) for text, fix, where in cwd]
    return out


def _missing_imports(a: Analysis) -> list[Finding]:
    """Literal imports that do not exist: containerd refuses to start."""
    out = []
    for refusal in a.refusals:
        match = MISSING_IMPORT.match(refusal)
        if match:
            importer = file_named(a.eff, match["path"]) or a.eff.files[0]
            out.append(Finding(
                "FM01", Severity.ERROR, refusal, a.where(at(importer, ("imports",))),
                f"Create {match['target']} or remove it from `imports` in {importer.path}; a "
                "glob (`*`) that matches nothing is accepted, a missing literal path is not."))
    return out


def _missing_planned(a: Analysis, read: set[str]) -> tuple[list[Finding], set[str]]:
    """Planned files that are not read and expected runtimes no read file defines; also
    the import globs that already explain a missing file."""
    eff, top = a.eff, a.eff.files[0]
    imports_at = a.where(at(top, ("imports",)))
    patterns = _import_patterns(eff)
    runtimes = sorted(n for n in a.facts.expected_runtimes
                      if n not in eff.runtimes and n not in a.defined)
    note = refusal_note(a, "FM01")
    missing = [p for p in a.facts.expected_files if p not in read]
    covered: set[str] = set()
    out: list[Finding] = []
    for path in missing:
        covering = [g for g in patterns if _glob_covers(g, path)]
        covered.update(covering)
        if covering:
            why = f"the imports glob {covering[0]} covers it, but it was not found"
            fix = f"Write {path} on the node (it is planned but absent)."
        else:
            glob = posixpath.join(posixpath.dirname(path), "*.toml")
            why = f"no `imports` entry covers it (the glob {glob} would)"
            fix = (f'Add "{glob}" to `imports` in {top.path}, or write the file where an '
                   "existing imports glob reads it.")
        message = f"planned drop-in {path} is not among the files containerd reads: {why}."
        if not out and runtimes:
            message += (f" No file containerd reads defines runtime(s) {', '.join(runtimes)}: "
                        f'pods using them fail with `no runtime for "{runtimes[0]}" is '
                        f"configured`.{note}{a.classes_note(runtimes)}")
        out.append(Finding("FM01", Severity.ERROR, message, imports_at, fix))
    if not missing:
        for name in runtimes:
            classes = a.classes_of(name)
            pods = (f"pods of RuntimeClass{'es' if len(classes) > 1 else ''} "
                    f"{', '.join(classes)} (handler {name})" if classes else
                    f"pods with runtimeClassName {name}")
            out.append(Finding(
                "FM01", Severity.ERROR,
                f"no file containerd reads defines runtime {name!r}: {pods} fail with "
                f'`no runtime for "{name}" is configured`.'
                + (note if name == eff.default_runtime else ""),
                imports_at,
                f"Write the {name} runtime into a drop-in that an `imports` glob of "
                f"{top.path} reads (read now: {', '.join(sorted(read))})." if not eff.no_file
                else _import_fix(a, "/etc/containerd/conf.d/*.toml")
                + f", and write the {name} runtime into a drop-in there.",
            ))
    return out, covered


def _import_fix(a: Analysis, glob: str) -> str:
    """How to make containerd read `glob`: an `imports` entry in the top-level file, or,
    on a node without one, the file itself (containerd's defaults read no drop-in)."""
    top = a.eff.files[0].path
    if not a.eff.no_file:
        return f'Add "{glob}" to `imports` in {top}'
    return (f"Create {top} (the node has none, and containerd's built-in defaults read no "
            f'drop-in) holding `version = {a.eff.containerd_version.max_config_version}` and '
            f'`imports = ["{glob}"]`')


def _cwd_globs(a: Analysis) -> list[tuple[str, str, str]]:
    """(message, fix, where) per relative glob that 1.6 resolves against its working dir."""
    out = []
    for importer, raw in _load_globs(a.eff, "cwd"):
        f = file_named(a.eff, importer) or a.eff.files[0]
        absolute = posixpath.normpath(posixpath.join(posixpath.dirname(importer), raw))
        out.append((
            f"containerd {a.eff.containerd_version} resolves the relative imports glob {raw!r}"
            f" in {importer} against the daemon's working directory (/ under systemd), not "
            f"against {posixpath.dirname(importer)}.",
            f'Use the absolute path "{absolute}" in `imports`.',
            a.where(at(f, ("imports",))),
        ))
    return out


def _load_globs(eff: EffectiveConfig, which: Literal["empty", "cwd"]) -> list[tuple[str, str]]:
    if eff.load is None:
        return []
    # An entry listed twice in `imports` is one problem, reported once.
    return list(dict.fromkeys(eff.load.empty_globs if which == "empty" else eff.load.cwd_globs))


def _import_patterns(eff: EffectiveConfig) -> list[str]:
    """Every `imports` entry as an absolute path or glob, resolved as the loader does."""
    out: list[str] = []
    for f in eff.files:
        for raw in f.imports:
            if not raw:
                continue
            if posixpath.isabs(raw):
                out.append(posixpath.normpath(raw))
            elif "*" in raw and not eff.containerd_version.globs_relative_to_parent:
                out.append(posixpath.normpath(posixpath.join("/", raw)))
            else:
                out.append(posixpath.normpath(posixpath.join(posixpath.dirname(f.path), raw)))
    return out


def _glob_covers(pattern: str, path: str) -> bool:
    parts, names = pattern.strip("/").split("/"), posixpath.normpath(path).strip("/").split("/")
    return len(parts) == len(names) and all(
        fnmatch.fnmatchcase(n, p) for p, n in zip(parts, names, strict=True))
