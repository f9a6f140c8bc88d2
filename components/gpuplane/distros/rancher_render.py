"""What RKE2 and K3s render into containerd's config at every start, beyond the template.

Read at source (k3s-io/k3s; RKE2 runs K3s's agent code, see data/baselines/README.md):
- **Runtime detection**, `pkg/agent/containerd/runtimes.go` (read at commit cd1fadb9):
  at every start the agent looks up `nvidia-container-runtime`,
  `nvidia-container-runtime-experimental` and `nvidia-container-runtime.cdi` and adds
  runtimes `nvidia`, `nvidia-experimental` and `nvidia-cdi` (type io.containerd.runc.v2,
  `BinaryName` the path found, `SystemdCgroup` the node's value) to the config it renders
  from its built-in template. The earlier `pkg/agent/containerd/nvidia.go` (read at commit
  bad22133) searched `/usr/local/nvidia/toolkit` (the GPU Operator's install dir) before
  `/usr/bin`, in that order of precedence.
- **Base template**, k3s-io/k3s PR #7991 (v1.24.17, v1.25.13, v1.26.8, v1.27.5, v1.28.1
  and later): a user template may hold `{{ template "base" . }}`, which renders the
  built-in template, detected runtimes included, in its place. Text appended after it
  must not define a table the base already defines: containerd then refuses the file
  ("toml: table runc already exists", k3s-io/docs#566).
- **NRI**: the version-2 built-in template (`pkg/agent/templates/templates_linux.go` read
  at commit 06be48b6) renders no `io.containerd.nri.v1.nri` table, so containerd's own
  default holds (1.7: off) and a template may add the table after the base once
  (gpuplane.plan.nri). The version-3 template was not read (data/baselines/README.md): a
  plan from a node's captured files sees whether its rendered base holds the table, and
  gpuplane then edits instead of appending.
- **Drop-in dir**, k3s-io/k3s PR #13680 (merged 2026-02-25): the built-in templates import
  `<template dir>/config.toml.d/*.toml` (version 2) or `config-v3.toml.d/*.toml`
  (version 3). Its first release tag was not confirmed, so gpuplane uses the dir only where
  the node's own rendered config shows the import.

The host toolkit's package puts `nvidia-container-runtime` in `/usr/bin`
(NVIDIA/nvidia-container-toolkit `packaging/debian/nvidia-container-toolkit-base.install`,
read at commit 179d8655), where both generations of the detection find it.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from typing import Any

import tomlkit

from gpuplane.containerd.versions import CRI_V2, CRI_V3_RUNTIME, RUNC_V2

BASE = '{{ template "base" . }}'
_BASE_LINE = re.compile(r'^[ \t]*\{\{-?[ \t]*template[ \t]+"base"[ \t]+\.[ \t]*-?\}\}[ \t]*$',
                        re.MULTILINE)
# Runtime name -> the binary K3s looks for (runtimes.go, `findNvidiaContainerRuntimes`).
DETECTED_RUNTIMES = (
    ("nvidia", "nvidia-container-runtime"),
    ("nvidia-experimental", "nvidia-container-runtime-experimental"),
    ("nvidia-cdi", "nvidia-container-runtime.cdi"),
)
HOST_TOOLKIT_BINARIES = ("/usr/bin/nvidia-container-runtime",)
# What the GPU Operator's toolkit installs into its dir (`$ROOT/toolkit`, ROOT
# /usr/local/nvidia; gpuplane.toolkit.output), which K3s searches first since
# k3s-io/k3s#10761 (`runtimesPath` in pkg/agent/containerd/config_linux.go; see
# gpuplane.distros.rancher_mode). `.legacy` is installed too and detected by no one.
OPERATOR_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
OPERATOR_TOOLKIT_BINARIES = tuple(
    posixpath.join(OPERATOR_TOOLKIT_DIR, name)
    for name in ("nvidia-container-runtime", "nvidia-container-runtime.cdi",
                 "nvidia-container-runtime.legacy"))


def extends_base(template: str | None) -> bool:
    """Whether `template` renders K3s's built-in template in place of a base action."""
    return template is not None and _BASE_LINE.search(template) is not None


def dropin_dir(template_path: str, config_version: int) -> str:
    """The drop-in dir the built-in template of this config version imports (PR #13680)."""
    name = "config-v3.toml.d" if config_version >= 3 else "config.toml.d"
    return posixpath.join(posixpath.dirname(template_path), name)


