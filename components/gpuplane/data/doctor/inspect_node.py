#!/usr/bin/env python3
"""gpuplane node inspection: what a GPU node's container runtime really is, as JSON.

`gpuplane doctor` runs this file in a short-lived privileged pod on each GPU node (hostPID,
the host's / mounted read-only at /host) and reads the JSON it prints. It reports facts,
never verdicts: the doctor feeds them to the same rulebook the plan and the node agent use.
Standard library only (Python 3.11+, for tomllib), so any python3 image runs it.

What it reports (stdout, one JSON object; schema `format` 1):
  daemons        every containerd process from /proc: pid, binary, --config (or the
                 default), --address (or the config's grpc.address, or the default),
                 `--version` output
  kubelet        the kubelet (or kubelite / k3s) process: its runtime endpoint and cgroup
                 driver, from its flags or its config file; `kubelet_daemon` is the pid of
                 the containerd it talks to
  files          {host path: text} of each daemon's top-level config, every file its
                 `imports` match, the TOML files in conf.d/ and config.d/ beside it and the
                 RKE2/K3s templates; `unreadable` lists what could not be read
  binaries       nvidia runtime binaries (BinaryName values found in those files and the
                 toolkit's usual paths): present, executable, GLIBC versions they need
  glibc          the host's glibc version; os_release: ID, VERSION_ID, PRETTY_NAME
  config_dump    `containerd config dump` of the kubelet's containerd (needs --exec)
  cri_probe      RunPodSandbox with runtime handler `nvidia` through the kubelet's
                 containerd socket, then stop and remove (needs --cri-probe)
  errors         anything that went wrong while looking (the rest is still reported)

Paths in the output are host paths. `--root DIR` reads the host's files under DIR (the
pod's /host; a sandbox in tests); `--proc DIR` is where /proc is read (tests inject one).

Running host commands (`--exec`): `nsenter` runs them in the host's mount namespace
(`nsenter -t 1 -m`, needs hostPID and privilege); `direct` runs them here as they are
(only meaningful with --root /); `none` runs nothing. The CRI probe talks gRPC itself
when the `grpc` module is importable (any image with grpcio: the request is encoded here,
no generated code), else runs the host's `crictl` through --exec; without either it says
`not-probed` and why.
"""

# This file is generated from the parts in components/gpuplane/data/doctor/inspect/ (joined
# by `python -m gpuplane.core.parts`): edit those, then regenerate it. This part, the head
# (10-head.py), holds the docstring above, the imports and the paths and limits the other
# parts read.

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from typing import Any

FORMAT = 1
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_ADDRESS = "/run/containerd/containerd.sock"
K3S_ADDRESS = "/run/k3s/containerd/containerd.sock"
DROP_IN_DIRS = ("conf.d", "config.d")
TOOLKIT_PATHS = (
    "/usr/local/nvidia/toolkit/nvidia-container-runtime",
    "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
    "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
    "/usr/local/nvidia/toolkit/nvidia-container-cli",
    "/usr/local/nvidia/toolkit/libnvidia-container.so.1",
    "/usr/bin/nvidia-container-runtime",
    "/usr/bin/nvidia-container-cli",
)
LIBC_DIRS = (
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
)
CRICTL_PATHS = (
    "/usr/bin/crictl", "/usr/local/bin/crictl", "/var/lib/rancher/rke2/bin/crictl",
    "/snap/k8s/current/bin/crictl", "/snap/microk8s/current/bin/crictl", "/opt/bin/crictl",
)
MAX_FILE = 512 * 1024
MAX_FILES = 200
MAX_DUMP = 1024 * 1024
ELF_SCAN = 64 * 1024 * 1024
_GLIBC = re.compile(rb"GLIBC_(\d+)\.(\d+)(?:\.\d+)?")
_GLIBC_BANNER = re.compile(rb"GNU C Library[^\n]*?release version (\d+)\.(\d+)")


# ------------------------------------------------------------------ host filesystem

