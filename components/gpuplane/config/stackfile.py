"""Read `stacks/Pulumi.<name>.yaml` as the Pulumi CLI would, remembering each key's line.

Errors then point at the file and line a user must edit. `secure:` values cannot be
decrypted offline; they become a placeholder that stays marked secret.

A key written without a namespace (`rollout:`) is the project's own, as the Pulumi CLI
reads a stack file (`stackConfigNamespacedWithProject`, sdk/go/common/workspace/loaders.go
at pulumi v3.260.0): `<project name>:rollout`, the name from Pulumi.yaml. In a project
named `gpuplane` that is `gpuplane:rollout`; elsewhere it is not gpuplane's, and one that
looks like a gpuplane key is warned about (file:line and the fix), never dropped in silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuplane.config import (
    NAMESPACE,
    SECRET_KEYS,
    StackConfig,
    StackConfigError,
    parse_stack_config,
)
from gpuplane.config.sections import NUMBER_NOT_VERSION, number_version_message
from gpuplane.config.stack import KEYS

SECRET_PLACEHOLDER = "[secret: not decrypted offline]"
_SECRET_FIX = ("{what} in plain text in the stack file (anyone who can read the repository "
               "or the CI log has it); fix: `pulumi config set --secret {key} < "
               "~/.ssh/id_ed25519` (the key's file), which stores it encrypted as "
               "`secure:`; and replace the key if this file was ever pushed")


class StackFileError(Exception):
    """The stack file is missing or is not valid YAML."""


@dataclass
class StackFile:
    name: str
    path: Path
    values: dict[str, Any]                      # gpuplane keys without the prefix
    other: dict[str, Any] = field(default_factory=dict)   # other namespaces (kubernetes:…)
    secret_keys: list[str] = field(default_factory=list)  # full keys, e.g. gpuplane:sshPrivateKey
    lines: dict[str, int] = field(default_factory=dict)   # "gpuplane:nodes[0].gpus" -> line
    # The text of each plain-number scalar as written ("1.30"), which the parsed number
    # (1.3) has lost: a version's quoting fix must quote what the user wrote.
    numbers: dict[str, str] = field(default_factory=dict)
    # Keys the stack has that gpuplane does not read though they look like its own
    # (`rollout:` in a project not named gpuplane): `file:line: ...` with the fix.
    warnings: list[str] = field(default_factory=list)
    # The same, as the JSON plan gives them (`warnings`): where (file:line), message, fix.
    warning_entries: list[dict[str, str]] = field(default_factory=list)

    def line_of(self, key: str) -> int | None:
        """The line of `key` or of its nearest parent present in the file."""
        while key:
            if key in self.lines:
                return self.lines[key]
            cut = max(key.rfind("."), key.rfind("["))
            key = key[:cut] if cut > 0 else ""
        return None

    def config(self) -> StackConfig:
        """Validate; errors name file:line and the key, a plaintext secret among them."""
        leaks = self.plaintext_secrets()
        try:
            cfg = parse_stack_config(self.values)
        except StackConfigError as exc:
            raise self.located(StackConfigError([*exc.problems, *leaks])) from None
        if leaks:
            raise self.located(StackConfigError(leaks))
        return cfg

    def plaintext_secrets(self) -> list[tuple[str, str]]:
        """A secret key (`gpuplane:sshPrivateKey`), or any value holding a private key,
        written in clear rather than `secure:`. Refused, not warned about: the stack file
        is committed and the plan runs in PR CI, so the key is already leaking, and
        nothing works less well once it is encrypted."""
        found = []
        for key, value in self.values.items():
            full = f"{NAMESPACE}:{key}"
            if full in self.secret_keys:
                continue
            if key in SECRET_KEYS and value is not None:
                found.append((full, _SECRET_FIX.format(key=full, what="a secret")))
            elif "PRIVATE KEY-----" in str(value):
                found.append((full, _SECRET_FIX.format(key=full, what="a private key")))
        return found

    def located(self, exc: StackConfigError) -> StackConfigError:
        """The same problems, each prefixed with file:line of its key."""
        located = []
        for key, message in exc.problems:
            raw = self.numbers.get(key)
            if raw is not None and NUMBER_NOT_VERSION in message:
                message = number_version_message(key, raw)
            line = self.line_of(key)
            where = f"{self.path}:{line}" if line else str(self.path)
            located.append((f"{where}: {key}", message))
        return StackConfigError(located)

    def pulumi_config(self) -> dict[str, str]:
        """What `pulumi.runtime.set_all_config` takes: JSON for objects, text otherwise."""
        import json

        out = {}
        for key, value in {**{f"{NAMESPACE}:{k}": v for k, v in self.values.items()},
                           **self.other}.items():
            out[key] = value if isinstance(value, str) else json.dumps(value)
        return out


def stack_path(name: str, stacks_dir: Path) -> Path:
    return stacks_dir / f"Pulumi.{name}.yaml"


def available_stacks(stacks_dir: Path) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


# libyaml's safe loader where PyYAML was built with it (the wheels are): 10x faster on a
# 1000-node stack; marks (file:line) are the same.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_stack_file(name: str, stacks_dir: Path, project: str | None = None) -> StackFile:
    """`project`: the Pulumi project's name, the namespace of a key written without one
    (default: the `name` of the Pulumi.yaml at or above `stacks_dir`, else `gpuplane`)."""
    path = stack_path(name, stacks_dir)
    if not path.is_file():
        known = ", ".join(available_stacks(stacks_dir)) or "none"
        raise StackFileError(f"{path}: no such stack file; stacks in {stacks_dir}: {known}")
    text = _read_text(path)
    try:
        node = yaml.compose(text, Loader=_LOADER)
        # The data from the same nodes (parsing the text once: a fleet's stack is MBs).
        data = (_LOADER("").construct_document(node) if node is not None else None) or {}
    except yaml.YAMLError as exc:
        raise StackFileError(_yaml_error(path, exc, text)) from None
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise StackFileError(f"{path}: expected a mapping with a `config:` mapping")
    stack = StackFile(name, path, {})
    owner = project if project is not None else project_name(stacks_dir)

    def namespaced(key: str) -> str:   # as the Pulumi CLI reads the key
        return key if ":" in key else f"{owner}:{key}"

    _record_lines(_child(node, "config"), "", stack.lines, stack.numbers, namespaced)
    for raw, value in (data.get("config") or {}).items():
        full = namespaced(str(raw))
        ns, _, key = full.partition(":")
        if ":" not in str(raw) and ns != NAMESPACE and key in KEYS:
            entry = {"where": f"{path}:{stack.lines.get(full, 0)}",
                     "message": f"`{raw}` has no namespace, so Pulumi reads it as `{full}` "
                                f"(the project {owner!r}'s own key) and gpuplane never sees it",
                     "fix": f"write `{NAMESPACE}:{raw}`"}
            stack.warning_entries.append(entry)
            stack.warnings.append(f"{entry['where']}: {entry['message']}; fix: {entry['fix']}")
        if isinstance(value, dict) and set(value) == {"secure"}:
            value = SECRET_PLACEHOLDER
            stack.secret_keys.append(full)
        if ns == NAMESPACE:
            stack.values[key] = value
        else:
            stack.other[full] = value
    return stack


def _read_text(path: Path) -> str:
    """The stack file as text. Pulumi reads stack files as UTF-8; anything else is named
    with the line of the first bad byte instead of a UnicodeDecodeError traceback."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StackFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise StackFileError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "fix: save the stack file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)") from None


