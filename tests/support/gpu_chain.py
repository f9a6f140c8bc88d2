"""The whole node chain, real end to end: planned config → real containerd → the real
``nvidia-container-runtime`` (the newest toolkit build, CDI mode) → the CUDA probe in a
CRI container.

What runs is what a GPU node runs, nothing stood in for:

* the node files: gpuplane's plan for a distribution profile, plus the toolkit's drop-in
  **as the real installer writes it** (``tests/support/toolkit_oracle.py`` runs the newest
  ``nvidia-ctk-installer`` on the planned files, with the GPU Operator's env);
* the daemon: the line's real containerd on those files, made safe to run here exactly
  like every other real-daemon test (``oracle.prepare_for_daemon`` / ``oracle.Daemon``),
  plus the only two edits a sandbox needs: ``SystemdCgroup = false`` (no systemd here)
  and the nvidia runtimes' ``BinaryName`` pointing at the unpacked oracle runtime;
* the runtime: the oracle ``nvidia-container-runtime``, configured in CDI mode through
  ``NVIDIA_CTK_CONFIG_FILE_PATH`` (its config file's override, inherited by the shims
  containerd starts), with a debug log that proves containerd exec'd it;
* the workload: ``components/gpuplane/probe/cuda_probe.py`` run by a plain python3 image built
  here from the host's Debian python3 (binary, the libraries ``ldd`` names, the standard
  library), imported with ``ctr images import``: there is no registry.

Two modes. **gpu** (an NVIDIA driver is present: ``/dev/nvidiactl`` and ``libcuda.so.1``):
the CDI spec comes from the oracle ``nvidia-ctk cdi generate``, and the positive case
must exit 0. **rehearsal** (anywhere else): a fake CDI spec whose device ``all`` only sets
``GPUPLANE_FAKE_CDI``; the runtime must still be exec'd and apply it, and every probe
exits 2 (no libcuda). The negative controls are the same in both modes: handler ``runc``
→ 2, handler ``nvidia`` without a device request → 2, and a layout the rulebook rejects
(FM02, an nvidia-only drop-in on 1.6/1.7) → the CRI plugin does not load, as predicted.
Plans with the operator's ``cdi.enabled`` (``<profile>+cdi``) add a positive case whose
request is the CRI ``CDI_devices`` field, applied by containerd itself.

Run as a program (the offline GPU bundle does) it prints one JSON line per case::

    PYTHONPATH=tests python -m support.gpu_chain [--mode auto|gpu|rehearsal] [--matrix quick|full]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tomlkit

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, DistroProfile, profile
from gpuplane.plan.node import (
    PlanOptions,
    ToolkitMode,
    assess,
    plan_node,
    rendered_layout,
)
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout

TOOLKIT = toolkit_oracle.NEWEST   # its installer, runtime and CDI hook are built
PROBE = (Path(__file__).resolve().parents[2] / "components" / "gpuplane" / "probe"
         / "cuda_probe.py")
HOST_PYTHON = Path("/usr/bin/python3")
IMAGE_NAME = "docker.io/gpuplane/python3:chain"
FAKE_ENV = "GPUPLANE_FAKE_CDI"
CDI_KIND = "nvidia.com/gpu"

# k0s is left out: the chain does not run k0s's render step (gpuplane.distros.k0s_render),
# which merges the toolkit's drop-ins at k0s's restart. A k0s chain is open work.
PROFILES: dict[str, DistroProfile] = {
    **{d.value: profile(d) for d in Distro if d is not Distro.K0S},
    "k8s-snap-custom-base": profile(Distro.K8S_SNAP, containerd_base_dir="/data/ctr"),
    "k8s-snap-legacy": profile(Distro.K8S_SNAP, legacy=True),
}
CDI_SUFFIX = "+cdi"
"""``<profile>+cdi``: the plan with the operator's ``cdi.enabled`` (containerd's own CDI on,
``enable_cdi``), where the pod asks for the GPU through the CRI ``CDI_devices`` field and
containerd itself applies the spec (containerd >= 1.7)."""
CDI_LINES = ("1.7", "2.0", "2.1", "2.2")
REHEARSAL_LINE = "1.7"
"""Rehearsal (CI) matrix: every profile on this line, and kubeadm on every line."""
REJECTED_LINES = ("1.6", "1.7")
"""Lines where FM02 (a later drop-in replaces the whole CRI table) makes CRI fail."""

# The container's command: say whether the CDI edit reached it, then become the probe
# (exec keeps the probe's exit code the container's).
LAUNCHER = (
    "import os,sys;"
    f"sys.stderr.write('{FAKE_ENV}=%s\\n' % os.environ.get('{FAKE_ENV}', ''));"
    "sys.stderr.flush();"
    "os.execv(sys.executable, [sys.executable, '/probe/cuda_probe.py', '--json-only'])"
)


# --------------------------------------------------------------------------------------
# What is here: the oracle runtime, a driver or not


def oracle_tool(name: str) -> Path:
    """A program of the newest toolkit build; skips (fails in CI) when missing."""
    return toolkit_oracle.program(TOOLKIT, name)


def driver_present() -> tuple[bool, str]:
    """(True, "") when an NVIDIA driver is usable here, else (False, why not)."""
    if not Path("/dev/nvidiactl").exists():
        return False, "no NVIDIA driver: /dev/nvidiactl does not exist"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return False, f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({exc})"
    return True, ""


def resolve_mode(requested: str = "auto") -> str:
    """``gpu`` or ``rehearsal``; ``auto`` picks gpu exactly when a driver is present."""
    if requested == "auto":
        return "gpu" if driver_present()[0] else "rehearsal"
    if requested not in ("gpu", "rehearsal"):
        raise ValueError(f"mode must be auto, gpu or rehearsal, not {requested!r}")
    return requested


# --------------------------------------------------------------------------------------
# The plain python3 image


_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                "pydoc_data", "__pycache__", "site-packages", "dist-packages"}
_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
             "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
GLIBC_COMPAT = ("libdl.so.2", "libpthread.so.0", "librt.so.1", "libm.so.6", "libresolv.so.2",
                "libutil.so.1", "libanl.so.1")
"""glibc's libraries that every Debian image carries (package libc6) although python3 itself
no longer links them (glibc >= 2.34 folded them into libc.so.6 and keeps stubs). The NVIDIA
driver's ``libcuda.so.1`` still names ``libdl.so.2``, ``libpthread.so.0``, ``librt.so.1`` and
``libm.so.6``: without them ``dlopen`` fails in the pod (seen on an H100, driver 580.159.04)."""


def _ldd(paths: list[Path]) -> set[str]:
    """Every shared library (absolute path) the ELF files ``paths`` load, loader included."""
    libs: set[str] = set()
    for path in paths:
        proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            parts = line.split()
            if "=>" in parts:
                target = parts[parts.index("=>") + 1]
                if target.startswith("/"):
                    libs.add(target)
            elif parts and parts[0].startswith("/"):
                libs.add(parts[0])
    return libs


def python_rootfs(root: Path, python: Path = HOST_PYTHON) -> Path:
    """Fill ``root`` with ``python`` and only what it needs; returns the binary's path in it.

    The host's Debian python3: the binary, its standard library (tests, IDLE, tkinter,
    ensurepip left out) and every shared library ``ldd`` names for it and its extension
    modules, loader included, at their host paths, with an ``ld.so.cache`` made by
    ``ldconfig -r``. The image is this tree; the offline bundle runs its harness with it
    too (through the tree's own loader), so the GPU machine needs no Python of its own.
    """
    if not (python.exists() and os.access(python, os.X_OK)):
        oracle.unavailable(f"{python} is missing (the probe image is built from it)")
    exe = Path(os.path.realpath(python))
    stdlib = Path(subprocess.run(
        [str(exe), "-S", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    for d in ("dev", "proc", "sys", "tmp", "etc/ld.so.conf.d", "probe", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(exe, root / exe.relative_to("/"))
    (root / "usr/bin/python3").symlink_to(exe.name)
    shutil.copytree(stdlib, root / stdlib.relative_to("/"), symlinks=True,
                    ignore=lambda _d, names: [n for n in names if n in _SKIP_STDLIB
                                              or n.startswith("config-")])
    elves = [exe, *sorted((stdlib / "lib-dynload").glob("*.so"))]
    compat = {str(d / name) for name in GLIBC_COMPAT for d in map(Path, _LIB_DIRS)
              if (d / name).exists()}
    for lib in sorted(_ldd(elves) | compat):
        target = root / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), target)
        target.chmod(0o755)
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (root / "etc/ld.so.conf.d/multiarch.conf").write_text("\n".join(_LIB_DIRS) + "\n")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    subprocess.run([ldconfig, "-r", str(root)], capture_output=True, check=True)
    return root / exe.relative_to("/")


def build_python_image(dest: Path, python: Path = HOST_PYTHON, name: str = IMAGE_NAME) -> Path:
    """An OCI image tar (``IMAGE_NAME``): a plain python3 image (:func:`python_rootfs`),
    made here because there is no registry; the CDI hook's ``update-ldcache`` on a GPU
    node then extends a real ``ld.so.cache``, as in any Debian image."""
    with tempfile.TemporaryDirectory(prefix="gp-img-") as tmp:
        root = Path(tmp) / "rootfs"
        python_rootfs(root, python)
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(root.rglob("*")):
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return oracle.oci_image_tar(dest, name, layer.getvalue(), {
        "Cmd": ["/usr/bin/python3"],
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        "WorkingDir": "/",
    })


_IMAGE: Path | None = None


def python_image() -> Path:
    """The image tar for this process: ``$GPUPLANE_CHAIN_IMAGE`` (the bundle ships one),
    else built once into a temp dir."""
    global _IMAGE
    given = os.environ.get("GPUPLANE_CHAIN_IMAGE")
    if given:
        return Path(given)
    if _IMAGE is None or not _IMAGE.exists():
        tmp = tempfile.mkdtemp(prefix="gp-img-")
        atexit.register(shutil.rmtree, tmp, True)
        _IMAGE = build_python_image(Path(tmp) / "python3.tar")
    return _IMAGE


# --------------------------------------------------------------------------------------
# Node layouts: planned (runs) and rejected (FM02)


@dataclasses.dataclass
class ChainLayout:
    """A node's containerd files (node path → text, rendered) and what the rules say."""

    distro: str
    line: str
    files: dict[str, str]
    top: str
    errors: list[str]          # ids of the rulebook's error findings
    runtime_name: str = "nvidia"


def planned_layout(distro: str, line: str, tmp: Path) -> ChainLayout:
    """gpuplane's plan for ``distro`` on ``line`` with the operator's toolkit (the newest
    build), and that toolkit's files as the real installer writes them on the planned node.
    ``distro`` may end in ``+cdi`` (the operator's ``cdi.enabled``)."""
    cdi = distro.endswith(CDI_SUFFIX)
    prof = PROFILES[distro.removesuffix(CDI_SUFFIX)]
    version = ContainerdVersion.parse(line)
    plan = plan_node(prof, version, PlanOptions(toolkit=ToolkitMode.OPERATOR,
                                                toolkit_version=TOOLKIT, cdi=cdi))
    node, real = toolkit_oracle.run_on_plan(plan, TOOLKIT, tmp)
    files = rendered_layout({**node, **real.written}, prof, version)
    return ChainLayout(distro, line, files, prof.config_path,
                       [f.id for f in plan.findings if f.severity is Severity.ERROR],
                       plan.options.runtime_name)


ONLY_NVIDIA = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def rejected_layout(line: str) -> ChainLayout:
    """kubeadm with the host toolkit as gpuplane plans it, plus a later drop-in holding
    only the nvidia runtime (what a hand-written or older toolkit drop-in looks like).
    On containerd < 2.1 it replaces the whole CRI table: the rulebook says FM02."""
    prof = PROFILES["kubeadm"]
    version = ContainerdVersion.parse(line)
    options = PlanOptions(toolkit=ToolkitMode.HOST)
    plan = plan_node(prof, version, options)
    assert prof.dropin_dir
    files = {**plan.files, f"{prof.dropin_dir}/99-nvidia.toml": ONLY_NVIDIA}
    judged = assess(prof, version, options, files, plan.baseline)
    return ChainLayout("kubeadm", line, {**plan.baseline, **files}, prof.config_path,
                       [f.id for f in judged.findings if f.severity is Severity.ERROR])


def adapt_for_sandbox(files: dict[str, str], runtime: Path,
                      spec_dir: Path | None = None) -> dict[str, str]:
    """The edits beyond ``oracle.prepare_for_daemon``: every ``SystemdCgroup`` false (no
    systemd here), every ``BinaryName`` of an nvidia-container-runtime (the toolkit's
    ``nvidia``, ``nvidia-cdi``, ``nvidia-legacy``) → the oracle ``runtime``, and, where a
    CRI table sets ``enable_cdi``, its ``cdi_spec_dirs`` → ``spec_dir`` (instead of the
    host's /etc/cdi, /var/run/cdi). Placement, like the harness's sockets: a fixed
    ``stream_server_port`` (RKE2/K3s set 10010) becomes "0", a free port, so that daemons
    running side by side on one machine cannot collide (containerd exits when it is taken).
    """

    def walk(table: Any) -> None:
        if "enable_cdi" in table and spec_dir is not None:
            table["cdi_spec_dirs"] = [str(spec_dir)]
        for key, value in list(table.items()):
            if key == "SystemdCgroup":
                table[key] = False
            elif key == "stream_server_port":
                table[key] = "0"
            elif key == "BinaryName" and Path(str(value)).name.startswith(
                    "nvidia-container-runtime"):
                table[key] = str(runtime)
            elif isinstance(value, dict):
                walk(value)

    out = {}
    for path, text in files.items():
        doc = tomlkit.parse(text)
        walk(doc)
        out[path] = tomlkit.dumps(doc)
    return out


# --------------------------------------------------------------------------------------
# The runtime's config and the CDI spec


def runtime_config(dirpath: Path, spec_dir: Path) -> tuple[Path, Path]:
    """(config.toml, debug log) for the oracle runtime: CDI mode, specs from ``spec_dir``,
    ``runc`` found on the shim's PATH (the daemon's runc link)."""
    dirpath.mkdir(parents=True, exist_ok=True)
    log = dirpath / "nvidia-container-runtime.log"
    doc = {
        "nvidia-container-runtime": {
            "debug": str(log), "log-level": "debug", "mode": "cdi", "runtimes": ["runc"],
            "modes": {"cdi": {"default-kind": CDI_KIND, "spec-dirs": [str(spec_dir)],
                              "annotation-prefixes": ["cdi.k8s.io/"]}},
        },
    }
    config = dirpath / "config.toml"
    config.write_text(tomlkit.dumps(doc))
    return config, log


def write_fake_spec(spec_dir: Path) -> Path:
    """A CDI spec whose device ``all`` only sets ``GPUPLANE_FAKE_CDI`` (rehearsal)."""
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"cdiVersion": "0.5.0", "kind": CDI_KIND,
            "devices": [{"name": "all",
                         "containerEdits": {"env": [f"{FAKE_ENV}={CDI_KIND}=all"]}}],
            "containerEdits": {}}
    path = spec_dir / "gpuplane-fake.json"
    path.write_text(json.dumps(spec, indent=2))
    return path


