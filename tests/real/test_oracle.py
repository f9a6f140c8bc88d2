"""The oracle harness, proven against the real containerd 1.6, 1.7 and 2.1 builds.

If these pass, the rest of the suite can trust what ``oracle`` says containerd does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from support import oracle

StartDaemon = Callable[[str, Path], oracle.Daemon]

# What each line logs when the merged CRI table lost its default runtime (the incident).
# Note the backticks (and the unbalanced last one): that is containerd's literal text.
MISSING_DEFAULT_RUNC = (
    "invalid plugin config: no corresponding runtime configured in `containerd.runtimes` "
    'for `containerd` `default_runtime_name = "runc"'
)
# What RunPodSandbox answers for a handler with no runtime, per line.
UNKNOWN_HANDLER = {
    "1.6": re.escape('failed to get sandbox runtime: no runtime for "xyz" is configured'),
    "1.7": re.escape('failed to get sandbox runtime: no runtime for "xyz" is configured'),
    **{line: 'unable to get OCI runtime for sandbox "[0-9a-f]{64}": '
       + re.escape('no runtime for "xyz" is configured') for line in ("2.0", "2.1", "2.2")},
}
# enable_cdi in an empty config's dump: 1.6 has no such field.
DEFAULT_CDI = {"1.6": None, "1.7": False, "2.0": True, "2.1": True, "2.2": True}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def cri_key(line: str) -> str:
    """The CRI runtime table a config written *for* ``line`` uses (v2 for 1.x, v3 for 2.x)."""
    return oracle.cri_runtime_table_key(line)


def version_for(line: str) -> int:
    return 3 if line.startswith("2.") else 2


def runc_and_nvidia(line: str, root: Path, wrapper: Path) -> Path:
    """One file, correct for ``line``: default runc plus an nvidia runtime via ``wrapper``."""
    key = cri_key(line)
    return write(
        root / "config.toml",
        f"""version = {version_for(line)}
[plugins."{key}".containerd]
default_runtime_name = "runc"
[plugins."{key}".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins."{key}".containerd.runtimes.runc.options]
SystemdCgroup = false
[plugins."{key}".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins."{key}".containerd.runtimes.nvidia.options]
BinaryName = "{wrapper}"
SystemdCgroup = false
""",
    )


def incident_layout(root: Path, wrapper: Path, systemd_cgroup: bool = True) -> Path:
    """The incident: a runc drop-in, then an nvidia drop-in holding only its runtime."""
    conf_d = root / "conf.d"
    cri = '"io.containerd.grpc.v1.cri"'
    write(
        conf_d / "00-k8s-runc.toml",
        f"""version = 2
[plugins.{cri}.containerd]
default_runtime_name = "runc"
[plugins.{cri}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.{cri}.containerd.runtimes.runc.options]
SystemdCgroup = {"true" if systemd_cgroup else "false"}
""",
    )
    write(
        conf_d / "99-nvidia.toml",
        f"""version = 2