def imported_dropin_dir(rendered: str | None, template_path: str) -> str | None:
    """The drop-in dir the node's rendered config imports, or None (a K3s/RKE2 release
    without PR #13680, or a config rendered from a user's own whole template)."""
    data = _parse(rendered or "")
    imports = data.get("imports", [])
    wanted = dropin_dir(template_path, int(data.get("version", 1)))
    if isinstance(imports, list) and posixpath.join(wanted, "*.toml") in imports:
        return wanted
    return None


def detect(rendered: str, binaries: tuple[str, ...]) -> str:
    """The config the built-in template renders once `binaries` are on the node: `rendered`
    with a table for each detected nvidia runtime it does not define yet. Where one binary
    name is in `binaries` twice, the first wins (K3s's search order: the operator's dir
    before PATH)."""
    doc = tomlkit.parse(rendered)
    data = doc.unwrap()
    key = CRI_V3_RUNTIME if int(data.get("version", 1)) >= 3 else CRI_V2
    runtimes = data.get("plugins", {}).get(key, {}).get("containerd", {}).get("runtimes", {})
    systemd = runtimes.get("runc", {}).get("options", {}).get("SystemdCgroup", False)
    found: dict[str, str] = {}
    for binary in binaries:
        found.setdefault(posixpath.basename(binary), binary)
    added = False
    for name, binary in DETECTED_RUNTIMES:
        if binary in found and name not in runtimes:
            table = _super(doc, ("plugins", key, "containerd", "runtimes"))
            runtime = tomlkit.table()
            runtime["runtime_type"] = RUNC_V2
            runtime["options"] = {"BinaryName": found[binary], "SystemdCgroup": systemd}
            table[name] = runtime
            added = True
    return tomlkit.dumps(doc) if added else rendered


def render(template: str, base: str) -> str:
    """The config K3s renders from a template that extends the base: `base` (what the
    built-in template renders on this node) in place of the base action."""
    return _BASE_LINE.sub(lambda _: base.rstrip("\n"), template, count=1)


def split_base(template: str) -> tuple[str, str, str]:
    """A template that extends the base as its text before the base action, the action,
    and its text after."""
    match = _BASE_LINE.search(template)
    assert match is not None
    return template[:match.start()], match.group(0), template[match.end():]


def base_of(rendered: str, template: str) -> str:
    """The built-in template's part of `rendered`, the config K3s rendered from `template`
    or from an earlier version of it: K3s renders the template's own text as written, so
    `rendered` starts with what the template holds before its base action and ends with
    what follows it, or with the first lines of that (gpuplane appends to a template, and
    the node still runs the config rendered before). With no such ending, `rendered` is
    what the built-in template rendered alone (the template is new since the last start)."""
    match = _BASE_LINE.search(template)
    assert match is not None
    head, tail = template[:match.start()], template[match.end():]
    if not rendered.startswith(head):
        return rendered
    body = rendered[len(head):]
    cuts = [i for i in range(len(tail), 0, -1) if i == len(tail) or tail[i - 1] == "\n"]
    for cut in cuts:
        if body.endswith(tail[:cut]):
            return body[:len(body) - cut]
    return body


def appended(patch: dict[str, Any], key: str, header: str) -> str:
    """TOML text that adds `patch` to CRI table `key`, naming only the tables it sets
    values in (so nothing the base defines is defined twice by a parent header)."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment(header))
    doc["plugins"] = _super_from({key: patch})
    return tomlkit.dumps(doc)


def loads_ok(text: str) -> str | None:
    """None when `text` is valid TOML, else the parser's complaint (duplicate tables)."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return str(err)
    return None


def _parse(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _super(doc: Any, path: tuple[str, ...]) -> Any:
    table = doc
    for part in path:
        if part not in table:
            table[part] = tomlkit.table(is_super_table=True)
        table = table[part]
    return table


def _super_from(data: dict[str, Any]) -> Any:
    """A tomlkit table for `data` whose tables without plain values get no header."""
    plain = {k: v for k, v in data.items() if not isinstance(v, dict)}
    table = tomlkit.table(is_super_table=not plain)
    for k, v in data.items():
        table[k] = _super_from(v) if isinstance(v, dict) else v
    return table
