"""Tests for the post-deploy CUDA probe (components/gpuplane/probe/cuda_probe.py).

There is no GPU here, so the probe's ctypes layer runs against fake driver libraries built
with gcc from the C source below: they implement the Driver API entry points the probe uses
on host memory ("device" pointers are malloc'd buffers, the "kernel" is a C loop that reads
the launch parameters exactly as the GPU would), and FAKE_CUDA_MODE switches in one failure
at a time.  PTX is checked by ptxas when the CUDA toolkit is installed.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from gpuplane import probe
from gpuplane.probe import cuda_probe as cp

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

FAKE_LIBCUDA_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static int initialized, allocs, modules, retained, launches;
static void *current;
static CUresult pending;

static int has(const char *flag) {
    const char *m = getenv("FAKE_CUDA_MODE");
    size_t n = strlen(flag);
    while (m && *m) {
        if (strncmp(m, flag, n) == 0 && (m[n] == ',' || m[n] == 0)) return 1;
        m = strchr(m, ',');
        if (m) m++;
    }
    return 0;
}
static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v ? atol(v) : dflt;
}
static int count(void) { return has("zerocount") ? 0 : (int)env_long("FAKE_CUDA_DEVICES", 1); }

__attribute__((destructor)) static void report_state(void) {
    if (getenv("FAKE_CUDA_REPORT_STATE"))
        fprintf(stderr, "FAKE_CUDA_STATE allocs=%d modules=%d retained=%d launches=%d\n",
            allocs, modules, retained, launches);
}

#ifndef NO_ERROR_NAME
CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 3: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 400: *s = "CUDA_ERROR_INVALID_HANDLE"; return 0;
    case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    }
    *s = NULL;
    return 1;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    switch (e) {
    case 218: *s = "a PTX JIT compilation failed"; return 0;
    case 700: *s = "an illegal memory access was encountered"; return 0;
    }
    *s = NULL;
    return 1;
}
#endif

CUresult cuInit(unsigned flags) {
    if (has("nodevice")) return 100;
    if (has("stub")) return 34;
    if (flags != 0) return 1;
    initialized = 1;
    return 0;
}
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int *c) {
    if (!initialized) return 3;
    *c = count();
    return 0;
}
CUresult cuDeviceGet(int *d, int ordinal) {
    if (!initialized) return 3;
    if (ordinal < 0 || ordinal >= count()) return 101;
    *d = ordinal;
    return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    snprintf(name, (size_t)len, "Fake GPU %d", dev);
    return 0;
}
static void fill_uuid(unsigned char *u, int dev, int mig) {
    for (int i = 0; i < 16; i++) u[i] = (unsigned char)(0x10 * dev + i + (mig ? 0x80 : 0));
}
CUresult cuDeviceGetUuid(unsigned char *u, int dev) { fill_uuid(u, dev, 0); return 0; }
#ifndef NO_UUID_V2
CUresult cuDeviceGetUuid_v2(unsigned char *u, int dev) { fill_uuid(u, dev, has("mig")); return 0; }
#endif
CUresult cuDeviceGetPCIBusId(char *bus, int len, int dev) {
    snprintf(bus, (size_t)len, "00000000:%02X:00.0", 0x17 + dev);
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    (void)dev;
    *bytes = (size_t)env_long("FAKE_CUDA_TOTAL_MIB", 81559) << 20;
    return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    switch (attr) {
    case 16: *v = 132; return 0;
    case 75: *v = 9; return 0;
    case 76: *v = 0; return 0;
    }
    return 1;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    *ctx = (void *)(uintptr_t)(0x1000 + dev);
    retained++;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; retained--; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (!current) return 201;
    long total = env_long("FAKE_CUDA_INFO_TOTAL_MIB", env_long("FAKE_CUDA_TOTAL_MIB", 81559));
    *total_bytes = (size_t)total << 20;
    *free_bytes = (size_t)(total - 100) << 20;
    return 0;
}
CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals) {
    char *log = NULL;
    size_t size = 0;
    unsigned size_slot = 0;
    if (!current) return 201;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == 5) log = (char *)vals[i];
        if (opts[i] == 6) { size = (size_t)(uintptr_t)vals[i]; size_slot = i; }
    }
    if (has("badptx") || !strstr((const char *)image, ".entry gpuplane_vector_add(")
        || !strstr((const char *)image, ".address_size 64")) {
        if (log && size) {
            snprintf(log, size, "ptxas application ptx input, line 9; error   : fake syntax error");
            vals[size_slot] = (void *)(uintptr_t)(strlen(log) + 1);
        }
        return 218;
    }
    *mod = (void *)0x2000;
    modules++;
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *mod, const char *name) {
    if (mod != (void *)0x2000) return 400;
    if (strcmp(name, "gpuplane_vector_add") != 0) return 500;
    *f = (void *)0x3000;
    return 0;
}
CUresult cuModuleUnload(void *mod) { (void)mod; modules--; return 0; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
    if (!current) return 201;
    if (has("oom")) return 2;
    *p = (uint64_t)(uintptr_t)malloc(n);
    allocs++;
    return 0;
}
CUresult cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); allocs--; return 0; }
CUresult cuMemsetD32_v2(uint64_t p, unsigned v, size_t n) {
    for (size_t i = 0; i < n; i++) ((uint32_t *)(uintptr_t)p)[i] = v;
    return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    if (has("corruptcopy")) ((float *)dst)[env_long("FAKE_CUDA_BAD_INDEX", 0)] += 1.0f;
    return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)stream;
    if (f != (void *)0x3000 || !params || extra) return 400;
    if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0) return 1;
    const float *a = (const float *)(uintptr_t) * (uint64_t *)params[0];
    const float *b = (const float *)(uintptr_t) * (uint64_t *)params[1];
    float *c = (float *)(uintptr_t) * (uint64_t *)params[2];
    uint32_t n = *(uint32_t *)params[3];
    uint64_t threads = (uint64_t)gx * bx;
    uint64_t last = has("skiplast") ? n - 1 : n;
    for (uint64_t i = 0; i < threads; i++)
        if (i < last) c[i] = a[i] + b[i];
    if (has("shifted"))
        for (uint64_t i = 0; i + 1 < n; i++) c[i] = a[i + 1] + b[i + 1];
    if (has("launchfail")) pending = 700;
    launches++;
    return 0;
}
CUresult cuCtxSynchronize(void) { return pending; }
"""