[plugins.{cri}.containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins.{cri}.containerd.runtimes.nvidia.options]
BinaryName = "{wrapper}"
""",
    )
    return write(root / "config.toml", f'version = 2\nimports = ["{conf_d}/*.toml"]\n')


def full_table_dropin(root: Path, wrapper: Path, relative: bool = False) -> Path:
    """What works on 1.x too: one drop-in carrying the whole CRI table.

    ``relative`` imports it as ``conf.d/*.toml``, which 1.6 resolves against the
    working directory (``/`` on a node) and so never finds.
    """
    conf_d = root / "conf.d"
    cri = '"io.containerd.grpc.v1.cri"'
    write(
        conf_d / "99-nvidia.toml",
        f"""version = 2
[plugins.{cri}]
enable_unprivileged_ports = true
[plugins.{cri}.containerd]
default_runtime_name = "runc"
[plugins.{cri}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.{cri}.containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins.{cri}.containerd.runtimes.nvidia.options]
BinaryName = "{wrapper}"
""",
    )
    pattern = "conf.d/*.toml" if relative else f"{conf_d}/*.toml"
    return write(root / "config.toml", f'version = 2\nimports = ["{pattern}"]\n')


def leftovers(daemon: oracle.Daemon) -> dict[str, object]:
    """Processes, mounts and cgroups a stopped daemon must not have left behind."""
    shims = oracle._shims_and_descendants(str(daemon.socket))
    mounts = oracle._mounts_under(daemon.rundir, daemon.workdir)
    cgroups = [
        str(root / daemon.cgroup_parent.strip("/"))
        for root in oracle._cgroup_roots()
        if (root / daemon.cgroup_parent.strip("/")).exists()
    ]
    alive = daemon.proc is not None and daemon.proc.poll() is None
    return {"daemon": alive, "shims": shims, "mounts": mounts, "cgroups": cgroups}


CLEAN = {"daemon": False, "shims": [], "mounts": [], "cgroups": []}


# --------------------------------------------------------------------------------------
# No binaries needed


def test_missing_build_skips_or_fails_by_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPLANE_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("GPUPLANE_REQUIRE_REAL", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"containerd 1\.7"):
        oracle.binary("1.7")
    monkeypatch.setenv("GPUPLANE_REQUIRE_REAL", "1")
    with pytest.raises(pytest.fail.Exception, match="GPUPLANE_REQUIRE_REAL"):
        oracle.require_line("1.6")
    monkeypatch.setenv("GPUPLANE_REQUIRE_REAL", "")  # what `${CI:+1}` gives outside CI
    with pytest.raises(pytest.skip.Exception):
        oracle.binary("2.1", "ctr")
    with pytest.raises(ValueError, match="unknown containerd line"):
        oracle.binary("1.5")


def test_prepare_for_daemon_patches_every_cri_table(tmp_path: Path) -> None:
    src = tmp_path / "etc"
    write(
        src / "config.toml",
        f"""version = 2
root = "/var/lib/containerd"
imports = ["{src}/conf.d/*.toml", "extra/x.toml"]
[grpc]
address = "/run/containerd/containerd.sock"
max_recv_message_size = 1
""",
    )
    write(
        src / "conf.d/00-runc.toml",
        """version = 2
state = "/run/containerd"
# the k8s runc drop-in
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
""",
    )
    write(
        src / "conf.d/50-other.toml",
        'version = 2\n[plugins."io.containerd.gc.v1.scheduler"]\npause_threshold = 0.5\n',
    )
    write(
        src / "extra/x.toml",
        'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = false\n',
    )
    work = tmp_path / "w"
    top = oracle.prepare_for_daemon(src / "config.toml", work, rundir=Path("/tmp/gp-R"))

    assert top == work / "cfg" / str(src / "config.toml").lstrip("/")
    main = tomllib.loads(top.read_text())
    assert main["root"] == "/tmp/gp-R/root" and main["state"] == "/tmp/gp-R/state"
    assert main["grpc"] == {"address": "/tmp/gp-R/c.sock", "max_recv_message_size": 1}
    assert main["ttrpc"] == {"address": "/tmp/gp-R/c.sock.ttrpc"}
    # Absolute patterns point into the mirror, relative ones are kept as written.
    assert main["imports"] == [f"{work}/cfg{src}/conf.d/*.toml", "extra/x.toml"]
    # The main file had no CRI table, but a drop-in has: nothing CRI added here.
    assert "io.containerd.grpc.v1.cri" not in main["plugins"]
    assert main["plugins"]["io.containerd.nri.v1.nri"] == {"socket_path": "/tmp/gp-R/nri.sock"}

    mirror = top.parent
    assert "# the k8s runc drop-in" in (mirror / "conf.d/00-runc.toml").read_text()  # in place
    runc = tomllib.loads((mirror / "conf.d/00-runc.toml").read_text())
    assert "state" not in runc
    assert runc["plugins"]["io.containerd.grpc.v1.cri"] == {
        "restrict_oom_score_adj": True,
        "containerd": {"runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2"}}},
    }
    other = tomllib.loads((mirror / "conf.d/50-other.toml").read_text())
    assert other == {
        "version": 2,
        "plugins": {"io.containerd.gc.v1.scheduler": {"pause_threshold": 0.5}},
    }
    v3 = tomllib.loads((mirror / "extra/x.toml").read_text())
    assert v3["plugins"]["io.containerd.cri.v1.runtime"] == {
        "enable_cdi": False,
        "restrict_oom_score_adj": True,
    }
    # The originals are untouched.
    assert "restrict_oom_score_adj" not in (src / "conf.d/00-runc.toml").read_text()


@pytest.mark.parametrize(
    ("version", "key"),
    [(1, "cri"), (2, "io.containerd.grpc.v1.cri"), (3, "io.containerd.cri.v1.runtime")],
)
def test_prepare_for_daemon_adds_cri_table_when_none_exists(
    tmp_path: Path, version: int, key: str
) -> None:
    cfg = write(tmp_path / "c.toml", "" if version == 1 else f"version = {version}\n")
    top = oracle.prepare_for_daemon(cfg, tmp_path / "w")
    plugins = tomllib.loads(top.read_text())["plugins"]
    assert plugins[key] == {"restrict_oom_score_adj": True}


def test_pause_image_is_a_valid_oci_layout(tmp_path: Path) -> None:
    import json
    import tarfile

    if not oracle.BUSYBOX.exists():
        oracle.unavailable(f"{oracle.BUSYBOX} is missing")
    tar = oracle.build_pause_image(tmp_path / "p.tar", "registry.k8s.io/pause:3.6")
    with tarfile.open(tar) as t:
        index = json.load(t.extractfile("index.json"))  # type: ignore[arg-type]
        desc = index["manifests"][0]
        assert desc["annotations"]["io.containerd.image.name"] == "registry.k8s.io/pause:3.6"
        manifest = json.load(t.extractfile("blobs/sha256/" + desc["digest"][7:]))  # type: ignore[arg-type]
        config = json.load(t.extractfile("blobs/sha256/" + manifest["config"]["digest"][7:]))  # type: ignore[arg-type]
    assert config["config"]["Entrypoint"][0] == "/bin/busybox"


# --------------------------------------------------------------------------------------
# containerd config dump


def test_dump_of_empty_v2_config(containerd_line: str, tmp_path: Path) -> None:
    result = oracle.dump(containerd_line, write(tmp_path / "c.toml", "version = 2\n"))
    assert result.ok, result.error
    assert result.returncode == 0
    eff = oracle.effective_from_dump(containerd_line, result.config or {})
    assert eff == {
        "default_runtime": "runc",
        "cdi": DEFAULT_CDI[containerd_line],
        "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}},
    }


def test_dump_reports_bad_config(containerd_line: str, tmp_path: Path) -> None:
    bad = write(tmp_path / "c.toml", "version = 2\n[plugins\n")
    result = oracle.dump(containerd_line, bad)
    assert not result.ok and result.config is None
    assert result.returncode == 1
    assert "c.toml" in result.error


def test_dump_of_incident_layout(containerd_line: str, tmp_path: Path) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    result = oracle.dump(containerd_line, incident_layout(tmp_path, wrapper))
    assert result.ok, result.error
    eff = oracle.effective_from_dump(containerd_line, result.config or {})
    nvidia = {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": str(wrapper)}}
    runc = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    assert eff["default_runtime"] == "runc"
    if containerd_line in ("1.6", "1.7"):
        # 99-nvidia.toml replaced the whole CRI table: runc is gone.
        assert eff["runtimes"] == {"nvidia": nvidia}
    else:
        assert eff["runtimes"] == {"runc": runc, "nvidia": nvidia}


def test_dump_relative_glob_import(containerd_line: str, tmp_path: Path) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    result = oracle.dump(containerd_line, full_table_dropin(tmp_path, wrapper, relative=True))
    assert result.ok, result.error
    runtimes = oracle.effective_from_dump(containerd_line, result.config or {})["runtimes"]
    if containerd_line == "1.6":  # resolved against the working directory, /: no match
        assert set(runtimes) == {"runc"}
    else:  # resolved against the config file's directory
        assert set(runtimes) == {"runc", "nvidia"}


# --------------------------------------------------------------------------------------
# Real daemons


def test_incident_layout_daemon(
    containerd_line: str, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    daemon = start_daemon(containerd_line, incident_layout(tmp_path, wrapper))
    daemon.require_started()  # containerd itself starts; only its CRI plugin may not
    if containerd_line in ("1.6", "1.7"):
        assert daemon.plugin_status("io.containerd.grpc.v1.cri") == "error"
        assert daemon.plugin_error("io.containerd.grpc.v1.cri") == MISSING_DEFAULT_RUNC
        assert "failed to load plugin io.containerd.grpc.v1.cri" in daemon.log_text()
        with pytest.raises(oracle.OracleError, match="CRI service not answering: UNIMPLEMENTED"):
            oracle.cri_status(daemon)
    else:
        for plugin in (
            "io.containerd.grpc.v1.cri",
            "io.containerd.cri.v1.runtime",
            "io.containerd.cri.v1.images",
        ):
            assert daemon.plugin_status(plugin) == "ok", daemon.plugin_error(plugin)
        live = oracle.effective_from_status(oracle.cri_status(daemon))
        assert set(live["runtimes"]) == {"runc", "nvidia"}
        assert live["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}
        dumped = oracle.dump(containerd_line, daemon.config)
        assert live == oracle.effective_from_dump(containerd_line, dumped.config or {})


def test_bad_option_type_fails_at_start(
    containerd_line: str, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    key = cri_key(containerd_line)
    cfg = write(
        tmp_path / "c.toml",
        f"version = {version_for(containerd_line)}\n"
        f'[plugins."{key}".containerd]\ndefault_runtime_name = 42\n',
    )
    daemon = start_daemon(containerd_line, cfg)
    if daemon.start_ok:  # decoded lazily by the plugin: containerd runs, CRI does not
        assert daemon.plugin_status() == "error"
    else:
        assert "containerd.log" not in daemon.start_error
        assert "exited with 1" in daemon.start_error


def test_sandbox_runs_through_nvidia_handler(
    containerd_line: str, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    daemon = start_daemon(containerd_line, runc_and_nvidia(containerd_line, tmp_path, wrapper))
    daemon.require_started()
    assert daemon.plugin_status() == "ok", daemon.plugin_error()

    result = oracle.run_sandbox(daemon, "nvidia")
    assert result.ok, result.error
    calls = oracle.wrapper_calls(wrapper)
    assert any(" create " in c and result.sandbox_id in c for c in calls), calls

    before = len(oracle.wrapper_calls(wrapper))
    assert oracle.run_sandbox(daemon, "runc").ok
    assert oracle.run_sandbox(daemon, "").ok  # "" = the default runtime (runc)
    assert len(oracle.wrapper_calls(wrapper)) == before  # runc did not go through it

    unknown = oracle.run_sandbox(daemon, "xyz")
    assert not unknown.ok and unknown.sandbox_id is None
    assert re.fullmatch(UNKNOWN_HANDLER[containerd_line], unknown.error), unknown.error


@pytest.mark.parametrize("layout", ["single-file", "full-table-dropin", "relative-glob-dropin"])
def test_cri_status_matches_dump(
    containerd_line: str, layout: str, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    if layout == "single-file":
        cfg = runc_and_nvidia(containerd_line, tmp_path, wrapper)
    elif layout == "full-table-dropin":
        cfg = full_table_dropin(tmp_path, wrapper)
    else:
        cfg = full_table_dropin(tmp_path, wrapper, relative=True)
    # Dump the ORIGINAL layout: the daemon runs a patched copy, which must not matter.
    dumped = oracle.dump(containerd_line, cfg)
    assert dumped.ok, dumped.error
    expected = oracle.effective_from_dump(containerd_line, dumped.config or {})
    has_nvidia = not (layout == "relative-glob-dropin" and containerd_line == "1.6")
    assert ("nvidia" in expected["runtimes"]) == has_nvidia

    daemon = start_daemon(containerd_line, cfg)
    daemon.require_started()
    assert oracle.effective_from_status(oracle.cri_status(daemon)) == expected
    if layout != "single-file":  # and pods really go through the wrapper, or cannot
        result = oracle.run_sandbox(daemon, "nvidia")
        assert result.ok == has_nvidia, result.error
        assert bool(oracle.wrapper_calls(wrapper)) == has_nvidia


def test_daemon_cleans_up_after_a_crash(
    containerd_line: str, tmp_short: Path, tmp_path: Path
) -> None:
    wrapper = oracle.nvidia_wrapper(tmp_path / "nv")
    cfg = runc_and_nvidia(containerd_line, tmp_path, wrapper)
    with oracle.Daemon(containerd_line, cfg, tmp_short / "d") as daemon:
        daemon.require_started()
        kept = oracle.run_sandbox(daemon, "nvidia", keep=True)
        assert kept.ok, kept.error
        running = leftovers(daemon)
        assert running["shims"] and running["mounts"] and running["cgroups"], running
        tasks = daemon.rundir / "state/io.containerd.runtime.v2.task/k8s.io"
        shim_sockets = [
            Path(re.sub(r".*unix://([^\"]+).*", r"\1", f.read_text().strip()))
            for f in [*tasks.glob("*/address"), *tasks.glob("*/bootstrap.json")]
        ]
        assert shim_sockets and all(p.is_socket() for p in shim_sockets), shim_sockets
        assert daemon.proc is not None
        os.kill(daemon.proc.pid, signal.SIGKILL)  # containerd dies, the pod lives on
        daemon.proc.wait()
    assert leftovers(daemon) == CLEAN
    assert not any(p.exists() for p in shim_sockets)
    assert not (Path("/run/containerd/runc/k8s.io") / (kept.sandbox_id or "-")).exists()