def write_real_spec(spec_dir: Path) -> Path:
    """The spec the oracle ``nvidia-ctk cdi generate`` writes from this machine's driver."""
    spec_dir.mkdir(parents=True, exist_ok=True)
    path = spec_dir / "nvidia.yaml"
    proc = subprocess.run(
        [str(oracle_tool("nvidia-ctk")), "cdi", "generate", "--output", str(path),
         "--nvidia-cdi-hook-path", str(oracle_tool("nvidia-cdi-hook"))],
        capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise oracle.OracleError(f"nvidia-ctk cdi generate failed ({proc.returncode}):\n"
                                 f"{proc.stdout}{proc.stderr}")
    return path


# --------------------------------------------------------------------------------------
# Cases and their results


@dataclasses.dataclass
class CaseResult:
    """One JSON line: what ran, what the rules and the mode predicted, what happened."""

    case: str
    line: str
    distro: str
    handler: str
    expected: str           # "exit 0", "exit 2" or "cri refused"
    exit_code: int | None   # the probe container's exit code (None: it never ran)
    passed: bool
    probe_seconds: float | None
    mode: str
    runtime_exec: bool | None = None   # the oracle runtime's log names this container
    cdi_env: str | None = None         # GPUPLANE_FAKE_CDI as the container saw it
    detail: str = ""

    def json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=False)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def chain_daemon(layout: ChainLayout, workdir: Path, spec_dir: Path,
                 runtime: Path | None = None) -> Iterator[tuple[oracle.Daemon, Path]]:
    """A started daemon on ``layout`` (adapted), with the oracle runtime configured; yields
    (daemon, the runtime's debug log). The runtime's config reaches it through the env
    containerd passes to its shims. ``runtime`` replaces the oracle (the tests use it to
    show that a chain bypassing the real runtime is caught)."""
    runtime = runtime or oracle_tool("nvidia-container-runtime")
    files = adapt_for_sandbox(layout.files, runtime, spec_dir)
    write_layout(files, workdir / "node")
    config, log = runtime_config(workdir / "runtime", spec_dir)
    with _environ(NVIDIA_CTK_CONFIG_FILE_PATH=str(config)), \
            oracle.Daemon(layout.line, host_path(workdir / "node", layout.top),
                          workdir / "d") as daemon:
        yield daemon, log