CLEAN_STATE = re.compile(r"FAKE_CUDA_STATE allocs=0 modules=0 retained=0 launches=\d+")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def fake_libs(tmp_path_factory) -> dict[str, Path]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required to build the fake libcuda used by the CUDA probe tests")
    root = tmp_path_factory.mktemp("fake-libcuda")
    source = root / "fake_libcuda.c"
    source.write_text(FAKE_LIBCUDA_C)
    libs = {}
    for variant, defines in {
        "full": [],
        "no_error_name": ["-DNO_ERROR_NAME"],
        "no_uuid_v2": ["-DNO_UUID_V2"],
    }.items():
        out = root / f"libcuda-{variant}.so.1"
        subprocess.run(
            [
                gcc,
                "-shared",
                "-fPIC",
                "-O1",
                "-std=c99",
                "-Wall",
                "-Werror",
                *defines,
                "-o",
                str(out),
                str(source),
            ],
            check=True,
        )
        libs[variant] = out
    return libs


class Run:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        lines = proc.stdout.splitlines()
        assert lines, f"no stdout; stderr: {proc.stderr}"
        self.report = json.loads(lines[0])
        self.lines = lines

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def run_probe(*args: str, lib: Path | str | None = None, **fake_env: str) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA_")}
    env["FAKE_CUDA_REPORT_STATE"] = "1"  # the fake prints its leak counters at exit
    env.update({f"FAKE_CUDA_{k.upper()}": str(v) for k, v in fake_env.items()})
    cmd = [sys.executable, str(probe.PROBE_PATH), *args]
    if lib is not None:
        cmd += ["--library", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    return Run(proc)


def libcuda_loadable() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


# --------------------------------------------------------------------------- no GPU / no driver


def test_default_library_missing_means_exit_2_not_found():
    run = run_probe("--elements", "4096")
    if libcuda_loadable():  # a real driver here: the probe must pass or find no device
        assert run.rc in (0, 2), run.text
        assert run.rc == 0 or run.report["status"] == "no_device", run.text
        return
    assert run.rc == 2, run.text
    assert run.report["status"] == "no_driver"
    assert run.report["ok"] is False
    assert run.lines[-1] == "Test FAILED"
    msg = run.report["error"]
    assert msg.startswith("libcuda.so.1 not found: the NVIDIA driver library was not injected")
    assert "runtimeClassName" in msg and "nvidia runtime" in msg
    assert "libcuda.so.1 not found" in run.stderr


def test_explicit_missing_library_exit_2(tmp_path):
    missing = tmp_path / "libcuda.so.1"
    run = run_probe(lib=missing)
    assert run.rc == 2
    assert run.report["status"] == "no_driver"
    assert f"{missing} not found" in run.report["error"]


def test_no_device_from_cuinit_exit_2(fake_libs):
    run = run_probe(lib=fake_libs["full"], mode="nodevice")
    assert run.rc == 2, run.text
    assert run.report["status"] == "no_device"
    msg = run.report["error"]
    assert "no CUDA device" in msg and "CUDA_ERROR_NO_DEVICE" in msg
    assert "NVIDIA_VISIBLE_DEVICES" in msg
    assert "not injected" not in msg  # clearly different from the missing-driver message
    assert run.report["driver_version"] == "12.4"  # still reported
    assert run.report["devices"] == []


def test_zero_devices_exit_2(fake_libs):
    run = run_probe(lib=fake_libs["full"], mode="zerocount")
    assert run.rc == 2
    assert run.report["status"] == "no_device"
    assert "cuDeviceGetCount returned 0" in run.report["error"]


def test_stub_library_counts_as_no_driver(fake_libs):
    run = run_probe(lib=fake_libs["full"], mode="stub")
    assert run.rc == 2
    assert run.report["status"] == "no_driver"
    assert "stub" in run.report["error"] and "CUDA_ERROR_STUB_LIBRARY" in run.report["error"]


# --------------------------------------------------------------------------- pass


def test_pass_on_two_devices(fake_libs):
    run = run_probe("--elements", "4099", lib=fake_libs["full"], devices=2)
    assert run.rc == 0, run.text
    assert run.lines[-1] == "Test PASSED" and len(run.lines) == 2
    r = run.report
    assert r["ok"] is True and r["status"] == "passed" and r["exit_code"] == 0
    assert r["error"] is None and r["failures"] == []
    assert r["driver_version"] == "12.4" and r["driver_version_raw"] == 12040
    assert r["device_count"] == 2 and r["selected_devices"] == [0, 1]
    assert r["ptx"] == {"version": "6.0", "target": "sm_50", "entry": "gpuplane_vector_add"}
    for index, d in enumerate(r["devices"]):
        assert d["index"] == index and d["ok"] is True and d["errors"] == []
        assert d["name"] == f"Fake GPU {index}"
        assert UUID_RE.match(d["uuid"]) and d["mig"] is False
        assert d["pci_bus_id"] == f"00000000:{0x17 + index:02X}:00.0"
        assert d["compute_capability"] == "9.0" and d["multiprocessor_count"] == 132
        assert d["memory_total_mib"] == 81559 == d["memory_info_total_mib"]
        assert d["memory_total_bytes"] == 81559 << 20
        assert d["memory_free_mib"] == 81459
        k = d["kernel"]
        assert k["ok"] is True and k["elements"] == 4099 and k["mismatches"] == 0
        assert k["grid"] == [17, 1, 1] and k["block"] == [256, 1, 1]
        assert k["first_bad_index"] is None and isinstance(k["kernel_ms"], float)
        assert isinstance(d["elapsed_ms"], float)
    assert r["devices"][0]["uuid"] != r["devices"][1]["uuid"]
    assert CLEAN_STATE.search(run.stderr), run.stderr  # everything freed and released
    assert "launches=2" in run.stderr


def test_default_element_count_passes(fake_libs):
    run = run_probe(lib=fake_libs["full"])
    assert run.rc == 0, run.text
    assert run.report["elements"] == 1 << 20
    assert run.report["devices"][0]["kernel"]["grid"] == [4096, 1, 1]


def test_json_only_keeps_stdout_pure(fake_libs):
    proc = run_probe("--json-only", "--elements", "300", lib=fake_libs["full"])
    assert proc.rc == 0
    assert proc.lines == [proc.stdout.strip()]  # a single JSON line
    assert json.loads(proc.stdout)["ok"] is True
    assert "Test PASSED" in proc.stderr.splitlines()
    assert "Test PASSED" not in proc.stdout


def test_device_selection(fake_libs):
    run = run_probe("--devices", "1", "--elements", "64", lib=fake_libs["full"], devices=3)
    assert run.rc == 0
    assert run.report["selected_devices"] == [1]
    assert [d["index"] for d in run.report["devices"]] == [1]


def test_missing_device_index_fails(fake_libs):
    run = run_probe("--devices", "0,5", "--elements", "64", lib=fake_libs["full"], devices=2)
    assert run.rc == 1
    assert run.report["failures"][0]["kind"] == "device_selection"
    assert "[5]" in run.report["error"] and "2 device(s)" in run.report["error"]


def test_require_count(fake_libs):
    ok = run_probe("--require-count", "2", "--elements", "64", lib=fake_libs["full"], devices=2)
    assert ok.rc == 0
    short = run_probe("--require-count", "3", "--elements", "64", lib=fake_libs["full"], devices=2)
    assert short.rc == 1
    assert short.report["failures"][0]["kind"] == "device_count"
    assert "--require-count asks for 3" in short.report["error"]
    assert all(d["ok"] for d in short.report["devices"])  # the devices themselves still ran


def test_max_memory_mib(fake_libs):
    lib = fake_libs["full"]
    over = run_probe("--max-memory-mib", "4096", "--elements", "64", lib=lib)
    assert over.rc == 1
    kinds = [f["kind"] for f in over.report["failures"]]
    assert kinds == ["memory_limit", "memory_limit"]  # cuDeviceTotalMem and cuMemGetInfo
    assert "81559 MiB" in over.report["error"] and "--max-memory-mib 4096" in over.report["error"]

    limited = run_probe("--max-memory-mib", "4096", "--elements", "64", lib=lib, total_mib=4096)
    assert limited.rc == 0, limited.text
    assert limited.report["devices"][0]["memory_total_mib"] == 4096

    # a sharing layer that hooks cuDeviceTotalMem but not cuMemGetInfo is caught too
    half = run_probe(
        "--max-memory-mib",
        "4096",
        "--elements",
        "64",
        lib=lib,
        total_mib=4096,
        info_total_mib=8192,
    )
    assert half.rc == 1
    assert len(half.report["failures"]) == 1
    assert "cuMemGetInfo_v2 reports 8192 MiB" in half.report["error"]


# --------------------------------------------------------------------------- CUDA errors


def test_invalid_ptx_exit_1_names_error_and_call(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["full"], mode="badptx")
    assert run.rc == 1, run.text
    assert run.report["status"] == "failed"
    msg = run.report["error"]
    assert "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)" in msg
    assert "a PTX JIT compilation failed" in msg  # cuGetErrorString
    assert "JIT error log: ptxas application ptx input, line 9; error   : fake syntax error" in msg
    assert run.report["devices"][0]["kernel"] is None
    assert run.report["devices"][0]["uuid"].startswith("GPU-")  # identity still reported
    assert run.lines[-1] == "Test FAILED"
    assert CLEAN_STATE.search(run.stderr), run.stderr  # context released after the failure


def test_error_name_fallback_without_cugeterrorname(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["no_error_name"], mode="badptx")
    assert run.rc == 1
    assert "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)" in run.report["error"]


def test_launch_error_at_synchronize(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["full"], mode="launchfail")
    assert run.rc == 1
    assert "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)" in run.report["error"]
    assert CLEAN_STATE.search(run.stderr), run.stderr


def test_out_of_memory_has_hint(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["full"], mode="oom")
    assert run.rc == 1
    assert "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)" in run.report["error"]
    assert "HAMi" in run.report["error"]
    assert CLEAN_STATE.search(run.stderr), run.stderr


def test_one_bad_device_does_not_hide_the_others(fake_libs):
    run = run_probe(
        "--devices", "0,1", "--elements", "64", lib=fake_libs["full"], devices=2, mode="badptx"
    )
    assert run.rc == 1
    assert [f["message"][:9] for f in run.report["failures"]] == ["device 0:", "device 1:"]


# --------------------------------------------------------------------------- wrong results


def test_corrupted_copy_names_first_bad_index(fake_libs):
    run = run_probe(
        "--elements", "20000", lib=fake_libs["full"], mode="corruptcopy", bad_index=12345
    )
    assert run.rc == 1, run.text
    k = run.report["devices"][0]["kernel"]
    assert k["ok"] is False and k["mismatches"] == 1 and k["first_bad_index"] == 12345
    assert k["expected"] == 3 * 12345 + 1 and k["got"] == 3 * 12345 + 2
    assert run.report["failures"][0]["kind"] == "wrong_result"
    assert "first bad index 12345" in run.report["error"]
    assert CLEAN_STATE.search(run.stderr)


def test_unwritten_last_element_is_caught(fake_libs):
    run = run_probe("--elements", "1000", lib=fake_libs["full"], mode="skiplast")
    assert run.rc == 1
    k = run.report["devices"][0]["kernel"]
    assert k["first_bad_index"] == 999 and k["mismatches"] == 1
    assert k["got"] is None and k["got_bits"] == "0x7fbadbad"  # the sentinel, never written


def test_shifted_index_is_caught(fake_libs):
    run = run_probe("--elements", "1000", lib=fake_libs["full"], mode="shifted")
    assert run.rc == 1
    k = run.report["devices"][0]["kernel"]
    assert k["first_bad_index"] == 0 and k["mismatches"] == 999


# --------------------------------------------------------------------------- UUID variants


def test_uuid_legacy_fallback(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["no_uuid_v2"])
    assert run.rc == 0, run.text
    assert run.report["devices"][0]["uuid"] == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_mig_uuid(fake_libs):
    run = run_probe("--elements", "64", lib=fake_libs["full"], mode="mig")
    assert run.rc == 0, run.text
    d = run.report["devices"][0]
    assert d["mig"] is True
    assert d["uuid"] == "MIG-80818283-8485-8687-8889-8a8b8c8d8e8f"
    assert d["parent_uuid"] == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    "args",
    [
        ["--elements", "0"],
        ["--elements", "lots"],
        ["--devices", "gpu0"],
        ["--bogus"],
        ["--require-count", "0"],
        ["--max-memory-mib", "-1"],
    ],
)
def test_usage_errors_exit_3(args):
    run = run_probe(*args)
    assert run.rc == 3, run.text
    assert run.report["status"] == "usage_error"
    assert run.report["error"].startswith("usage error:")