_KILLED_RUN = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from support import oracle
sys.path.insert(0, sys.argv[2])
from test_oracle import runc_and_nvidia
tmp = Path(sys.argv[3])
cfg = runc_and_nvidia(sys.argv[4], tmp, oracle.nvidia_wrapper(tmp / "nv"))
daemon = oracle.Daemon(sys.argv[4], cfg, tmp / "d")
daemon.start()
daemon.require_started()
kept = oracle.run_sandbox(daemon, "nvidia", keep=True)
assert kept.ok, kept.error
print(daemon.cgroup_parent, kept.sandbox_id, flush=True)
os.kill(daemon.proc.pid, signal.SIGKILL)  # killed mid-stop: no runc delete, no rmdir
daemon.proc.wait()
oracle._kill_all(oracle._shims_and_descendants(str(daemon.socket)))
os._exit(0)
"""


def test_a_killed_runs_leftovers_are_swept_before_the_next_daemon(
    containerd_line: str, tmp_short: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed mid-test left runc state and cgroups; the next run must not inherit
    them (every later daemon's cleanup check failed on such a host)."""
    tests = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(tests), str(tests / "real"),
         str(tmp_short), containerd_line],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    cgroup_parent, sandbox_id = done.stdout.split()
    state = Path("/run/containerd/runc/k8s.io") / sandbox_id
    left = [r / cgroup_parent.strip("/") for r in oracle._cgroup_roots()]
    # a name from before the pid prefix, as an older harness left it
    legacy = [r / oracle.CGROUP_PARENT.strip("/") / "d" / "stale" for r in oracle._cgroup_roots()]
    for path in legacy:
        path.mkdir(parents=True, exist_ok=True)
    assert state.exists() and all(p.is_dir() for p in left)

    monkeypatch.setattr(oracle, "_SWEPT", False)
    cfg = runc_and_nvidia(containerd_line, tmp_path, oracle.nvidia_wrapper(tmp_path / "nv"))
    with oracle.Daemon(containerd_line, cfg, tmp_path / "d") as daemon:
        daemon.require_started()
        assert oracle.run_sandbox(daemon, "nvidia").ok
    assert leftovers(daemon) == CLEAN
    assert not state.exists()
    assert not any(p.exists() for p in left + legacy), [p for p in left + legacy if p.exists()]


def test_daemon_start_is_fast_and_logged(
    containerd_line: str, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    daemon = start_daemon(containerd_line, write(tmp_path / "c.toml", "version = 2\n"))
    daemon.require_started()
    assert time.monotonic() - t0 < 5
    assert daemon.start_seconds is not None and daemon.start_seconds < 5
    # The gRPC socket answers a moment before containerd logs that it booted.
    deadline = time.monotonic() + 5
    while "containerd successfully booted" not in daemon.log_text():
        assert time.monotonic() < deadline, daemon.log_text()
        time.sleep(0.02)
    assert str(daemon.rundir) in daemon.log_text()  # root/state really moved