def _read_cri_log(path: Path) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) of a CRI container log (``<ts> <stream> <tag> msg``)."""
    out: list[str] = []
    err: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        for raw in path.read_text(errors="replace").splitlines():
            parts = raw.split(" ", 3)
            if len(parts) == 4:
                (out if parts[1] == "stdout" else err).append(parts[3])
    return out, err


@dataclasses.dataclass
class ProbeRun:
    exit_code: int | None
    seconds: float | None
    container_id: str
    stdout: list[str]
    stderr: list[str]
    error: str = ""


_IMPORTED: weakref.WeakSet[oracle.Daemon] = weakref.WeakSet()
"""Daemons the python3 image has been imported into."""


def run_probe(daemon: oracle.Daemon, handler: str, *, device: str | None, logdir: Path,
              timeout: float = 180) -> ProbeRun:
    """A CRI pod through ``handler`` running the probe; returns once it has exited.

    ``device`` asks for every GPU: ``"env"`` sets ``NVIDIA_VISIBLE_DEVICES=all`` (the
    runtime in CDI mode makes it the CDI device ``nvidia.com/gpu=all``), ``"cdi-field"``
    puts ``nvidia.com/gpu=all`` in the CRI ``CDI_devices`` field (containerd applies it
    itself), None asks for nothing."""
    pb = oracle.cri_modules()[0]
    grpc = oracle._grpc()
    image = python_image()
    if daemon not in _IMPORTED:
        snapshotter = "overlayfs"
        if daemon.top_config is not None:
            dumped = oracle.dump(daemon.line, daemon.top_config)
            if dumped.config:
                snapshotter = oracle.snapshotter_from_dump(daemon.line, dumped.config)
        daemon.ctr("images", "import", "--snapshotter", snapshotter, str(image), timeout=120)
        _IMPORTED.add(daemon)
    pod = oracle.run_pod(daemon, handler, log_directory=logdir)
    if not pod.ok:
        return ProbeRun(None, None, "", [], [], f"RunPodSandbox: {pod.error}")
    svc = daemon.runtime_service()
    envs = [pb.KeyValue(key="NVIDIA_VISIBLE_DEVICES", value="all")] if device == "env" else []
    cdi = [pb.CDIDevice(name=f"{CDI_KIND}=all")] if device == "cdi-field" else []
    config = pb.ContainerConfig(
        CDI_devices=cdi,
        metadata=pb.ContainerMetadata(name="probe"),
        image=pb.ImageSpec(image=IMAGE_NAME),
        command=["/usr/bin/python3"], args=["-c", LAUNCHER], envs=envs,
        mounts=[pb.Mount(container_path="/probe/cuda_probe.py", host_path=str(PROBE),
                         readonly=True)],
        log_path="probe.log",
        linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
            namespace_options=pb.NamespaceOption(network=pb.NODE))),
    )
    uid = uuid.uuid4().hex[:12]  # the container name CRI reserves derives from these
    sandbox = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=f"probe-{uid}", uid=uid, namespace="default"),
        log_directory=str(logdir))
    try:
        created = svc.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod.sandbox_id, config=config, sandbox_config=sandbox), timeout=60)
        cid = created.container_id
        svc.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=60)
    except grpc.RpcError as exc:
        return ProbeRun(None, None, "", [], [], f"{exc.code().name}: {exc.details()}")
    deadline = time.monotonic() + timeout
    while True:
        status = svc.ContainerStatus(pb.ContainerStatusRequest(container_id=cid),
                                     timeout=10).status
        if status.state == pb.CONTAINER_EXITED:
            break
        if time.monotonic() > deadline:
            return ProbeRun(None, None, cid, [], [], f"probe still running after {timeout} s")
        time.sleep(0.05)
    seconds = (status.finished_at - status.started_at) / 1e9
    out, err = _read_cri_log(logdir / "probe.log")
    return ProbeRun(status.exit_code, round(seconds, 3), cid, out, err)


def _runtime_saw(log: Path, container_id: str) -> bool:
    try:
        return bool(container_id) and container_id in log.read_text(errors="replace")
    except FileNotFoundError:
        return False


def _cdi_env(run: ProbeRun) -> str | None:
    for line in run.stderr:
        if line.startswith(f"{FAKE_ENV}="):
            return line.split("=", 1)[1]
    return None


HANDLER_CASES: tuple[tuple[str, str, str | None], ...] = (
    # (case, handler, device request)
    ("positive", "nvidia", "env"),
    ("runc", "runc", None),
    ("nvidia-no-device", "nvidia", None),
)
CDI_CASE = ("positive-cdi-field", "nvidia", "cdi-field")
"""Only on ``+cdi`` layouts: the request the device plugin makes when CDI is on."""


def cases_for(layout: ChainLayout) -> tuple[tuple[str, str, str | None], ...]:
    return (*HANDLER_CASES, CDI_CASE) if layout.distro.endswith(CDI_SUFFIX) else HANDLER_CASES


def expected_exit(case: str, mode: str) -> int:
    """0 only for the positive cases on a GPU; 2 (no libcuda.so.1) for everything else."""
    return 0 if case.startswith("positive") and mode == "gpu" else 2


def run_layout_cases(layout: ChainLayout, mode: str, workdir: Path, spec_dir: Path,
                     runtime: Path | None = None) -> list[CaseResult]:
    """The three handler cases on one planned layout, in one daemon."""
    results = []
    if layout.errors:
        return [CaseResult(case, layout.line, layout.distro, handler, "plan is clean", None,
                           False, None, mode, detail=f"rulebook errors: {layout.errors}")
                for case, handler, _ in cases_for(layout)]
    with chain_daemon(layout, workdir, spec_dir, runtime) as (daemon, log):
        for case, handler, device in cases_for(layout):
            handler_name = layout.runtime_name if handler == "nvidia" else handler
            want = expected_exit(case, mode)
            run = run_probe(daemon, handler_name, device=device, logdir=workdir / case)
            saw = _runtime_saw(log, run.container_id)
            cdi = _cdi_env(run)
            problems = []
            if run.exit_code != want:
                problems.append(f"exit {run.exit_code}, expected {want}")
            if saw != (handler == "nvidia"):
                problems.append("the oracle runtime was " + ("" if saw else "not ") +
                                "exec'd for this container")
            if mode == "rehearsal":
                fake = f"{CDI_KIND}=all" if device else ""
                if cdi != fake:
                    problems.append(f"{FAKE_ENV} in the container is {cdi!r}, "
                                    f"expected {fake!r} (the CDI edit)")
            probe: dict[str, Any] = {}
            with contextlib.suppress(json.JSONDecodeError, IndexError, AttributeError):
                probe = dict(json.loads(run.stdout[0]))
            said = f"probe status {probe.get('status') or '?'}"
            if problems and probe.get("error"):  # the probe's own words say why
                said += f": {str(probe['error'])[-400:]}"
            detail = "; ".join([*problems, said]) if problems else said
            if run.error:
                detail = f"{run.error}; {detail}"
            results.append(CaseResult(case, layout.line, layout.distro, handler_name,
                                      f"exit {want}", run.exit_code, not problems,
                                      run.seconds, mode, saw, cdi, detail))
    return results


def run_rejected_case(layout: ChainLayout, mode: str, workdir: Path,
                      spec_dir: Path) -> CaseResult:
    """The rulebook rejects the layout (FM02); the daemon must agree: the CRI plugin does
    not load, so no pod can run through any handler."""
    problems = []
    if "FM02" not in layout.errors:
        problems.append(f"the rulebook did not reject it with FM02 (errors: {layout.errors})")
    pb = oracle.cri_modules()[0]
    grpc = oracle._grpc()
    refusal = error = ""
    with chain_daemon(layout, workdir, spec_dir) as (daemon, _log):
        daemon.require_started()
        status = daemon.plugin_status()
        error = daemon.plugin_error() or daemon.plugin_error("io.containerd.grpc.v1.cri")
        if status != "error":
            problems.append(f"CRI plugin status {status!r}, expected 'error'")
        try:
            daemon.runtime_service().RunPodSandbox(
                pb.RunPodSandboxRequest(config=pb.PodSandboxConfig(), runtime_handler="nvidia"),
                timeout=10)
            problems.append("RunPodSandbox was accepted")
        except grpc.RpcError as exc:
            refusal = f"{exc.code().name}: {exc.details()}"
    detail = "; ".join(problems) or f"CRI plugin: {error}; RunPodSandbox: {refusal}"
    return CaseResult("rejected-FM02", layout.line, layout.distro, "nvidia", "cri refused",
                      None, not problems, None, mode, detail=detail)


def matrix(kind: str) -> list[tuple[str, str]]:
    """(profile, line) pairs: ``full`` = every profile x every line, and every profile with
    CDI on every line that has it; ``quick`` (CI's rehearsal) = every profile on 1.7,
    kubeadm on every other line, and kubeadm with CDI on 1.7."""
    if kind == "full":
        return [*((d, line) for line in oracle.LINES for d in PROFILES),
                *((d + CDI_SUFFIX, line) for line in CDI_LINES for d in PROFILES)]
    if kind != "quick":
        raise ValueError(f"matrix must be quick or full, not {kind!r}")
    return [*((d, REHEARSAL_LINE) for d in PROFILES),
            *(("kubeadm", line) for line in oracle.LINES if line != REHEARSAL_LINE),
            ("kubeadm" + CDI_SUFFIX, REHEARSAL_LINE)]


def prepare_specs(mode: str, spec_dir: Path) -> None:
    if mode == "gpu":
        write_real_spec(spec_dir)
    else:
        write_fake_spec(spec_dir)


def short_tmp() -> Path:
    """A short /tmp dir (unix socket paths stay under 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))