def test_help_exits_0():
    proc = subprocess.run(
        [sys.executable, str(probe.PROBE_PATH), "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    for option in (
        "--devices",
        "--elements",
        "--json-only",
        "--require-count",
        "--max-memory-mib",
        "--library",
    ):
        assert option in proc.stdout


# --------------------------------------------------------------------------- package API


def test_probe_path_and_source():
    assert probe.PROBE_PATH.name == "cuda_probe.py" and probe.PROBE_PATH.is_file()
    assert probe.probe_source() == probe.PROBE_PATH.read_text(encoding="utf-8")
    assert Path(cp.__file__).resolve() == probe.PROBE_PATH


_IMPORTS = """
import ast, json, sys
tree = ast.parse(sys.stdin.read(), feature_version=(3, 8))
out = []
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        out += [alias.name.split(".")[0] for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        out.append("." if node.level else node.module.split(".")[0])
print(json.dumps(out))
"""


def test_probe_is_standalone_stdlib_only():
    # Parsed in a fresh interpreter: CPython 3.11.7's AST conversion can raise a spurious
    # "recursion depth mismatch" SystemError late in a long test process.
    done = subprocess.run([sys.executable, "-c", _IMPORTS], input=probe.probe_source(),
                          capture_output=True, text=True, check=True)
    imported = set(json.loads(done.stdout))
    assert "." not in imported, "relative import in the standalone probe"
    assert imported - set(sys.stdlib_module_names) == set()
    assert "__main__" in probe.probe_source()


def test_docstring_states_contract():
    doc = cp.__doc__
    for needle in ("Exit codes", "Test PASSED", "--json-only", "libcuda.so.1", "stdout"):
        assert needle in doc


def test_main_subprocess(fake_libs, capfd):
    assert probe.main(["--elements", "64", "--library", str(fake_libs["full"])]) == 0
    out = capfd.readouterr().out.splitlines()
    assert json.loads(out[0])["ok"] is True and out[-1] == "Test PASSED"
    assert probe.main(["--library", "/nonexistent/libcuda.so.1"]) == 2


def test_main_in_process(fake_libs, capsys):
    code = probe.main(["--elements", "64", "--library", str(fake_libs["full"])], in_process=True)
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0])["status"] == "passed" and out[-1] == "Test PASSED"


