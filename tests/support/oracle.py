"""Ask real containerd what it does with a config: the test suite's oracle.

Every claim the project makes about containerd (how drop-ins merge, which runtimes the
CRI plugin ends up with, whether a pod sandbox really goes through the nvidia handler)
is checked against the real daemons fetched by ``scripts/fetch-containerd.sh`` rather
than against our own model of them. This module is the only place that knows how to
drive those binaries:

* :func:`dump` runs ``containerd config dump`` (the authoritative merge, ~0.05 s);
* :func:`effective_from_dump` reduces a dump to the normalised CRI view the
  differential tests compare against;
* :class:`Daemon` runs a real, throw-away containerd on a copy of a config layout;
* :func:`cri_status` and :func:`run_sandbox` talk CRI to it over gRPC;
* :func:`nvidia_wrapper` stands in for nvidia-container-runtime.

Missing binaries skip a test, except under ``GPUPLANE_REQUIRE_REAL=1`` (CI) where they
fail it: see :func:`unavailable`, the single place that policy lives.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import ctypes
import dataclasses
import glob
import hashlib
import io
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import uuid
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest
import tomlkit

LINES: tuple[str, ...] = ("1.6", "1.7", "2.0", "2.1", "2.2")
"""containerd release lines the suite runs against (one build each in the cache)."""

RUNC = Path("/usr/sbin/runc")
"""bookworm's runc, used for every line (newer Debian runc needs a newer glibc)."""

BUSYBOX = Path("/bin/busybox")
"""busybox-static: the whole userland of the pause image."""

SHIM = "containerd-shim-runc-v2"
CRI_PROTO_REL = "usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto"

# The pod sandboxes' cgroupfs parent (cgroup v1 hierarchy here, no systemd). Each daemon
# gets its own child, ``<pid>-<rundir>``, removed again when the daemon stops; what a
# killed run left behind is swept (:func:`sweep_stale`) before the first daemon starts.
CGROUP_PARENT = "/gpuplane-oracle"

# Unix socket paths must fit sockaddr_un (108 bytes, NUL included); containerd and the
# shims create sockets a little below the state dir, so keep the run dir far shorter.
_MAX_RUNDIR_LEN = 40


class OracleError(AssertionError):
    """The harness (not the config under test) could not do what was asked.

    Carries containerd's log so the failure explains itself.
    """


# --------------------------------------------------------------------------------------
# Where the real binaries are, and what happens when they are not there