def _yaml_error(path: Path, exc: yaml.YAMLError, text: str = "") -> str:
    """`file:line:col: not valid YAML: problem (context)`: the stack file, not the
    "<unicode string>" PyYAML names when it parses text. Two cases get their own words,
    because PyYAML's are misleading: a tab (YAML indents with spaces only), and an
    unclosed `{`/`[`, which PyYAML reports where it gave up (the next line): the line that
    opened it is the one to fix."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    opened = getattr(exc, "context_mark", None)
    lines = text.splitlines()
    line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
    if mark is not None and line[mark.column:mark.column + 1] == "\t":
        return (f"{where}: not valid YAML: a tab character; YAML indents with spaces only. "
                "fix: replace the tab with spaces (as many as the lines around it use)")
    if context and context.startswith("while parsing a flow") and opened is not None \
            and mark is not None and opened.line < mark.line:
        bracket = "{" if "mapping" in context else "["
        close = "}" if bracket == "{" else "]"
        return (f"{path}:{opened.line + 1}:{opened.column + 1}: not valid YAML: the "
                f"`{bracket}` opened here is not closed (YAML found line {mark.line + 1} "
                f"before a `{close}`); fix: close it with `{close}` on line "
                f"{opened.line + 1}, or quote a value there that holds a `,`, `{close}` "
                "or `: `")
    detail = f"{problem} ({context})" if context else problem
    return (f"{where}: not valid YAML: {detail}; fix: correct the YAML there (quote values "
            "that contain ': ', '#', '[' or '{')")


def _child(node: Any, key: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                return v
    return None


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _record_lines(node: Any, prefix: str, out: dict[str, int], numbers: dict[str, str],
                  top: Callable[[str], str] = str) -> None:
    """`out[key] = line` for every key below `node`, `numbers[key]` = the text of each
    plain-number scalar; `top` names a top-level key."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = f"{prefix}.{k.value}" if prefix else top(str(k.value))
            out[key] = k.start_mark.line + 1
            _record_lines(v, key, out, numbers)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            key = f"{prefix}[{i}]"
            out[key] = v.start_mark.line + 1
            _record_lines(v, key, out, numbers)
    elif isinstance(node, yaml.ScalarNode) and node.tag in _NUMBER_TAGS and not node.style:
        numbers[prefix] = node.value


def project_name(stacks_dir: Path) -> str:
    """The `name` of the Pulumi.yaml at or above `stacks_dir` (the namespace Pulumi gives
    a stack key written without one); `gpuplane` where there is none or it has no name."""
    path = project_root(stacks_dir) / "Pulumi.yaml"
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return NAMESPACE
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else NAMESPACE


def project_root(stacks_dir: Path) -> Path:
    """The directory with Pulumi.yaml at or above the stacks dir (where `pulumi up` runs
    the program); the stacks dir's parent when there is none."""
    here = stacks_dir.resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return here.parent


__all__ = [
    "SECRET_PLACEHOLDER",
    "StackFile",
    "StackFileError",
    "available_stacks",
    "load_stack_file",
    "project_name",
    "project_root",
]