# --------------------------------------------------------------------------- PTX


def test_ptx_text_is_well_formed():
    ptx = cp.build_vector_add_ptx()
    lines = [line.strip() for line in ptx.splitlines()]
    assert lines.index(".version 6.0") < lines.index(".target sm_50")
    assert ".address_size 64" in lines
    assert ".visible .entry gpuplane_vector_add(" in lines
    params = [line.rstrip(",") for line in lines if line.startswith(".param")]
    assert params == [
        ".param .u64 gpuplane_vector_add_a",
        ".param .u64 gpuplane_vector_add_b",
        ".param .u64 gpuplane_vector_add_c",
        ".param .u32 gpuplane_vector_add_n",
    ]
    body = ptx[ptx.index("{") :]
    assert body.count("{") == body.count("}") == 1
    # bounds check: i >= n branches past every memory access
    check = body.index("setp.ge.u32 %out_of_range, %idx, %n;")
    branch = body.index("@%out_of_range bra DONE;")
    assert check < branch < body.index("ld.global.f32") < body.index("st.global.f32")
    assert body.index("st.global.f32") < body.index("DONE:") < body.index("ret;")
    assert "mad.lo.u32 %idx, %block, %width, %thread;" in body
    assert "mul.wide.u32 %offset, %idx, 4;" in body
    assert "add.rn.f32 %sum, %x, %y;" in body