def cache_dir() -> Path:
    """``$GPUPLANE_CACHE`` or ``~/.cache/gpuplane``: where the fetch script puts builds."""
    env = os.environ.get("GPUPLANE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gpuplane"


def require_real() -> bool:
    """True when missing real binaries must fail the run instead of skipping (CI)."""
    return os.environ.get("GPUPLANE_REQUIRE_REAL", "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


_MAKE_CONTAINERD = "run `make containerd` (scripts/fetch-containerd.sh, build-oracles.sh)"


def unavailable(reason: str, remedy: str = _MAKE_CONTAINERD) -> NoReturn:
    """The one policy for "the real thing is not here": skip locally, fail in CI.

    CI sets ``GPUPLANE_REQUIRE_REAL=1`` so that it can never go green by skipping the
    parts of the suite that talk to real containerd. `remedy` says how to get it.
    """
    if require_real():
        pytest.fail(f"{reason} (GPUPLANE_REQUIRE_REAL is set: this may not be skipped)")
    pytest.skip(f"{reason}; {remedy}")


def _check_line(line: str) -> None:
    if line not in LINES:
        raise ValueError(f"unknown containerd line {line!r}; expected one of {LINES}")


def binary(line: str, name: str = "containerd") -> Path:
    """Path of ``name`` (containerd, ctr or the runc shim) for ``line``.

    Skips/fails the calling test through :func:`unavailable` if the build is missing.
    """
    _check_line(line)
    sub = "shim" if name == SHIM else "bin"
    path = cache_dir() / "containerd" / line / sub / name
    if not (path.exists() and os.access(path, os.X_OK)):
        unavailable(f"containerd {line}: {path} is missing")
    return path


def require_line(line: str) -> None:
    """Make sure containerd, ctr and the shim of ``line`` are all present."""
    for name in ("containerd", "ctr", SHIM):
        binary(line, name)


def require_daemon_support(line: str) -> None:
    """Everything a running daemon needs beyond the line's binaries: root, runc, busybox."""
    require_line(line)
    if os.geteuid() != 0:
        unavailable("running containerd needs root")
    for tool in (RUNC, BUSYBOX):
        if not (tool.exists() and os.access(tool, os.X_OK)):
            unavailable(f"{tool} is missing")


# --------------------------------------------------------------------------------------
# containerd config dump and the normalised effective CRI view


@dataclasses.dataclass(frozen=True)
class DumpResult:
    """Outcome of ``containerd --config X config dump``."""

    ok: bool
    config: dict[str, Any] | None
    """The dumped (merged) config parsed with tomllib; None when containerd refused."""
    error: str
    """containerd's stderr, stripped (empty on success unless it warned)."""
    returncode: int
    text: str = ""
    """The dump as containerd printed it (what the node agent's awk reader reads)."""


def dump(line: str, config: Path) -> DumpResult:
    """Let ``line``'s containerd merge ``config`` and its imports, as the daemon would.

    Runs from ``/``, the working directory systemd gives containerd on a node: 1.6
    resolves *relative glob* imports against the working directory (relative plain
    paths, and every relative import on 1.7/2.1, against the including file's dir).
    """
    exe = binary(line)
    proc = subprocess.run(
        [str(exe), "--config", os.path.abspath(config), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    error = proc.stderr.strip()
    if proc.returncode != 0:
        return DumpResult(False, None, error, proc.returncode)
    try:
        parsed = tomllib.loads(proc.stdout)
    except tomllib.TOMLDecodeError as exc:  # would be a harness bug, say so loudly
        raise OracleError(f"containerd {line} dumped TOML tomllib cannot read: {exc}") from exc
    return DumpResult(True, parsed, error, proc.returncode, proc.stdout)


def cri_runtime_table_key(line: str) -> str:
    """Key under ``plugins`` of the table holding ``containerd.runtimes`` in a dump.

    1.x dumps are version 2 (``io.containerd.grpc.v1.cri``); 2.x dumps are always
    version 3 (``io.containerd.cri.v1.runtime``), whatever version the input had.
    """
    _check_line(line)
    return "io.containerd.cri.v1.runtime" if line.startswith("2.") else "io.containerd.grpc.v1.cri"


def _is_default(value: Any) -> bool:
    # bool is an int: compare by type so that True/1 are kept and False/0 dropped.
    if isinstance(value, bool):
        return value is False
    if isinstance(value, int | float):
        return value == 0
    return value in ("", [], {})


def _normalise_runtimes(runtimes: dict[str, Any], type_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, rt in runtimes.items():
        rt = rt or {}
        options = rt.get("options") or {}
        out[name] = {
            "runtime_type": rt.get(type_key) or None,
            "options": {k: v for k, v in options.items() if not _is_default(v)},
        }
    return out


def effective_from_dump(line: str, config: dict[str, Any]) -> dict[str, Any]:
    """The CRI runtime view of a dump, normalised: the contract differential tests use.

    Returns ``{"default_runtime": str, "cdi": bool | None,
    "runtimes": {name: {"runtime_type": str | None, "options": {key: value}}}}``.

    Normalisation (the dump prints every field, defaults included; a model of the merge
    only knows what was written):

    * the CRI table is ``plugins."io.containerd.grpc.v1.cri"`` for 1.x and
      ``plugins."io.containerd.cri.v1.runtime"`` for 2.x (dumps are version 3 there);
    * ``default_runtime`` is ``.containerd.default_runtime_name``;
    * ``cdi`` is the table's ``enable_cdi``; None where the line has no such field (1.6);
    * a runtime's ``runtime_type`` of ``""`` becomes None;
    * option values equal to ``""``, ``False``, ``0``, ``[]`` or ``{}`` are dropped
      (that is what the dump prints for an unset option), so ``SystemdCgroup = false``
      and an absent ``SystemdCgroup`` compare equal;
    * every other runtime field (``runtime_path``, ``sandboxer``, annotations...) and the
      legacy ``default_runtime`` / ``untrusted_workload_runtime`` tables are left out.
    """
    key = cri_runtime_table_key(line)
    try:
        cri = config["plugins"][key]
    except (KeyError, TypeError) as exc:
        raise OracleError(f"containerd {line} dump has no plugins.{key!r} table") from exc
    ctd = cri.get("containerd") or {}
    return {
        "default_runtime": ctd.get("default_runtime_name", ""),
        "cdi": cri.get("enable_cdi"),
        "runtimes": _normalise_runtimes(ctd.get("runtimes") or {}, "runtime_type"),
    }


def effective_from_status(status: dict[str, Any]) -> dict[str, Any]:
    """The same normalised view as :func:`effective_from_dump`, from :func:`cri_status`.

    The CRI plugin reports its live config as JSON (camelCase keys) in ``info.config``;
    this is what the running daemon actually uses, so it must equal the dump's view.
    """
    cfg = status["info"]["config"]
    ctd = cfg.get("containerd") or {}
    return {
        "default_runtime": ctd.get("defaultRuntimeName", ""),
        "cdi": cfg.get("enableCDI"),
        "runtimes": _normalise_runtimes(ctd.get("runtimes") or {}, "runtimeType"),
    }


def sandbox_image_from_dump(line: str, config: dict[str, Any]) -> str:
    """The pause image the CRI plugin will use (``sandbox_image`` / pinned ``sandbox``)."""
    plugins = config.get("plugins", {})
    if line.startswith("2."):
        images = plugins.get("io.containerd.cri.v1.images", {})
        return images.get("pinned_images", {}).get("sandbox", "")
    return plugins.get("io.containerd.grpc.v1.cri", {}).get("sandbox_image", "")


def snapshotter_from_dump(line: str, config: dict[str, Any]) -> str:
    """The snapshotter CRI unpacks images into (overlayfs unless configured)."""
    plugins = config.get("plugins", {})
    if line.startswith("2."):
        return plugins.get("io.containerd.cri.v1.images", {}).get("snapshotter") or "overlayfs"
    cri = plugins.get("io.containerd.grpc.v1.cri", {})
    return (cri.get("containerd") or {}).get("snapshotter") or "overlayfs"


# --------------------------------------------------------------------------------------
# Copying a config layout so that a daemon can run it without touching the host


# Top-level keys that place the daemon on the host. They are removed from every file and
# set (to paths inside the run dir) in the top-level copy only: imports merge top-level
# keys over the main file, so leaving them in a drop-in would move the daemon back onto
# /var/lib/containerd. ``oom_score`` / ``cgroup.path`` adjust containerd's own process,
# which this sandbox does not allow (no CAP_SYS_RESOURCE).
_PLACEMENT_KEYS: tuple[tuple[str, ...], ...] = (
    ("root",),
    ("state",),
    ("temp",),
    ("oom_score",),
    ("grpc", "address"),
    ("grpc", "tcp_address"),
    ("ttrpc", "address"),
    ("debug", "address"),
    ("metrics", "address"),
    ("cgroup", "path"),
)

_CRI_RUNTIME_KEYS_V3 = ("io.containerd.cri.v1.runtime",)
_CRI_RUNTIME_KEYS_V12 = ("cri", "io.containerd.grpc.v1.cri")


def _file_version(data: dict[str, Any]) -> int:
    version = data.get("version", 1)
    return version if isinstance(version, int) else 1


def _plugin_patches(version: int, rundir: Path) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """(candidate plugin keys, fields to force) for a file of config ``version``.

    * CRI runtime table: ``restrict_oom_score_adj = true``. The sandbox's default
      oom_score_adj (-998) cannot be set here (no CAP_SYS_RESOURCE); with this the pause
      container keeps the daemon's score instead. It changes no runtime semantics.
    * ``opt`` plugin ``path`` and NRI ``socket_path``: host paths (/opt/containerd,
      /var/run/nri/nri.sock, on by default in 2.x) moved into the run dir so that
      daemons never share or leave them.
    """
    if version >= 3:
        cri: tuple[str, ...] = _CRI_RUNTIME_KEYS_V3
    else:
        cri = _CRI_RUNTIME_KEYS_V12
    opt = (
        ("opt", "io.containerd.internal.v1.opt")
        if version < 2
        else ("io.containerd.internal.v1.opt",)
    )
    nri = ("nri", "io.containerd.nri.v1.nri") if version < 2 else ("io.containerd.nri.v1.nri",)
    return [
        (cri, {"restrict_oom_score_adj": True}),
        (opt, {"path": str(rundir / "opt")}),
        (nri, {"socket_path": str(rundir / "nri.sock")}),
    ]


def _resolve_imports(including: Path, patterns: list[str]) -> list[Path]:
    """Every file an ``imports`` list may name, on any line.

    Relative paths are relative to the including file's directory, except relative
    *globs* on 1.6, which are relative to the working directory (``/`` on a node and for
    :func:`dump`; the mirror root for :class:`Daemon`): both candidates are returned.
    Patterns with a ``*`` are globbed (sorted), others taken as they are (missing ones
    stay missing so that containerd reports them).
    """
    out: list[Path] = []
    for pattern in patterns:
        if os.path.isabs(pattern):
            candidates = [pattern]
        elif "*" in pattern:
            candidates = [str(including.parent / pattern), "/" + pattern]
        else:
            candidates = [str(including.parent / pattern)]
        for path in candidates:
            if "*" in path:
                out.extend(Path(p) for p in sorted(glob.glob(path)))
            else:
                out.append(Path(path))
    return out


def _mirror(root: Path, original: Path) -> Path:
    return root / os.path.abspath(original).lstrip("/")


def _del_path(data: Any, path: tuple[str, ...]) -> bool:
    for key in path[:-1]:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    if isinstance(data, dict) and path[-1] in data:
        del data[path[-1]]
        return True
    return False


def _set_path(data: Any, path: tuple[str, ...], value: Any, table: Any) -> None:
    for key in path[:-1]:
        if key not in data:
            data[key] = table()
        data = data[key]
    data[path[-1]] = value


def _patch(data: Any, *, top: bool, rundir: Path, add_cri: bool, version: int, table: Any) -> None:
    """Apply the daemon patches to one file's data (tomlkit document or plain dict)."""
    for path in _PLACEMENT_KEYS:
        _del_path(data, path)
    plugins = data.get("plugins")
    patches = _plugin_patches(version, rundir)
    for keys, fields in patches:
        present = [
            k for k in keys if isinstance(plugins, dict) and isinstance(plugins.get(k), dict)
        ]
        for key in present:
            for field, value in fields.items():
                plugins[key][field] = value
        is_cri = "restrict_oom_score_adj" in fields
        if top and not present and (not is_cri or add_cri):
            if "plugins" not in data:
                data["plugins"] = table()
                plugins = data["plugins"]
            plugins = data["plugins"]
            key = keys[0] if version < 2 else keys[-1]  # version 1 keys plugins by ID
            plugins[key] = table()
            for field, value in fields.items():
                plugins[key][field] = value
    if top:
        _set_path(data, ("root",), str(rundir / "root"), table)
        _set_path(data, ("state",), str(rundir / "state"), table)
        _set_path(data, ("grpc", "address"), str(rundir / "c.sock"), table)
        _set_path(data, ("ttrpc", "address"), str(rundir / "c.sock.ttrpc"), table)


def _rewrite_imports(data: Any, mirror_root: Path) -> None:
    imports = data.get("imports")
    if not isinstance(imports, list):
        return
    for i, pattern in enumerate(list(imports)):
        if isinstance(pattern, str) and os.path.isabs(pattern):
            imports[i] = str(mirror_root) + pattern


def _has_cri_runtime_table(data: dict[str, Any]) -> bool:
    keys = _CRI_RUNTIME_KEYS_V3 if _file_version(data) >= 3 else _CRI_RUNTIME_KEYS_V12
    plugins = data.get("plugins")
    return isinstance(plugins, dict) and any(k in plugins for k in keys)


class LayoutError(Exception):
    """A file of the layout is not TOML: the daemon must not be started on it."""


def prepare_for_daemon(config_path: Path, workdir: Path, rundir: Path | None = None) -> Path:
    """Copy ``config_path`` and everything it imports into ``workdir``; return the copy.

    The daemon must see the layout's *runtime semantics* unchanged while living entirely
    inside a throw-away directory. Files are mirrored under ``workdir/cfg`` at their
    absolute path (``/etc/containerd/config.toml`` → ``workdir/cfg/etc/containerd/
    config.toml``) so that relative imports resolve the same way; absolute ``imports``
    patterns get the mirror root prepended, and only the files the original patterns
    matched are copied, so each glob matches the same files in the same order. The
    daemon runs with the mirror root as its working directory, standing in for ``/``
    (1.6 resolves relative globs against the working directory).

    What changes (all through tomlkit, formatting kept; each patched file is re-read with
    tomllib and checked to differ from the original by exactly these edits):

    * every file: ``root``, ``state``, ``temp``, ``oom_score``, ``grpc.address``,
      ``grpc.tcp_address``, ``ttrpc.address``, ``debug.address``, ``metrics.address``,
      ``cgroup.path`` removed;
    * top-level file only: ``root = <rundir>/root``, ``state = <rundir>/state``,
      ``[grpc] address = <rundir>/c.sock``, ``[ttrpc] address = <rundir>/c.sock.ttrpc``
      (top-level keys merge normally across imports, so the main file is enough once
      they are gone from the drop-ins);
    * every file that has a CRI runtime table (version 1: ``cri``, version 2:
      ``io.containerd.grpc.v1.cri``, version 3: ``io.containerd.cri.v1.runtime``) gets
      ``restrict_oom_score_adj = true`` in it. containerd 1.6/1.7 replace a whole plugin
      table per imported file, so patching only one file would change which file wins;
      patching every file keeps the winner and its contents. If no file has such a table
      the top-level file gets one holding only that key;
    * the ``opt`` plugin's ``path`` and the NRI plugin's ``socket_path`` point into the
      run dir, in every file that has those tables and in the top-level file.

    No sandbox image is configured: :class:`Daemon` imports its local pause image under
    whatever name the effective config already uses.

    Raises :class:`LayoutError` if a file is not valid TOML (containerd would refuse it
    too; without parsing it the harness cannot make it safe to run).
    """
    config_path = Path(config_path)
    workdir = Path(workdir)
    rundir = Path(rundir) if rundir is not None else workdir
    mirror_root = workdir / "cfg"
    shutil.rmtree(mirror_root, ignore_errors=True)  # stale copies would match globs
    mirror_root.mkdir(parents=True)

    # Collect the layout breadth-first, as containerd does, each file once.
    files: list[Path] = []
    parsed: dict[Path, dict[str, Any]] = {}
    queue = [Path(os.path.abspath(config_path))]
    while queue:
        path = queue.pop(0)
        if path in parsed or not path.is_file():
            continue
        text = path.read_text()
        try:
            parsed[path] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise LayoutError(f"{path}: {exc}") from exc
        files.append(path)
        imports = parsed[path].get("imports")
        if isinstance(imports, list):
            patterns = [i for i in imports if isinstance(i, str)]
            queue.extend(Path(os.path.abspath(p)) for p in _resolve_imports(path, patterns))

    if not files:
        raise LayoutError(f"{config_path}: no such file")
    add_cri = not any(_has_cri_runtime_table(parsed[p]) for p in files)
    top = files[0]
    for path in files:
        version = _file_version(parsed[path])
        is_top = path == top
        doc = tomlkit.parse(path.read_text())
        _patch(
            doc, top=is_top, rundir=rundir, add_cri=add_cri, version=version, table=tomlkit.table
        )
        _rewrite_imports(doc, mirror_root)
        text = tomlkit.dumps(doc)

        expected = copy.deepcopy(parsed[path])
        _patch(expected, top=is_top, rundir=rundir, add_cri=add_cri, version=version, table=dict)
        _rewrite_imports(expected, mirror_root)
        if tomllib.loads(text) != expected:
            # tomlkit could not express the edit in place (exotic layout): fall back to
            # the plain data, which has exactly the intended semantics.
            text = tomlkit.dumps(expected)
            if tomllib.loads(text) != expected:
                raise OracleError(f"could not patch {path} for the daemon")

        target = _mirror(mirror_root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return _mirror(mirror_root, top)


# --------------------------------------------------------------------------------------
# The pause image: busybox-static sleeping forever, as an OCI image tar


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _blob(content: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(content).hexdigest(), content


def _normalise_image_name(name: str) -> str:
    """The fully-qualified reference CRI looks images up by (docker.io defaults)."""
    first, _, rest = name.partition("/")
    if first == "index.docker.io":
        return f"docker.io/{rest}"
    if not rest:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


def build_pause_image(dest: Path, name: str) -> Path:
    """Write an OCI image-layout tar named ``name`` whose entrypoint sleeps forever.

    One uncompressed layer holding ``/bin/busybox`` (busybox-static: no libraries) and a
    ``/pause`` link to it; entrypoint ``/bin/busybox sleep 2147483647``. The image name
    rides in the ``io.containerd.image.name`` index annotation, which ``ctr images
    import`` uses as the image's name.
    """
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            layer.addfile(info)
        _tar_add(layer, "bin/busybox", BUSYBOX.read_bytes(), 0o755)
        link = tarfile.TarInfo("pause")
        link.type = tarfile.SYMTYPE
        link.linkname = "bin/busybox"
        layer.addfile(link)
    layer_digest, layer_bytes = _blob(layer_buf.getvalue())

    config = {
        "architecture": _arch(),
        "os": "linux",
        "config": {"Entrypoint": ["/bin/busybox", "sleep", "2147483647"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config_bytes = _blob(json.dumps(config).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": len(layer_bytes),
            }
        ],
    }
    manifest_digest, manifest_bytes = _blob(json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": _arch(), "os": "linux"},
                "annotations": {"io.containerd.image.name": name},
            }
        ],
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _tar_add(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _tar_add(tar, "index.json", json.dumps(index).encode())
        for digest, data in (
            (layer_digest, layer_bytes),
            (config_digest, config_bytes),
            (manifest_digest, manifest_bytes),
        ):
            _tar_add(tar, "blobs/sha256/" + digest.split(":", 1)[1], data)
    return dest


# --------------------------------------------------------------------------------------
# Processes, mounts and cgroups a daemon may leave behind


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, cmdline with NULs as spaces) for every live process."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and fields[0] == "Z":
            continue
        table[int(entry)] = (int(fields[1]), cmd)
    return table


def _shims_and_descendants(address: str) -> list[int]:
    """Shims started for the daemon at ``address`` and every process below them."""
    table = _proc_table()
    roots = {pid for pid, (_, cmd) in table.items() if SHIM in cmd and f"-address {address}" in cmd}
    found = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return sorted(found)


def _kill_all(pids: list[int], timeout: float = 5.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = _proc_table()
        if not any(p in alive for p in pids):
            return
        time.sleep(0.02)


def _unescape_mount(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def _mounts_under(*dirs: Path) -> list[str]:
    prefixes = [str(d.resolve()).rstrip("/") + "/" for d in dirs]
    points: list[str] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = _unescape_mount(line.split()[4])
            if any((point + "/").startswith(p) for p in prefixes):
                points.append(point)
    return points


_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


def unmount_under(*dirs: Path) -> None:
    """Lazily unmount everything mounted at or below ``dirs``, deepest first."""
    for _ in range(5):  # stacked mounts need more than one pass
        points = _mounts_under(*dirs)
        if not points:
            return
        for point in sorted(points, key=lambda p: p.count("/"), reverse=True):
            _libc.umount2(point.encode(), _MNT_DETACH)


def _cgroup_roots() -> list[Path]:
    roots: list[Path] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] in (["cgroup"], ["cgroup2"]):
                roots.append(Path(_unescape_mount(left.split()[4])))
    return roots


def _remove_cgroups(relative: str) -> None:
    """rmdir ``relative`` (and its empty parents up to the root) in every hierarchy."""
    parts = Path(relative.strip("/")).parts
    for root in _cgroup_roots():
        for depth in range(len(parts), 0, -1):
            with contextlib.suppress(OSError):
                (root / Path(*parts[:depth])).rmdir()


def _owner_alive(name: str) -> bool:
    """Whether the process that named a cgroup ``<pid>-<rundir>`` still runs."""
    pid, sep, _ = name.partition("-")
    if not sep or not pid.isdigit():
        return False  # a name from before the pid prefix: its run has ended
    return Path(f"/proc/{pid}").exists()


def _rmdir_tree(top: Path) -> None:
    """rmdir ``top`` and every cgroup below it, deepest first (populated ones stay)."""
    for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if sub.is_dir():
            with contextlib.suppress(OSError):
                sub.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()


def sweep_stale() -> list[str]:
    """Remove what a killed earlier test run left under :data:`CGROUP_PARENT`.

    A run killed mid-test (Ctrl-C, a CI timeout) never reaches :meth:`Daemon.stop`: its
    pause containers' runc state and cgroups stay on the host. Each daemon's cgroup
    parent is ``<pid>-<rundir>``, so one whose pid is gone belongs to nobody. For those,
    runc's state is deleted (which kills and removes the container) and the cgroups
    rmdir'ed; a cgroup that still holds a process is left (rmdir refuses it). Returns
    the cgroup directories removed.
    """
    parent = CGROUP_PARENT.strip("/")
    for state_file in Path("/run/containerd/runc").glob("*/*/state.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            paths = json.loads(state_file.read_text()).get("cgroup_paths") or {}
            owner = next(
                (
                    Path(p).relative_to(root / parent).parts[0]
                    for p in paths.values()
                    for root in _cgroup_roots()
                    if Path(p).is_relative_to(root / parent) and Path(p) != root / parent
                ),
                None,
            )
            if owner is None or _owner_alive(owner):
                continue
            subprocess.run(
                [str(RUNC), "--root", str(state_file.parent.parent), "delete", "--force",
                 state_file.parent.name],
                capture_output=True,
                timeout=10,
                check=False,
            )
    removed: list[str] = []
    for root in _cgroup_roots():
        top = root / parent
        if not top.is_dir():
            continue
        for child in sorted(top.iterdir()):
            if child.is_dir() and not _owner_alive(child.name):
                _rmdir_tree(child)
                if not child.exists():
                    removed.append(str(child))
    return removed


def _clean_dead_tasks(state: Path) -> None:
    """Remove what killed shims leave outside the run dir.

    For each task bundle under ``state``: the runc state in the default runc root
    (``/run/containerd/runc/<namespace>/<id>``) and the shim's socket in
    ``/run/containerd/s/`` (named in the bundle's ``address`` on 1.x, ``bootstrap.json``
    on 2.x). A cleanly removed sandbox leaves neither; a crashed test would.
    """
    for bundle in sorted(state.glob("io.containerd.runtime.v2.task/*/*")):
        namespace, task_id = bundle.parent.name, bundle.name
        if (Path("/run/containerd/runc") / namespace / task_id).exists():
            subprocess.run(
                [
                    str(RUNC),
                    "--root",
                    f"/run/containerd/runc/{namespace}",
                    "delete",
                    "--force",
                    task_id,
                ],
                capture_output=True,
                timeout=10,
                check=False,
            )
        address = ""
        with contextlib.suppress(OSError, ValueError):
            address = (bundle / "address").read_text().strip()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            address = json.loads((bundle / "bootstrap.json").read_text())["address"]
        path = address.removeprefix("unix://")
        if path.startswith("/run/containerd/s/"):
            with contextlib.suppress(OSError):
                os.unlink(path)


# --------------------------------------------------------------------------------------
# A real, throw-away containerd


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """One row of ``ctr plugins ls``: status ok / error / skip, and the error if any."""

    type: str
    id: str
    status: str
    error: str

    @property
    def name(self) -> str:
        return f"{self.type}.{self.id}"


_LIVE: weakref.WeakSet[Daemon] = weakref.WeakSet()
_SWEPT = False  # sweep_stale() runs once per process, before its first daemon


@atexit.register
def _stop_leftovers() -> None:  # safety net if a context manager never exits
    for daemon in list(_LIVE):
        with contextlib.suppress(Exception):
            daemon.stop()


class Daemon:
    """A real ``containerd`` on a copy of a config layout, stopped and cleaned on exit.

    ``with Daemon("1.7", cfg, tmp_path) as d:`` copies the layout with
    :func:`prepare_for_daemon`, starts containerd with ``PATH`` holding only the line's
    shim and a ``runc`` link, and waits (10 s at most) for its socket. Not starting is a
    legitimate outcome for a bad config: check ``start_ok`` / ``start_error``. On exit
    the daemon is stopped (SIGTERM, then SIGKILL), its shims and their containers killed,
    anything mounted under its directories unmounted and its cgroups removed, even when
    the test failed.

    ``workdir`` holds the config copy and ``containerd.log``; root, state and sockets go
    to a run dir, which is ``workdir`` itself when its path is short, else a fresh
    ``/tmp/gp-XXXX`` (unix socket paths must stay under 108 bytes).
    """

    START_TIMEOUT = 10.0

    def __init__(self, line: str, config: Path, workdir: Path) -> None:
        require_daemon_support(line)
        self.line = line
        self.config = Path(config)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._own_rundir = len(str(self.workdir.resolve())) > _MAX_RUNDIR_LEN
        if self._own_rundir:
            self.rundir = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
        else:
            self.rundir = self.workdir.resolve()
        self.socket = self.rundir / "c.sock"
        self.log_path = self.workdir / "containerd.log"
        self.top_config: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_ok = False
        self.start_error = ""
        self.start_seconds: float | None = None
        self.cgroup_parent = f"{CGROUP_PARENT}/{os.getpid()}-{self.rundir.name}"
        self._plugins: dict[str, PluginInfo] | None = None
        self._channel: Any = None
        self._pause_image: str | None = None
        self._sandboxes: set[str] = set()
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Daemon:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Copy the layout and start containerd; sets ``start_ok`` / ``start_error``."""
        try:
            self.top_config = prepare_for_daemon(self.config, self.workdir, self.rundir)
        except LayoutError as exc:
            self.start_error = f"cannot prepare the config layout: {exc}"
            return
        pathdir = self.rundir / "bin"
        pathdir.mkdir(exist_ok=True)
        runc_link = pathdir / "runc"
        if not runc_link.is_symlink():
            runc_link.symlink_to(RUNC)
        env = {k: v for k, v in os.environ.items() if k not in ("PATH", "NOTIFY_SOCKET")}
        env["PATH"] = f"{binary(self.line, SHIM).parent}:{pathdir}"
        global _SWEPT
        if not _SWEPT:
            _SWEPT = True
            sweep_stale()
        _LIVE.add(self)
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(binary(self.line)), "--config", str(self.top_config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.workdir / "cfg",  # the mirror of "/", see prepare_for_daemon
                start_new_session=True,
            )
        deadline = t0 + self.START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.start_error = (
                    f"containerd {self.line} exited with {self.proc.returncode} before "
                    f"serving:\n{self.log_tail()}"
                )
                return
            if self._socket_connects():
                self.start_ok = True
                self.start_seconds = time.monotonic() - t0
                return
            time.sleep(0.01)
        self.start_error = (
            f"containerd {self.line} did not serve {self.socket} within "
            f"{self.START_TIMEOUT:.0f} s:\n{self.log_tail()}"
        )

    def _socket_connects(self) -> bool:
        if not self.socket.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(self.socket))
            except OSError:
                return False
        return True

    def stop(self) -> None:
        """Stop everything this daemon started and clean up after it (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.proc is not None and self.proc.poll() is None and self._sandboxes:
                for sandbox_id in list(self._sandboxes):
                    with contextlib.suppress(Exception):
                        _remove_sandbox(self, sandbox_id, timeout=5)
            if self._channel is not None:
                with contextlib.suppress(Exception):
                    self._channel.close()
                self._channel = None
            if self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            _kill_all(_shims_and_descendants(str(self.socket)))
            _clean_dead_tasks(self.rundir / "state")
            unmount_under(self.rundir, self.workdir)
            _remove_cgroups(self.cgroup_parent)
        finally:
            _LIVE.discard(self)
            if self._own_rundir:
                shutil.rmtree(self.rundir, ignore_errors=True)
            else:
                for sub in ("root", "state", "opt"):
                    shutil.rmtree(self.rundir / sub, ignore_errors=True)

    # -- introspection -------------------------------------------------------------

    def log_text(self) -> str:
        """containerd's whole log (stdout and stderr) so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def fail(self, message: str) -> NoReturn:
        """Raise :class:`OracleError` with ``message`` and the tail of containerd's log."""
        raise OracleError(
            f"{message}\n--- containerd {self.line} log (tail) ---\n{self.log_tail()}"
        )

    def require_started(self) -> None:
        """Fail the test with the log unless the daemon is up."""
        if not self.start_ok:
            raise OracleError(self.start_error or "daemon was not started")

    def ctr(self, *args: str, namespace: str = "k8s.io", timeout: float = 60) -> str:
        """Run ``ctr -a <socket> -n <namespace> args...``; fail with the log on error."""
        self.require_started()
        proc = subprocess.run(
            [str(binary(self.line, "ctr")), "-a", str(self.socket), "-n", namespace, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            self.fail(f"ctr {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def plugins(self) -> dict[str, PluginInfo]:
        """Every plugin as ``ctr plugins ls`` shows it, keyed ``<type>.<id>``.

        Plugins are loaded before the socket serves, so this does not change later.
        """
        if self._plugins is None:
            statuses: dict[str, tuple[str, str, str]] = {}
            for row in self.ctr("plugins", "ls").splitlines()[1:]:
                cols = row.split()
                if len(cols) >= 4:
                    statuses[f"{cols[0]}.{cols[1]}"] = (cols[0], cols[1], cols[-1])
            errors = _parse_plugin_errors(self.ctr("plugins", "ls", "--detailed"))
            self._plugins = {
                name: PluginInfo(t, i, status, errors.get(name, ""))
                for name, (t, i, status) in statuses.items()
            }
        return self._plugins

    def plugin_status(self, name: str = "io.containerd.grpc.v1.cri") -> str:
        """Status of plugin ``<type>.<id>``: ok, error or skip; "absent" if not listed.

        ``io.containerd.grpc.v1.cri`` (the CRI gRPC service) is the one to ask on every
        line: in 2.x the CRI is split into ``io.containerd.cri.v1.runtime``,
        ``io.containerd.cri.v1.images``, ``io.containerd.podsandbox.controller.v1.
        podsandbox``... and a failure in the runtime part cascades to ``grpc.v1.cri``.
        """
        info = self.plugins().get(name)
        return info.status if info else "absent"

    def plugin_error(self, name: str = "io.containerd.grpc.v1.cri") -> str:
        """The load error containerd recorded for plugin ``<type>.<id>`` ("" if none)."""
        info = self.plugins().get(name)
        return info.error if info else ""

    # -- CRI -----------------------------------------------------------------------

    def channel(self) -> Any:
        """A gRPC channel to the daemon's socket (closed when the daemon stops)."""
        self.require_started()
        if self._channel is None:
            grpc = _grpc()
            self._channel = grpc.insecure_channel(f"unix://{self.socket}")
        return self._channel

    def runtime_service(self) -> Any:
        return cri_modules()[1].RuntimeServiceStub(self.channel())

    def image_service(self) -> Any:
        return cri_modules()[1].ImageServiceStub(self.channel())

    def wait_cri(self, timeout: float = 10.0) -> None:
        """Wait until the CRI service answers (it finishes initialising after serving)."""
        grpc = _grpc()
        pb = cri_modules()[0]
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                self.runtime_service().Version(pb.VersionRequest(), timeout=2)
                return
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    break  # the CRI plugin did not load; waiting will not help
            time.sleep(0.02)
        self.fail(
            f"CRI service not answering: {last}; CRI plugin status: "
            f"{self.plugin_status()} {self.plugin_error()}"
        )

    def ensure_pause_image(self) -> str:
        """Import the local pause image under the sandbox image name the config uses.

        The name comes from ``config dump`` of the daemon's own copy (so no sandbox image
        needs configuring), it is unpacked into the CRI snapshotter, and the call returns
        once the CRI image service sees it (CRI learns about imports asynchronously).
        """
        if self._pause_image is not None:
            return self._pause_image
        assert self.top_config is not None
        result = dump(self.line, self.top_config)
        if not result.ok or result.config is None:
            self.fail(f"config dump of the daemon's copy failed: {result.error}")
        name = sandbox_image_from_dump(self.line, result.config)
        snapshotter = snapshotter_from_dump(self.line, result.config)
        if not name:
            self.fail("effective config names no sandbox image")
        name = _normalise_image_name(name)
        tar = build_pause_image(self.rundir / "pause.tar", name)
        self.ctr("images", "import", "--snapshotter", snapshotter, str(tar))
        pb = cri_modules()[0]
        grpc = _grpc()
        self.wait_cri()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                resp = self.image_service().ImageStatus(
                    pb.ImageStatusRequest(image=pb.ImageSpec(image=name)), timeout=5
                )
                if resp.image.id:
                    self._pause_image = name
                    return name
            except grpc.RpcError:
                pass
            time.sleep(0.02)
        self.fail(f"CRI does not see the imported pause image {name}")


def _parse_plugin_errors(detailed: str) -> dict[str, str]:
    """``<type>.<id>`` -> error message, from ``ctr plugins ls --detailed``."""
    errors: dict[str, str] = {}
    ptype = pid = ""
    for raw in detailed.splitlines():
        line = raw.strip()
        if line.startswith("Type:"):
            ptype, pid = line[5:].strip(), ""
        elif line.startswith("ID:"):
            pid = line[3:].strip()
        elif line.startswith("Message:") and ptype and pid:
            errors[f"{ptype}.{pid}"] = line[8:].strip()
    return errors


# --------------------------------------------------------------------------------------
# CRI over gRPC


def _grpc() -> ModuleType:
    try:
        import grpc
    except ImportError:
        unavailable("grpcio is not installed")
    return grpc


_CRI_MODULES: tuple[ModuleType, ModuleType] | None = None


def cri_modules() -> tuple[ModuleType, ModuleType]:
    """(messages, services) generated from the CRI api.proto, compiled on first use.

    The proto comes from Debian's golang-github-kubernetes-cri-api-dev (unpacked by the
    fetch script). Its gogoproto import/options are stripped (protoc cannot resolve
    them; they only affect Go code), and the result is compiled with grpc_tools.protoc
    into ``$GPUPLANE_CACHE/cri-py/<hash>/`` keyed by the proto and the generator's
    versions, so generated code never enters the repository.
    """
    global _CRI_MODULES
    if _CRI_MODULES is not None:
        return _CRI_MODULES
    proto = cache_dir() / "cri-api" / "root" / CRI_PROTO_REL
    if not proto.is_file():
        unavailable(f"CRI api.proto is missing ({proto})")
    try:
        import google.protobuf
        import grpc_tools
        from grpc_tools import protoc
    except ImportError:
        unavailable("grpcio-tools is not installed")
    source = "".join(
        line for line in proto.read_text().splitlines(keepends=True) if "gogoproto" not in line
    )
    key = hashlib.sha256(
        "\0".join(
            [source, google.protobuf.__version__, getattr(grpc_tools, "__version__", "")]
        ).encode()
    ).hexdigest()[:16]
    outdir = cache_dir() / "cri-py" / key
    if not (outdir / "cri_api_pb2_grpc.py").is_file():
        outdir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=outdir.parent))
        (tmp / "cri_api.proto").write_text(source)
        include = Path(protoc.__file__).parent / "_proto"
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{tmp}",
                f"-I{include}",
                f"--python_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(tmp / "cri_api.proto"),
            ]
        )
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise OracleError(f"grpc_tools.protoc failed ({rc}) on {proto}")
        try:
            tmp.rename(outdir)  # atomic; a concurrent compiler may have won
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    if str(outdir) not in sys.path:
        sys.path.insert(0, str(outdir))
    import cri_api_pb2
    import cri_api_pb2_grpc

    _CRI_MODULES = (cri_api_pb2, cri_api_pb2_grpc)
    return _CRI_MODULES


def cri_status(daemon: Daemon) -> dict[str, Any]:
    """``RuntimeService.Status(verbose=True)``, decoded.

    Returns ``{"conditions": {type: bool}, "info": {key: parsed JSON}}``; the CRI
    plugin's live config (default runtime, runtimes with their options, CDI) is
    ``info["config"]``. See :func:`effective_from_status` for the normalised view.
    """
    daemon.wait_cri()
    pb = cri_modules()[0]
    grpc = _grpc()
    try:
        resp = daemon.runtime_service().Status(pb.StatusRequest(verbose=True), timeout=10)
    except grpc.RpcError as exc:
        daemon.fail(f"CRI Status failed: {exc.code().name}: {exc.details()}")
    info: dict[str, Any] = {}
    for key, value in resp.info.items():
        try:
            info[key] = json.loads(value)
        except json.JSONDecodeError:
            info[key] = value
    return {
        "conditions": {c.type: c.status for c in resp.status.conditions},
        "info": info,
    }


@dataclasses.dataclass(frozen=True)
class SandboxResult:
    """Outcome of :func:`run_sandbox`: ``error`` is the CRI error text when not ok."""

    ok: bool
    error: str
    sandbox_id: str | None


def _remove_sandbox(daemon: Daemon, sandbox_id: str, timeout: float = 30) -> None:
    pb = cri_modules()[0]
    svc = daemon.runtime_service()
    svc.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=timeout)
    svc.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=timeout)
    daemon._sandboxes.discard(sandbox_id)


def run_sandbox(
    daemon: Daemon, handler: str, *, keep: bool = False, timeout: float = 60
) -> SandboxResult:
    """RunPodSandbox through ``handler``, as the kubelet would for a RuntimeClass.

    Host network (no CNI needed), the local pause image (:meth:`Daemon.ensure_pause_image`)
    and a cgroupfs parent private to the daemon. A successful sandbox is stopped and
    removed again unless ``keep``; kept ones are removed when the daemon stops. A
    refusal is a result (``ok=False`` with containerd's error text), not an exception:
    e.g. ``no runtime for "xyz" is configured`` for an unknown handler.
    """
    daemon.ensure_pause_image()
    pb = cri_modules()[0]
    grpc = _grpc()
    uid = uuid.uuid4().hex[:12]
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=f"oracle-{uid}", uid=uid, namespace="default"),
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=daemon.cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE)
            ),
        ),
    )
    svc = daemon.runtime_service()
    try:
        resp = svc.RunPodSandbox(
            pb.RunPodSandboxRequest(config=config, runtime_handler=handler), timeout=timeout
        )
    except grpc.RpcError as exc:
        return SandboxResult(False, exc.details() or exc.code().name, None)
    sandbox_id = resp.pod_sandbox_id
    daemon._sandboxes.add(sandbox_id)
    if not keep:
        try:
            _remove_sandbox(daemon, sandbox_id)
        except grpc.RpcError as exc:
            daemon.fail(f"could not remove sandbox {sandbox_id}: {exc.details()}")
    return SandboxResult(True, "", sandbox_id)


# --------------------------------------------------------------------------------------
# Stand-in for nvidia-container-runtime

WRAPPER_NAME = "nvidia-container-runtime"


def nvidia_wrapper(dirpath: Path) -> Path:
    """Write an executable stand-in for nvidia-container-runtime into ``dirpath``.

    It appends its arguments (one line per call) to ``<wrapper>.log`` and execs
    ``/usr/sbin/runc`` with them, so a runtime whose ``BinaryName`` is this script
    really runs containers, and the log proves they went through that runtime.
    """
    dirpath = Path(dirpath)
    dirpath.mkdir(parents=True, exist_ok=True)
    script = dirpath / WRAPPER_NAME
    log = wrapper_log(script)
    script.write_text(
        "#!/bin/sh\n"
        "# Test stand-in for nvidia-container-runtime: log the call, then be runc.\n"
        f"printf '%s\\n' \"$*\" >> '{log}'\n"
        f"exec '{RUNC}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def wrapper_log(wrapper: Path) -> Path:
    """Where :func:`nvidia_wrapper`'s script logs its calls."""
    return Path(wrapper).with_name(Path(wrapper).name + ".log")


def wrapper_calls(wrapper: Path) -> list[str]:
    """The argument lines the wrapper logged, oldest first (empty if never called)."""
    try:
        return wrapper_log(wrapper).read_text().splitlines()
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------------------
# Added for the GPU chain (tests/support/gpu_chain.py): any image as an OCI tar, a kept pod with
# container logs


def oci_image_tar(dest: Path, name: str, layer: bytes, image_config: dict[str, Any]) -> Path:
    """Write an OCI image-layout tar named ``name`` from one uncompressed ``layer`` tar.

    ``image_config`` is the image's runtime ``config`` (Entrypoint, Cmd, Env...); the
    layout is the one :func:`build_pause_image` writes, so ``ctr images import`` takes
    it the same way (the name rides in the ``io.containerd.image.name`` annotation).
    """
    layer_digest, layer_bytes = _blob(layer)
    config = {
        "architecture": _arch(),
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config_bytes = _blob(json.dumps(config).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer_bytes)}],
    }
    manifest_digest, manifest_bytes = _blob(json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": len(manifest_bytes),
                       "platform": {"architecture": _arch(), "os": "linux"},
                       "annotations": {"io.containerd.image.name": name}}],
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _tar_add(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _tar_add(tar, "index.json", json.dumps(index).encode())
        for digest, data in ((layer_digest, layer_bytes), (config_digest, config_bytes),
                             (manifest_digest, manifest_bytes)):
            _tar_add(tar, "blobs/sha256/" + digest.split(":", 1)[1], data)
    return dest


def run_pod(daemon: Daemon, handler: str, *, log_directory: Path,
            timeout: float = 60) -> SandboxResult:
    """RunPodSandbox like :func:`run_sandbox`, kept, with a ``log_directory``.

    Containers created in it can then have a ``log_path`` (CRI writes their stdout and
    stderr there); the sandbox is removed when the daemon stops.
    """
    daemon.ensure_pause_image()
    pb = cri_modules()[0]
    grpc = _grpc()
    uid = uuid.uuid4().hex[:12]
    log_directory.mkdir(parents=True, exist_ok=True)
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=f"oracle-{uid}", uid=uid, namespace="default"),
        log_directory=str(log_directory),
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=daemon.cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE)
            ),
        ),
    )
    try:
        resp = daemon.runtime_service().RunPodSandbox(
            pb.RunPodSandboxRequest(config=config, runtime_handler=handler), timeout=timeout
        )
    except grpc.RpcError as exc:
        return SandboxResult(False, exc.details() or exc.code().name, None)
    daemon._sandboxes.add(resp.pod_sandbox_id)
    return SandboxResult(True, "", resp.pod_sandbox_id)
