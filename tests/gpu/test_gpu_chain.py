"""The whole node chain on real programs: planned files + the real toolkit's drop-in → real
containerd → the real nvidia-container-runtime (CDI mode) → the CUDA probe in a CRI pod.

Rehearsal (every machine, CI included; marker ``gpu`` and ``real``): a fake CDI spec, so
every probe exits 2 as predicted, the runtime is shown to be exec'd by containerd and to
apply the CDI edit, and the FM02 layout fails the way the rule says. Matrix: every
distribution profile on containerd 1.7, kubeadm on 1.6/2.0/2.1/2.2, kubeadm with CDI on
1.7 (tests/support/gpu_chain.py ``matrix("quick")``). GPU mode (``test_on_a_gpu_*``): the real
spec from ``nvidia-ctk cdi generate``, every profile on every line (and with CDI on every
line >= 1.7); the positive cases must exit 0. It skips, saying why, where no NVIDIA
driver is present. See docs/proofs.md, "The node chain on a GPU".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import gpu_chain, oracle

pytestmark = [pytest.mark.gpu, pytest.mark.real]

REPO = Path(__file__).resolve().parents[2]
# `python -m support.gpu_chain` finds the harness package under tests/.
CHAIN_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def fake_specs() -> Iterator[Path]:
    base = gpu_chain.short_tmp()
    try:
        gpu_chain.write_fake_spec(base / "cdi")
        yield base / "cdi"
    finally:
        oracle.unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)


def _require_chain(line: str) -> None:
    oracle.require_daemon_support(line)
    gpu_chain.oracle_tool("nvidia-container-runtime")
    gpu_chain.oracle_tool("nvidia-ctk-installer")
    if not gpu_chain.HOST_PYTHON.exists():
        oracle.unavailable(f"{gpu_chain.HOST_PYTHON} is missing (the probe image)")


def _report(results: list[gpu_chain.CaseResult]) -> str:
    lines = [r.json() for r in results]
    print("\n".join(lines))  # the JSON lines, one per case (pytest -s shows them)
    return "\n".join(lines)


QUICK = gpu_chain.matrix("quick")


@pytest.mark.parametrize(("distro", "line"), QUICK, ids=[f"{d}-{x}" for d, x in QUICK])
def test_rehearsal_every_probe_exits_as_predicted(distro: str, line: str, tmp_short: Path,
                                                  fake_specs: Path) -> None:
    _require_chain(line)
    layout = gpu_chain.planned_layout(distro, line, tmp_short)
    assert layout.errors == [], f"the plan itself has errors: {layout.errors}"
    results = gpu_chain.run_layout_cases(layout, "rehearsal", tmp_short, fake_specs)
    report = _report(results)
    by_case = {r.case: r for r in results}
    cdi = distro.endswith(gpu_chain.CDI_SUFFIX)
    assert sorted(by_case) == ["nvidia-no-device", "positive",
                               *(["positive-cdi-field"] if cdi else []), "runc"]
    assert all(r.passed for r in results), report
    # What `passed` means, spelled out: no libcuda anywhere → exit 2; the oracle runtime
    # ran exactly the nvidia containers, and applied the CDI device only when requested.
    assert {r.exit_code for r in results} == {2}, report
    assert by_case["positive"].runtime_exec and by_case["nvidia-no-device"].runtime_exec
    assert by_case["runc"].runtime_exec is False
    assert by_case["positive"].cdi_env == f"{gpu_chain.CDI_KIND}=all", report
    assert by_case["runc"].cdi_env == by_case["nvidia-no-device"].cdi_env == "", report
    if cdi:  # containerd itself applied the spec named in the CRI CDI_devices field
        assert by_case["positive-cdi-field"].cdi_env == f"{gpu_chain.CDI_KIND}=all", report


@pytest.mark.parametrize("line", gpu_chain.REJECTED_LINES)
def test_rehearsal_the_fm02_layout_fails_as_the_rule_predicts(line: str, tmp_short: Path,
                                                              fake_specs: Path) -> None:
    _require_chain(line)
    layout = gpu_chain.rejected_layout(line)
    assert layout.errors == ["FM02"], layout.errors
    result = gpu_chain.run_rejected_case(layout, "rehearsal", tmp_short, fake_specs)
    _report([result])
    assert result.passed, result.detail
    # The rule's explanation (a later drop-in replaced the CRI table, runc is gone) is
    # what containerd says, and no pod can run at all.
    assert "default_runtime_name" in result.detail and '"runc' in result.detail
    assert "UNIMPLEMENTED" in result.detail


def test_a_chain_that_bypasses_the_runtime_is_caught(tmp_short: Path, fake_specs: Path) -> None:
    """The harness can fail: with plain runc where the oracle runtime should be, the nvidia
    cases are reported as not going through the runtime and the CDI edit as missing."""
    _require_chain("1.7")
    layout = gpu_chain.planned_layout("kubeadm", "1.7", tmp_short)
    results = gpu_chain.run_layout_cases(layout, "rehearsal", tmp_short, fake_specs,
                                         runtime=oracle.RUNC)
    by_case = {r.case: r for r in results}
    assert not by_case["positive"].passed and not by_case["nvidia-no-device"].passed
    assert "not exec'd" in by_case["positive"].detail
    assert "the CDI edit" in by_case["positive"].detail
    assert by_case["runc"].passed  # runc's own case does not depend on the runtime


@pytest.mark.parametrize(("distro", "ports"), [("kubeadm", set()),
                                               ("rke2", {("stream_server_port", "0")})])
def test_the_sandbox_edits_are_only_systemd_cgroup_and_the_runtime_path(
        distro: str, ports: set[tuple[str, str]], tmp_path: Path) -> None:
    """...and a fixed stream port made a free one (RKE2: 10010, which a daemon running
    beside it would hold)."""
    gpu_chain.oracle_tool("nvidia-ctk-installer")
    layout = gpu_chain.planned_layout(distro, "2.1", tmp_path)
    runtime = Path("/opt/oracle/nvidia-container-runtime")
    adapted = gpu_chain.adapt_for_sandbox(layout.files, runtime)
    assert sorted(adapted) == sorted(layout.files)

    def flat(data: object, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
        out: dict[tuple[str, ...], object] = {}
        if isinstance(data, dict):
            for k, v in data.items():
                out |= flat(v, (*prefix, k))
        else:
            out[prefix] = data
        return out

    changed = set()
    for path, text in layout.files.items():
        before, after = flat(tomllib.loads(text)), flat(tomllib.loads(adapted[path]))
        assert before.keys() == after.keys(), path
        changed |= {(k[-1], after[k]) for k in before if before[k] != after[k]}
    assert changed == {("SystemdCgroup", False), ("BinaryName", str(runtime)), *ports}


def test_with_cdi_on_only_the_spec_dirs_are_added(tmp_path: Path) -> None:
    gpu_chain.oracle_tool("nvidia-ctk-installer")
    layout = gpu_chain.planned_layout("kubeadm+cdi", "2.1", tmp_path)
    runtime, spec_dir = Path("/opt/rt"), Path("/tmp/specs")
    plain = gpu_chain.adapt_for_sandbox(layout.files, runtime)
    adapted = gpu_chain.adapt_for_sandbox(layout.files, runtime, spec_dir)
    added = []
    for path in layout.files:
        a, b = tomllib.loads(plain[path]), tomllib.loads(adapted[path])
        if a != b:
            cri = b["plugins"]["io.containerd.grpc.v1.cri"]
            assert cri.pop("cdi_spec_dirs") == [str(spec_dir)] and cri["enable_cdi"] is True
            assert b == a, path
            added.append(path)
    assert added, "no file enables CDI: the +cdi plan did not turn it on"


def test_the_python_image_is_plain_and_runs_the_probe_standalone(tmp_path: Path) -> None:
    """No gpuplane, no pip packages in the image: the probe must work from the stdlib."""
    image = gpu_chain.build_python_image(tmp_path / "py.tar")
    with tarfile.open(image) as outer:
        names = outer.getnames()
    assert "index.json" in names and "oci-layout" in names
    root = tmp_path / "root"
    with tarfile.open(image) as outer:
        for member in outer.getmembers():
            if member.name.startswith("blobs/") and member.size > 1_000_000:
                with tarfile.open(fileobj=outer.extractfile(member)) as layer:
                    layer.extractall(root, filter="fully_trusted")
    python = os.path.realpath(gpu_chain.HOST_PYTHON)
    assert (root / python.lstrip("/")).is_file()
    # What the NVIDIA driver's libcuda.so.1 names beside libc (an H100 run failed with
    # "dlopen: libdl.so.2: cannot open shared object file" when the image lacked them).
    libdirs = [Path(d) for d in gpu_chain._LIB_DIRS if Path(d).is_dir()]
    for name in ("libdl.so.2", "libpthread.so.0", "librt.so.1", "libm.so.6"):
        assert any((root / d.relative_to("/") / name).exists() for d in libdirs), name
    assert not list(root.rglob("gpuplane")) and not list(root.rglob("site-packages/*"))
    # Run it in a chroot: only what the image carries is visible.
    probe = root / "probe" / "cuda_probe.py"
    probe.write_bytes(gpu_chain.PROBE.read_bytes())
    proc = subprocess.run(["chroot", str(root), "/usr/bin/python3", "/probe/cuda_probe.py",
                           "--json-only"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert '"status": "no_driver"' in proc.stdout


def test_modes_and_expectations() -> None:
    assert gpu_chain.resolve_mode("rehearsal") == "rehearsal"
    assert gpu_chain.resolve_mode("gpu") == "gpu"
    with pytest.raises(ValueError, match="mode must be"):
        gpu_chain.resolve_mode("cpu")
    assert gpu_chain.resolve_mode() == ("gpu" if gpu_chain.driver_present()[0] else "rehearsal")
    assert gpu_chain.expected_exit("positive", "gpu") == 0
    assert {gpu_chain.expected_exit(c, m) for c in ("runc", "nvidia-no-device")
            for m in ("gpu", "rehearsal")} == {2}
    assert gpu_chain.expected_exit("positive", "rehearsal") == 2
    full = gpu_chain.matrix("full")
    assert len(full) == len(gpu_chain.PROFILES) * (len(oracle.LINES) + len(gpu_chain.CDI_LINES))
    assert set(QUICK) <= set(full)
    assert {line for _, line in QUICK} == set(oracle.LINES)
    assert {d.removesuffix(gpu_chain.CDI_SUFFIX) for d, _ in QUICK} == set(gpu_chain.PROFILES)
    assert ("kubeadm" + gpu_chain.CDI_SUFFIX, "1.7") in QUICK


def test_the_bundle_is_self_contained_and_prints_one_json_line_per_case(tmp_path: Path) -> None:
    """Build the offline bundle (one containerd line, to keep CI short), unpack it away
    from the repository and run it with an empty environment (no venv, no cache, no
    PYTHONPATH) in a network namespace of its own (no network at all): everything it
    needs must be inside, and it prints one JSON line per case."""
    _require_chain("2.1")
    for tool in ("unshare", "ldconfig", "ldd"):
        if not shutil.which(tool):
            oracle.unavailable(f"{tool} is missing")
    out = tmp_path / "bundle.tar.gz"
    build = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu-chain-bundle.py"), str(out),
         "--lines", "2.1"], capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stderr
    unpacked = Path(gpu_chain.short_tmp())
    try:
        with tarfile.open(out) as tar:
            tar.extractall(unpacked, filter="fully_trusted")
        run = unpacked / "gpu-chain" / "run.sh"
        proc = subprocess.run(
            ["unshare", "--net", str(run), "--mode", "rehearsal", "--only", "k3s:2.1"],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path)},
            cwd="/", capture_output=True, text=True, timeout=300, check=False)
    finally:
        oracle.unmount_under(unpacked)
        shutil.rmtree(unpacked, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    print(proc.stdout)
    cases = rows[:-1]
    assert [r["case"] for r in cases] == ["positive", "runc", "nvidia-no-device"]
    assert all(r["passed"] and r["line"] == "2.1" and r["distro"] == "k3s" for r in cases)
    assert [r["exit_code"] for r in cases] == [2, 2, 2]
    assert cases[0]["runtime_exec"] and cases[0]["cdi_env"] == f"{gpu_chain.CDI_KIND}=all"
    summary = rows[-1]
    assert summary["summary"] and summary["failed"] == 0 and summary["cases"] == 3
    assert summary["foreign_libraries"] == [], "the bundle's Python used the host's libraries"


def test_the_bundle_builder_names_a_bad_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu-chain-bundle.py"), "--lines", "1.5"],
        capture_output=True, text=True, timeout=60, check=False, env=CHAIN_ENV)
    assert proc.returncode == 2 and "--lines: unknown containerd line(s) ['1.5']" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_arguments_are_a_clear_error_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "support.gpu_chain", "--only", "nope:9.9"],
        capture_output=True, text=True, timeout=60, check=False, env=CHAIN_ENV)
    assert proc.returncode == 2 and "--only wants PROFILE:LINE" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------
# GPU mode: the same chain with the real CDI spec; skipped (saying why) without a driver

FULL = gpu_chain.matrix("full")


@pytest.fixture(scope="module")
def real_specs() -> Iterator[Path]:
    present, why = gpu_chain.driver_present()
    if not present:
        pytest.skip(f"GPU mode needs an NVIDIA driver: {why}; the rehearsal tests above "
                    "ran the same chain with a fake CDI spec")
    base = gpu_chain.short_tmp()
    try:
        gpu_chain.write_real_spec(base / "cdi")
        yield base / "cdi"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(("distro", "line"), FULL, ids=[f"{d}-{x}" for d, x in FULL])
def test_on_a_gpu_the_positive_case_computes(distro: str, line: str, tmp_short: Path,
                                             real_specs: Path) -> None:
    _require_chain(line)
    layout = gpu_chain.planned_layout(distro, line, tmp_short)
    results = gpu_chain.run_layout_cases(layout, "gpu", tmp_short, real_specs)
    report = _report(results)
    assert all(r.passed for r in results), report
    assert [r.exit_code for r in results] == [0, 2, 2, 0][:len(results)], report


@pytest.mark.parametrize("line", gpu_chain.REJECTED_LINES)
def test_on_a_gpu_the_fm02_layout_fails_as_predicted(line: str, tmp_short: Path,
                                                     real_specs: Path) -> None:
    _require_chain(line)
    result = gpu_chain.run_rejected_case(gpu_chain.rejected_layout(line), "gpu", tmp_short,
                                         real_specs)
    _report([result])
    assert result.passed, result.detail