def test_ptx_builder_validates_inputs():
    assert ".entry other_kernel(" in cp.build_vector_add_ptx("other_kernel")
    assert ".target sm_90\n" in cp.build_vector_add_ptx(target="sm_90")
    for bad in ({"kernel_name": "1abc"}, {"version": "six"}, {"target": "compute_50"}):
        with pytest.raises(ValueError):
            cp.build_vector_add_ptx(**bad)


def _ptxas() -> str | None:
    return shutil.which("ptxas") or next(
        (p for p in ("/usr/local/cuda/bin/ptxas",) if os.access(p, os.X_OK)), None
    )


def _ptxas_sm_targets(ptxas: str) -> list[int]:
    help_text = subprocess.run([ptxas, "--help"], capture_output=True, text=True).stdout
    return sorted({int(m) for m in re.findall(r"'sm_(\d+)'", help_text)})


def _lowest_ptxas_target() -> str:
    ptxas = _ptxas()
    if ptxas is None:
        return "sm_50"
    claimed = int(cp.PTX_TARGET.split("_")[1])
    supported = [t for t in _ptxas_sm_targets(ptxas) if t >= claimed]
    return f"sm_{supported[0]}" if supported else cp.PTX_TARGET


@pytest.fixture(scope="module")
def ptxas() -> str:
    path = _ptxas()
    if path is None:
        pytest.skip("ptxas (CUDA toolkit) not installed: PTX not assembled, only text-checked")
    return path