def run_all(mode: str, pairs: list[tuple[str, str]], rejected: tuple[str, ...] = REJECTED_LINES,
            emit: Any = print) -> list[CaseResult]:
    """Every case of ``pairs`` (profile, line) and the rejected layout on the ``rejected``
    lines, in ``mode``; ``emit`` gets each JSON line as it is known."""
    results: list[CaseResult] = []
    base = short_tmp()
    try:
        spec_dir = base / "cdi"
        prepare_specs(mode, spec_dir)
        n = 0
        for distro, line in pairs:
            n += 1
            work = base / f"c{n}"
            oracle.require_line(line)
            try:
                layout = planned_layout(distro, line, work)
                layout_results = run_layout_cases(layout, mode, work, spec_dir)
            except oracle.OracleError as exc:  # the harness failed: report it, go on
                layout_results = [CaseResult("harness", line, distro, "", "cases run", None,
                                             False, None, mode, detail=str(exc)[-2000:])]
            for result in layout_results:
                emit(result.json())
                results.append(result)
        for line in rejected:
            n += 1
            try:
                result = run_rejected_case(rejected_layout(line), mode, base / f"c{n}",
                                           spec_dir)
            except oracle.OracleError as exc:
                result = CaseResult("harness", line, "kubeadm", "", "cases run", None, False,
                                    None, mode, detail=str(exc)[-2000:])
            emit(result.json())
            results.append(result)
    finally:
        oracle.unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="auto", choices=("auto", "gpu", "rehearsal"))
    parser.add_argument("--matrix", default=None, choices=("quick", "full"),
                        help="default: full on a GPU, quick in rehearsal")
    parser.add_argument("--only", action="append", default=[], metavar="PROFILE:LINE",
                        help="run only these layouts (and the rejected one on their lines)")
    args = parser.parse_args(argv)
    # The offline bundle carries its own runc and busybox (see scripts/gpu-chain-bundle.py)
    oracle.RUNC = Path(os.environ.get("GPUPLANE_RUNC") or oracle.RUNC)
    oracle.BUSYBOX = Path(os.environ.get("GPUPLANE_BUSYBOX") or oracle.BUSYBOX)
    try:
        return _run_main(parser, args)
    except (oracle.OracleError, Exception) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 2
    except BaseException as exc:  # pytest's skip/fail outcomes from oracle.unavailable
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        print(json.dumps({"error": f"{getattr(exc, 'msg', exc)}"}), flush=True)
        return 2