class Host:
    """The host's filesystem seen under `root`, with symlinks resolved inside it."""

    def __init__(self, root: str, proc: str, exec_mode: str, timeout: float):
        self.root = os.path.abspath(root)
        self.proc = proc
        self.exec_mode = exec_mode
        self.timeout = timeout

    def path(self, host_path: str) -> str:
        """Where `host_path` is readable here, following links as the host would."""
        resolved = self.resolve(host_path)
        return os.path.join(self.root, resolved.lstrip("/")) if self.root != "/" else resolved

    def resolve(self, host_path: str, depth: int = 0) -> str:
        """`host_path` with every symlink resolved against the host's /, not ours."""
        if self.root == "/":
            return os.path.realpath(host_path)
        parts = [p for p in os.path.normpath("/" + host_path).split("/") if p]
        done = "/"
        for index, part in enumerate(parts):
            candidate = os.path.join(done, part)
            local = os.path.join(self.root, candidate.lstrip("/"))
            if os.path.islink(local) and depth < 40:
                target = os.readlink(local)
                base = target if target.startswith("/") else os.path.join(done, target)
                rest = "/".join(parts[index + 1:])
                return self.resolve(os.path.normpath(os.path.join(base, rest)), depth + 1)
            done = candidate
        return done

    def read(self, host_path: str, limit: int = MAX_FILE) -> str | None:
        try:
            with open(self.path(host_path), "rb") as handle:
                return handle.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None

    def read_bytes(self, host_path: str, limit: int) -> bytes | None:
        try:
            with open(self.path(host_path), "rb") as handle:
                return handle.read(limit)
        except OSError:
            return None

    def glob(self, pattern: str) -> list[str]:
        """Host paths matching an absolute pattern, sorted (containerd's order)."""
        if self.root == "/":
            return sorted(glob.glob(pattern))
        local = os.path.join(self.root, pattern.lstrip("/"))
        return sorted("/" + os.path.relpath(p, self.root) for p in glob.glob(local))

    def isfile(self, host_path: str) -> bool:
        return os.path.isfile(self.path(host_path))

    def executable(self, host_path: str) -> bool:
        return os.access(self.path(host_path), os.X_OK)

    def run(self, argv: list[str], timeout: float | None = None) -> dict[str, Any]:
        """Run a host command; {"ran": False, "why": ...} when --exec forbids it."""
        if self.exec_mode == "none":
            return {"ran": False, "why": "host commands are off (--exec none)"}
        if self.exec_mode == "nsenter":
            argv = ["nsenter", "-t", "1", "-m", "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout or self.timeout,
                                  check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ran": False, "why": f"{argv[0]}: {exc}"}
        return {"ran": True, "rc": done.returncode,
                "stdout": done.stdout[:MAX_DUMP].decode("utf-8", errors="replace"),
                "stderr": done.stderr[-4000:].decode("utf-8", errors="replace").strip()}


# ------------------------------------------------------------------ processes

def processes(proc: str) -> list[dict[str, Any]]:
    """pid, argv, binary (exe link), comm and environment-free cmdline of each process."""
    out = []
    for entry in sorted(os.listdir(proc), key=lambda e: (len(e), e)):
        if not entry.isdigit():
            continue
        base = os.path.join(proc, entry)
        try:
            with open(os.path.join(base, "cmdline"), "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        argv = [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]
        if not argv:
            continue
        exe = None
        with contextlib.suppress(OSError):
            exe = os.readlink(os.path.join(base, "exe")).removesuffix(" (deleted)")
        comm = ""
        with contextlib.suppress(OSError), open(os.path.join(base, "comm")) as handle:
            comm = handle.read().strip()
        out.append({"pid": int(entry), "argv": argv, "exe": exe, "comm": comm})
    return out


def flag(argv: list[str], *names: str) -> str | None:
    """The value of the last `--name value` / `--name=value` / `-n value` in argv."""
    value = None
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                value = argv[index + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1:]
    return value


def _name(p: dict[str, Any]) -> str:
    return os.path.basename(p["exe"] or p["argv"][0])


def is_containerd(p: dict[str, Any]) -> bool:
    return "containerd" in (_name(p), os.path.basename(p["argv"][0]), p["comm"])


def unix_path(endpoint: str) -> str:
    """A socket path from `unix:///x`, `unix://x` or `/x`; /var/run is /run."""
    path = re.sub(r"^unix://", "", endpoint.strip())
    path = os.path.normpath(path)
    return "/run/" + path[len("/var/run/"):] if path.startswith("/var/run/") else path


def daemon_of(p: dict[str, Any], host: Host) -> dict[str, Any]:
    argv = p["argv"]
    config = flag(argv, "--config", "-c")
    address = flag(argv, "--address", "-a")
    record: dict[str, Any] = {
        "pid": p["pid"], "binary": p["exe"] or argv[0], "argv": argv,
        "config": config or DEFAULT_CONFIG, "config_source": "flag" if config else "default",
    }
    if address:
        record.update(address=unix_path(address), address_source="flag")
    else:
        configured = _grpc_address(host, record["config"])
        record.update(address=unix_path(configured or DEFAULT_ADDRESS),
                      address_source="config" if configured else "default")
    return record


def _grpc_address(host: Host, config: str) -> str | None:
    text = host.read(config)
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    grpc = data.get("grpc")
    address = grpc.get("address") if isinstance(grpc, dict) else None
    return address if isinstance(address, str) and address else None


# ------------------------------------------------------------------ kubelet

def is_kubelet(p: dict[str, Any]) -> bool:
    names = {_name(p), os.path.basename(p["argv"][0]), p["comm"]}
    if names & {"kubelet", "kubelite"}:
        return True
    # K3s runs the kubelet inside its own process ("k3s server" / "k3s agent").
    return bool(names & {"k3s", "k3s-server", "k3s-agent"}) and any(
        a in ("server", "agent") for a in p["argv"][1:2])


def kubelet_of(p: dict[str, Any], host: Host) -> dict[str, Any]:
    argv = list(p["argv"])
    args_file = flag(argv, "--kubelet-args-file")
    if args_file:  # MicroK8s' kubelite reads the kubelet's flags from a file
        text = host.read(args_file) or ""
        env = _environ(host.proc, p["pid"])
        argv += [_expand(a, env) for a in text.split()]
    record: dict[str, Any] = {"pid": p["pid"], "argv": p["argv"]}
    endpoint = flag(argv, "--container-runtime-endpoint")
    driver = flag(argv, "--cgroup-driver")
    config_file = flag(argv, "--config")
    record["config_file"] = config_file
    settings = _kubelet_config(host, config_file) if config_file else {}
    if endpoint:
        record["endpoint_source"] = "flag"
    elif settings.get("containerRuntimeEndpoint"):
        endpoint = settings["containerRuntimeEndpoint"]
        record["endpoint_source"] = f"config {config_file}"
    else:
        k3s = {_name(p), p["comm"]} & {"k3s", "k3s-server", "k3s-agent"}
        endpoint = K3S_ADDRESS if k3s else DEFAULT_ADDRESS
        record["endpoint_source"] = "default"
    record["endpoint"] = unix_path(endpoint)
    record["cgroup_driver"] = driver or settings.get("cgroupDriver")
    return record


def _kubelet_config(host: Host, path: str) -> dict[str, str]:
    """Top-level scalar keys of the kubelet's YAML config (no YAML library needed)."""
    found = {}
    for line in (host.read(path) or "").splitlines():
        match = re.match(r"^([A-Za-z]+):\s*['\"]?([^'\"#\s]+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _environ(proc: str, pid: int) -> dict[str, str]:
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (e.decode(errors="replace").partition("=") for e in raw.split(b"\0") if e)
    return {k: v for k, _, v in pairs}


def _expand(arg: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m[1] or m[2], m[0]), arg)


# ------------------------------------------------------------------ config files

def collect_files(host: Host, config: str, files: dict[str, str], unreadable: list[str]) -> None:
    """The top-level config, every file its imports match (recursively), the TOML files
    in the drop-in directories beside it and the RKE2/K3s templates, by host path."""
    queue = [config]
    base = os.path.dirname(config)
    for sub in DROP_IN_DIRS:
        queue += host.glob(os.path.join(base, sub, "*.toml"))
    queue += host.glob(os.path.join(base, "*.tmpl"))
    seen: set[str] = set()
    while queue and len(files) < MAX_FILES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = host.read(path)
        if text is None:
            if path == config:
                unreadable.append(path)
            continue
        files[path] = text
        for pattern in _imports(text):
            if not pattern.startswith("/"):
                # 1.7+ resolve against the file's directory, 1.6 globs against /: take both.
                candidates = [os.path.join(os.path.dirname(path), pattern), "/" + pattern]
            else:
                candidates = [pattern]
            for candidate in candidates:
                queue += host.glob(os.path.normpath(candidate))


def _imports(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    imports = data.get("imports")
    return [i for i in imports if isinstance(i, str)] if isinstance(imports, list) else []


def binary_names(files: dict[str, str]) -> list[str]:
    """Every BinaryName a runtime's options name in the collected files."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "BinaryName" and isinstance(value, str) and value:
                    found.append(value)
                else:
                    walk(value)

    for text in files.values():
        with contextlib.suppress(tomllib.TOMLDecodeError):
            walk(tomllib.loads(text))
    return found


# ------------------------------------------------------------------ binaries and glibc

def glibc_versions(data: bytes) -> list[str]:
    """GLIBC_x.y symbol versions an ELF file names (what it needs, or libc: provides)."""
    versions = {(int(m[1]), int(m[2])) for m in _GLIBC.finditer(data)}
    return [f"{a}.{b}" for a, b in sorted(versions)]


def inspect_binary(host: Host, path: str) -> dict[str, Any]:
    record: dict[str, Any] = {"path": path, "present": host.isfile(path)}
    if not record["present"]:
        return record
    record["executable"] = host.executable(path)
    data = host.read_bytes(path, ELF_SCAN) or b""
    record["elf"] = data[:4] == b"\x7fELF"
    if record["elf"]:
        needed = glibc_versions(data)
        record["glibc_required"] = needed[-1] if needed else None
    return record


def host_glibc(host: Host) -> dict[str, Any] | None:
    for directory in LIBC_DIRS:
        path = os.path.join(directory, "libc.so.6")
        data = host.read_bytes(path, ELF_SCAN)
        if not data or data[:4] != b"\x7fELF":
            continue
        banner = _GLIBC_BANNER.search(data)
        if banner:
            version = f"{int(banner[1])}.{int(banner[2])}"
        else:
            provided = glibc_versions(data)
            if not provided:
                continue
            version = provided[-1]
        return {"version": version, "path": path, "resolved": host.resolve(path)}
    return None


def os_release(host: Host) -> dict[str, str]:
    text = host.read("/etc/os-release") or host.read("/usr/lib/os-release") or ""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("ID", "VERSION_ID", "PRETTY_NAME", "ID_LIKE"):
            found[key] = value.strip().strip('"')
    return found


# ------------------------------------------------------------------ CRI probe

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes | str | int) -> bytes:
    """One protobuf field: a length-delimited string/message or a varint."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _fields(data: bytes) -> dict[int, list[Any]]:
    """Decode one protobuf message's top-level fields (varints and byte strings)."""
    out: dict[int, list[Any]] = {}
    index = 0

    def varint() -> int:
        nonlocal index
        shift = value = 0
        while True:
            byte = data[index]
            index += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while index < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.setdefault(number, []).append(varint())
        elif wire == 2:
            size = varint()
            out.setdefault(number, []).append(data[index:index + size])
            index += size
        else:
            break
    return out


NODE_NETWORK = 2  # runtime.v1.NamespaceMode.NODE: no CNI needed for the probe sandbox


def sandbox_config(name: str, cgroup_parent: str) -> bytes:
    """runtime.v1.PodSandboxConfig: host network, the given cgroup parent."""
    uid = uuid.uuid4().hex[:12]
    metadata = _field(1, name) + _field(2, uid) + _field(3, "kube-system")
    security = _field(1, _field(1, NODE_NETWORK))
    linux = _field(1, cgroup_parent) + _field(2, security)
    return _field(1, metadata) + _field(8, linux)


def probe_grpc(socket_path: str, handler: str, cgroup_parent: str,
               timeout: float) -> dict[str, Any]:
    import grpc  # only present in images that ship grpcio

    service = "/runtime.v1.RuntimeService/"
    result: dict[str, Any] = {"method": "grpc", "handler": handler, "socket": socket_path,
                              "cgroup_parent": cgroup_parent}
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        def call(method: str, request: bytes) -> bytes:
            # No (de)serializers: the messages are encoded by hand, bytes in and out.
            rpc: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                service + method)
            return rpc(request, timeout=timeout)

        try:
            version = _fields(call("Version", _field(1, "v1")))
            result["runtime"] = {
                "name": _text(version, 2), "version": _text(version, 3),
                "api_version": _text(version, 4)}
            request = _field(1, sandbox_config("gpuplane-cri-probe", cgroup_parent))
            request += _field(2, handler)
            sandbox = _text(_fields(call("RunPodSandbox", request)), 1)
        except grpc.RpcError as exc:
            result.update(status="failed", error=exc.details() or exc.code().name,
                          code=exc.code().name)
            return result
        result.update(status="ok", sandbox_id=sandbox)
        try:
            call("StopPodSandbox", _field(1, sandbox))
            call("RemovePodSandbox", _field(1, sandbox))
        except grpc.RpcError as exc:
            result["cleanup_error"] = exc.details() or exc.code().name
    return result


def _text(fields: dict[int, list[Any]], number: int) -> str:
    values = fields.get(number) or [b""]
    return values[0].decode("utf-8", errors="replace")


def probe_crictl(host: Host, crictl: str, socket_path: str, handler: str,
                 cgroup_parent: str) -> dict[str, Any]:
    """`crictl runp --runtime <handler>` with a host-network sandbox, then stopp/rmp."""
    config = {
        "metadata": {"name": "gpuplane-cri-probe", "namespace": "kube-system",
                     "uid": uuid.uuid4().hex[:12], "attempt": 0},
        "linux": {"cgroup_parent": cgroup_parent,
                  "security_context": {"namespace_options": {"network": NODE_NETWORK}}},
    }
    result: dict[str, Any] = {"method": "crictl", "crictl": crictl, "handler": handler,
                              "socket": socket_path, "cgroup_parent": cgroup_parent}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config, handle)
    try:
        # In the host's mount namespace our /tmp is reachable through /proc/<pid>/root.
        path = (f"/proc/{os.getpid()}/root{handle.name}" if host.exec_mode == "nsenter"
                else handle.name)
        base = [crictl, "--runtime-endpoint", f"unix://{socket_path}", "--timeout", "60s"]
        run = host.run([*base, "runp", "--runtime", handler, path], timeout=90)
    finally:
        os.unlink(handle.name)
    if not run["ran"]:
        return {**result, "status": "not-probed", "why": run["why"]}
    if run["rc"] != 0:
        return {**result, "status": "failed", "error": run["stderr"] or run["stdout"].strip()}
    sandbox = run["stdout"].strip().splitlines()[-1] if run["stdout"].strip() else ""
    result.update(status="ok", sandbox_id=sandbox)
    for verb in ("stopp", "rmp"):
        done = host.run([*base, verb, sandbox], timeout=90)
        if done.get("rc"):
            result["cleanup_error"] = done["stderr"]
    return result


def cri_probe(host: Host, daemon: dict[str, Any] | None, args: argparse.Namespace,
              dump: dict[str, Any] | None, kubelet: dict[str, Any] | None) -> dict[str, Any]:
    if not args.cri_probe:
        return {"status": "not-probed", "why": "the CRI probe is off (--no-cri-probe)"}
    if daemon is None:
        return {"status": "not-probed", "why": "no containerd daemon serves the kubelet"}
    parent = args.cgroup_parent or _cgroup_parent(dump, kubelet, args.handler)
    method = args.cri_method
    if method in ("auto", "grpc"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            if method == "grpc":
                return {"status": "not-probed", "why": "python module grpc is not installed"}
        else:
            return probe_grpc(host.path(daemon["address"]), args.handler, parent,
                              args.timeout)
    crictl = _find_crictl(host)
    if crictl is None:
        return {"status": "not-probed",
                "why": "no grpc module in this image and no crictl on the host"}
    return probe_crictl(host, crictl, daemon["address"], args.handler, parent)


def _find_crictl(host: Host) -> str | None:
    if host.exec_mode == "none":
        return None
    if host.exec_mode == "direct":
        found = shutil.which("crictl")
        if found:
            return found
    return next((p for p in CRICTL_PATHS if host.executable(p)), None)


def _cgroup_parent(dump: dict[str, Any] | None, kubelet: dict[str, Any] | None,
                   handler: str) -> str:
    """A parent the runtime accepts: a systemd slice when the handler's runc uses the
    systemd cgroup driver (the field report's crictl test failed without one)."""
    systemd = None
    if dump and dump.get("ok"):
        with contextlib.suppress(tomllib.TOMLDecodeError):
            plugins = tomllib.loads(dump["stdout"]).get("plugins", {})
            for key in ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"):
                runtime = (plugins.get(key, {}).get("containerd", {})
                           .get("runtimes", {}).get(handler))
                if isinstance(runtime, dict):
                    systemd = bool((runtime.get("options") or {}).get("SystemdCgroup"))
                    break
    if systemd is None and kubelet:
        systemd = kubelet.get("cgroup_driver") == "systemd"
    return "gpuplane-probe.slice" if systemd else "/gpuplane-probe"


# ------------------------------------------------------------------ main

def inspect(args: argparse.Namespace) -> dict[str, Any]:
    host = Host(args.root, args.proc, args.exec_mode, args.timeout)
    report: dict[str, Any] = {"format": FORMAT, "hostname": socket.gethostname(),
                              "root": host.root, "exec": host.exec_mode, "errors": []}
    errors: list[str] = report["errors"]
    started = time.monotonic()
    procs = processes(args.proc)
    daemons = [daemon_of(p, host) for p in procs if is_containerd(p)]
    kubelets = [kubelet_of(p, host) for p in procs if is_kubelet(p)]
    kubelet = kubelets[0] if kubelets else None
    if kubelet is None:
        errors.append("no kubelet process found; assuming it talks to "
                      f"{DEFAULT_ADDRESS}")
    endpoint = kubelet["endpoint"] if kubelet else DEFAULT_ADDRESS
    served = [d for d in daemons if d["address"] == endpoint]
    mine = served[0] if served else None
    if daemons and mine is None:
        errors.append(f"no containerd daemon listens on the kubelet's endpoint {endpoint}")
    files: dict[str, str] = {}
    unreadable: list[str] = []
    for daemon in daemons:
        version = host.run([daemon["binary"], "--version"])
        daemon["version"] = version["stdout"].strip() if version.get("rc") == 0 else None
        collect_files(host, daemon["config"], files, unreadable)
    dump = None
    if mine is not None:
        dump = host.run([mine["binary"], "--config", mine["config"], "config", "dump"])
        dump = ({"pid": mine["pid"], "ok": dump.get("rc") == 0, **dump} if dump["ran"]
                else {"pid": mine["pid"], "ok": False, **dump})
    binaries = list(dict.fromkeys([*binary_names(files), *TOOLKIT_PATHS]))
    report.update(
        daemons=daemons,
        kubelet=kubelet,
        kubelet_daemon=mine["pid"] if mine else None,
        files=files,
        unreadable=unreadable,
        binaries=[inspect_binary(host, b) for b in binaries],
        glibc=host_glibc(host),
        os_release=os_release(host),
        config_dump=dump,
    )
    try:
        report["cri_probe"] = cri_probe(host, mine, args, dump, kubelet)
    except Exception as exc:  # the probe must never cost the rest of the report
        report["cri_probe"] = {"status": "failed", "error": f"probe crashed: {exc!r}"}
    report["elapsed_s"] = round(time.monotonic() - started, 3)
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="inspect_node", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/", help="where the host's / is mounted")
    parser.add_argument("--proc", default="/proc", help="where the host's /proc is")
    parser.add_argument("--exec", dest="exec_mode", choices=("nsenter", "direct", "none"),
                        default="none", help="how to run host commands")
    parser.add_argument("--cri-probe", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--cri-method", choices=("auto", "grpc", "crictl"), default="auto")
    parser.add_argument("--handler", default="nvidia", help="runtime handler to probe")
    parser.add_argument("--cgroup-parent", help="probe sandbox cgroup parent")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = inspect(args)
    except Exception as exc:
        report = {"format": FORMAT, "errors": [f"inspection failed: {exc!r}"]}
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