# sm_90 is H100/H200; the other is the PTX's own .target (sm_50) or, when this ptxas no
# longer generates code that old, the lowest GPU it does (sm_75 for CUDA 13).
@pytest.mark.parametrize("gpu", sorted({"sm_90", _lowest_ptxas_target()}))
def test_ptx_assembles(ptxas, gpu, tmp_path):
    src = tmp_path / "probe.ptx"
    src.write_text(cp.build_vector_add_ptx())
    proc = subprocess.run(
        [ptxas, "--verbose", "--gpu-name", gpu, "-o", str(tmp_path / "probe.cubin"), str(src)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "gpuplane_vector_add" in proc.stdout + proc.stderr
    assert (tmp_path / "probe.cubin").stat().st_size > 0


def test_ptxas_rejects_broken_ptx(ptxas, tmp_path):
    """Control: the assembler check above would notice a broken kernel."""
    src = tmp_path / "broken.ptx"
    src.write_text(cp.build_vector_add_ptx().replace("add.rn.f32", "add.rn.f33"))
    proc = subprocess.run(
        [ptxas, "--gpu-name", "sm_90", "-o", os.devnull, str(src)], capture_output=True, text=True
    )
    assert proc.returncode != 0


# --------------------------------------------------------------------------- pure helpers


def test_format_uuid():
    raw = bytes(range(0xA0, 0xB0))
    assert cp.format_uuid(raw) == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    assert UUID_RE.match(cp.format_uuid(bytes(16)))
    assert cp.format_uuid(raw, "MIG-").startswith("MIG-a0a1a2a3-")
    with pytest.raises(ValueError):
        cp.format_uuid(bytes(15))


def test_launch_config_covers_every_element():
    assert cp.launch_config(1) == (1, 256)
    assert cp.launch_config(256) == (1, 256)
    assert cp.launch_config(257) == (2, 256)
    assert cp.launch_config(1 << 20) == (4096, 256)
    for n in (1, 255, 4099, (1 << 32) - 1):
        grid, block = cp.launch_config(n)
        assert grid * block >= n > (grid - 1) * block
    with pytest.raises(ValueError):
        cp.launch_config(0)


def test_inputs_make_errors_detectable():
    a, b = cp.make_inputs(5000)
    c = cp.expected_sum(a, b)
    assert list(c[:4]) == [1.0, 4.0, 7.0, 10.0]
    assert all(float(x).is_integer() and 0 < x < 2**24 for x in c)
    assert len(set(c)) == len(c)  # no two indices share a value, so a wrong index shows
    big_a, big_b = cp.make_inputs(cp.VALUE_PERIOD + 2)
    assert max(cp.expected_sum(big_a, big_b)) < 2**24  # still exact in float32


def test_verify_sum():
    a, b = cp.make_inputs(1000)
    good = cp.expected_sum(a, b)
    result = cp.verify_sum(a, b, good)
    assert result.ok and result.mismatches == 0 and result.first_bad_index is None
    assert result.message() == "all 1000 elements correct"

    bad = array("f", good)
    bad[700] += 1
    bad[900] = 0.0
    result = cp.verify_sum(a, b, bad)
    assert not result.ok and result.mismatches == 2 and result.first_bad_index == 700
    assert result.expected == 2101.0 and result.got == 2102.0
    assert "first bad index 700" in result.message()

    sentinel = array("f", good)
    sentinel[0:1] = array("f", array("I", [cp.SENTINEL_BITS]).tobytes())  # a NaN
    result = cp.verify_sum(a, b, sentinel)
    assert result.first_bad_index == 0 and result.got is None and result.got_bits == "0x7fbadbad"

    with pytest.raises(ValueError):
        cp.verify_sum(a, b, good[:-1])


def test_small_pure_helpers():
    assert cp.format_driver_version(12040) == "12.4"
    assert cp.format_driver_version(13000) == "13.0"
    assert cp.format_driver_version(11080) == "11.8"
    assert cp.format_driver_version(None) is None
    assert cp.parse_device_selection("all") is None
    assert cp.parse_device_selection(" 1, 1,0 ") == [1, 0]
    for bad in ("", "x", "0,-1", "0,,1"):
        with pytest.raises(ValueError):
            cp.parse_device_selection(bad)
    assert cp.bytes_to_mib(81559 << 20) == 81559
    assert not cp.exceeds_mib(4096 << 20, 4096) and cp.exceeds_mib((4096 << 20) + 1, 4096)


def test_exit_codes_and_render():
    F = cp.Failure
    assert cp.exit_code_for([]) == 0
    assert cp.exit_code_for([F("cuda", "x")]) == 1
    assert cp.exit_code_for([F("wrong_result", "x"), F("memory_limit", "y")]) == 1
    assert cp.exit_code_for([F("no_driver", "x")]) == 2
    assert cp.exit_code_for([F("no_device", "x")]) == 2
    assert cp.exit_code_for([F("usage", "x")]) == 3

    report = cp.build_report(library="libcuda.so.1", elements=8, failures=[], devices=[])
    out, err = cp.render(report, json_only=False)
    assert out.splitlines()[-1] == "Test PASSED" and json.loads(out.splitlines()[0])["ok"]
    assert "Test PASSED" not in err
    out, err = cp.render(report, json_only=True)
    assert json.loads(out)["ok"] is True and err.splitlines()[-1] == "Test PASSED"
    assert not any(line.startswith("{") for line in err.splitlines())

    failed = cp.build_report(library="x", elements=8, failures=[F("cuda", "boom")], devices=[])
    assert failed["status"] == "failed" and failed["error"] == "boom"
    assert cp.render(failed, json_only=False)[0].splitlines()[-1] == "Test FAILED"