def _run_main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    mode = resolve_mode(args.mode)
    present, why = driver_present()
    if mode == "gpu" and not present:
        print(json.dumps({"error": why, "mode": mode}))
        return 2
    kind = args.matrix or ("full" if mode == "gpu" else "quick")
    pairs = matrix(kind)
    rejected = REJECTED_LINES
    if args.only:
        pairs = [tuple(o.split(":", 1)) for o in args.only]  # type: ignore[misc]
        unknown = [d for d, _ in pairs if d.removesuffix(CDI_SUFFIX) not in PROFILES]
        if unknown or any(line not in oracle.LINES for _, line in pairs):
            parser.error(f"--only wants PROFILE:LINE with PROFILE in {sorted(PROFILES)} "
                         f"and LINE in {oracle.LINES}")
        rejected = tuple(line for line in REJECTED_LINES if line in {x for _, x in pairs})
        kind = "only"
    t0 = time.monotonic()
    results = run_all(mode, pairs, rejected, emit=lambda s: print(s, flush=True))
    failed = [r for r in results if not r.passed]
    summary = {"summary": True, "mode": mode, "matrix": kind, "cases": len(results),
               "failed": len(failed), "seconds": round(time.monotonic() - t0, 1),
               "machine": os.uname().nodename, "driver": _driver_version()}
    bundle = os.environ.get("GPUPLANE_BUNDLE")
    if bundle:
        summary["foreign_libraries"] = foreign_libraries(Path(bundle))
    print(json.dumps(summary))
    return 1 if failed else 0


def foreign_libraries(bundle: Path) -> list[str]:
    """Shared libraries this process has mapped from outside ``bundle`` (the NVIDIA
    driver's own excepted): empty when the offline bundle is self-contained."""
    out: set[str] = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if ".so" not in path or not path.startswith("/"):
                continue
            if not path.startswith(str(bundle) + "/") and not Path(path).name.startswith(
                    ("libcuda", "libnvidia")):
                out.add(path)
    return sorted(out)


def _driver_version() -> str | None:
    with contextlib.suppress(OSError):
        return Path("/proc/driver/nvidia/version").read_text().splitlines()[0].strip()
    return None


if __name__ == "__main__":
    sys.exit(main())
