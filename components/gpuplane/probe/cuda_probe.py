#!/usr/bin/env python3
"""gpuplane post-deploy CUDA probe: prove that a container can really compute on its GPUs.

Why this exists
---------------
A node can advertise ``nvidia.com/gpu`` and still be useless: the container runtime may not
inject the driver library, the device nodes may be missing, the driver and the library may
disagree, a sharing layer (HAMi, MPS) may not apply its limits, or the GPU may return garbage.
Listing devices (``nvidia-smi``) proves none of the compute path.  This probe talks to the
NVIDIA driver library that the container runtime injects (``libcuda.so.1``) through the CUDA
Driver API with :mod:`ctypes`, enumerates the visible devices, JIT-compiles a vector-add kernel
from PTX embedded below, runs it on every selected device and checks every element on the host.

It is a single file that needs only the Python standard library (3.8 or newer), so gpuplane can
ship it in a ConfigMap and run it in a plain ``python`` image on a GPU node, with no CUDA
toolkit, no compiler and no pip install.

Output contract
---------------
* stdout: exactly one line holding the JSON report (keys below), then, unless ``--json-only``
  is given, a final line ``Test PASSED`` or ``Test FAILED``.  With ``--json-only`` stdout is
  the JSON line alone and the verdict line goes to stderr instead.  A report is printed in
  every case, including a missing driver and a usage error.
* stderr: human-readable summary and failure messages (no line starts with ``{``).

Top-level JSON keys: ``probe``, ``schema``, ``ok``, ``status`` (``passed``, ``failed``,
``no_driver``, ``no_device``, ``usage_error``), ``exit_code``, ``error`` (first failure
message or null), ``failures`` (list of ``{"kind", "message"}``), ``library``,
``driver_version`` (e.g. ``"12.4"``), ``driver_version_raw`` (e.g. ``12040``),
``device_count``, ``selected_devices``, ``elements``, ``require_count``, ``max_memory_mib``,
``ptx`` (``{"version", "target", "entry"}``), ``environment`` (``NVIDIA_VISIBLE_DEVICES``,
``CUDA_VISIBLE_DEVICES``, ``CUDA_MPS_PIPE_DIRECTORY``: set when the device plugin shares the
GPU with MPS), ``host``, ``elapsed_ms``, ``devices``.

Per device: ``index``, ``ok``, ``name``, ``uuid`` (``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``
as nvidia-smi prints it; ``MIG-...`` when the device is a MIG instance), ``mig``, ``parent_uuid``
(MIG only),
``pci_bus_id``, ``compute_capability`` (``"9.0"``), ``multiprocessor_count``,
``memory_total_mib`` / ``memory_total_bytes`` (cuDeviceTotalMem_v2), ``memory_free_mib`` /
``memory_free_bytes`` and ``memory_info_total_mib`` / ``memory_info_total_bytes``
(cuMemGetInfo_v2 inside the device's primary context), ``kernel`` (``ok``, ``elements``,
``grid``, ``block``, ``kernel_ms``, ``mismatches``, ``first_bad_index``, ``expected``,
``got``, ``got_bits``, ``message``; null when the kernel never ran), ``elapsed_ms``, ``errors``.

Exit codes
----------
0  every selected device ran the kernel and every element was right; all requirements met.
1  a GPU is there but something is wrong: a CUDA call failed (the message names the call and
   the CUDA error name from cuGetErrorName, e.g. ``cuModuleLoadDataEx failed:
   CUDA_ERROR_INVALID_PTX (218)``), the kernel produced a wrong element (the message names
   the first bad index), fewer devices than ``--require-count``, a device reporting more
   memory than ``--max-memory-mib`` (the memory limit of a sharing layer is not enforced), a
   ``--devices`` index that is not visible, or the library lacks a needed entry point.
2  no GPU in this container at all: ``libcuda.so.1`` cannot be loaded (the runtime did not
   inject the driver, or only the toolkit's stub library is present), or the driver sees no
   device (cuInit gives CUDA_ERROR_NO_DEVICE or cuDeviceGetCount gives 0).
3  usage error (bad command-line arguments).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import operator
import os
import platform
import re
import sys
import time
from array import array
from dataclasses import dataclass

PROBE_NAME = "gpuplane-cuda-probe"
SCHEMA_VERSION = 1
DEFAULT_LIBRARY = "libcuda.so.1"
DEFAULT_ELEMENTS = 1 << 20
MAX_ELEMENTS = (1 << 32) - 1  # the kernel takes the element count as a 32-bit unsigned
MIB = 1 << 20

KERNEL_NAME = "gpuplane_vector_add"
# PTX ISA 6.0 came with CUDA 9.0 (driver 384), so any driver of the last several years
# accepts it; .target sm_50 lets the driver JIT-compile it for every GPU from Maxwell to
# Hopper/Blackwell (PTX for sm_XY compiles for any device sm_MN with MN >= XY).
PTX_VERSION = "6.0"
PTX_TARGET = "sm_50"
BLOCK_SIZE = 256

# Inputs: a[i] = i mod P, b[i] = 2 * (i mod P) + 1, so c[i] = 3 * (i mod P) + 1.  Every value
# is an integer below 2**24 (exact in float32), neighbouring sums differ by 3, a sum is never
# 0, and a-b, a*b, a+a, b+b or a shifted index all give different numbers.
VALUE_PERIOD = 1 << 22
# The output buffer is filled with this NaN pattern before the launch, so an element the
# kernel never wrote cannot pass by holding a stale right answer.
SENTINEL_BITS = 0x7FBADBAD

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NO_GPU = 2
EXIT_USAGE = 3

# failure kinds -> exit codes (kinds not listed give EXIT_FAILED)
_KIND_EXIT = {"no_driver": EXIT_NO_GPU, "no_device": EXIT_NO_GPU, "usage": EXIT_USAGE}

# CUDA Driver API constants (values from cuda.h)
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_STUB_LIBRARY = 34
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
JIT_LOG_SIZE = 8192

# Used only when the library cannot name an error itself (cuGetErrorName missing or failing).
_FALLBACK_ERROR_NAMES = {
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    200: "CUDA_ERROR_INVALID_IMAGE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    218: "CUDA_ERROR_INVALID_PTX",
    221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    500: "CUDA_ERROR_NOT_FOUND",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    719: "CUDA_ERROR_LAUNCH_FAILED",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# What a failing code usually means on a Kubernetes GPU node.
_ERROR_HINTS = {
    2: "the device, or the memory limit a sharing layer (HAMi, MPS) puts on this container, "
    "has too little free memory for --elements",
    35: "the libcuda in this container is older than the CUDA version it needs",
    46: "the device is busy or in an exclusive compute mode",
    218: "the driver's JIT compiler rejected the embedded PTX",
    221: "the driver's PTX JIT compiler library (libnvidia-ptxjitcompiler) was not injected",
    222: "the driver is too old for the embedded PTX ISA version",
    803: "the libcuda in the container does not match the loaded kernel module "
    "(a CUDA compat package in the image, or a driver upgraded without a reboot)",
    804: "the CUDA forward-compatibility library in the image does not support this GPU",
    999: "often the nvidia-uvm kernel module is not loaded or /dev/nvidia-uvm is missing",
}


# --------------------------------------------------------------------------- pure helpers


def build_vector_add_ptx(
    kernel_name: str = KERNEL_NAME, version: str = PTX_VERSION, target: str = PTX_TARGET
) -> str:
    """PTX text for ``c[i] = a[i] + b[i]`` over float32, with ``i < n`` checked.

    Parameters, in order: ``a``, ``b``, ``c`` (64-bit global pointers) and ``n`` (u32).
    One thread per element: ``i = ctaid.x * ntid.x + tid.x``.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", kernel_name):
        raise ValueError(f"not a PTX identifier: {kernel_name!r}")
    if not re.fullmatch(r"\d+\.\d+", version):
        raise ValueError(f"not a PTX ISA version: {version!r}")
    if not re.fullmatch(r"sm_\d+[a-z]?", target):
        raise ValueError(f"not a PTX target: {target!r}")
    p = kernel_name + "_"
    return "\n".join(
        [
            "// gpuplane CUDA probe: c[i] = a[i] + b[i] for i < n",
            f".version {version}",
            f".target {target}",
            ".address_size 64",
            "",
            f".visible .entry {kernel_name}(",
            f"\t.param .u64 {p}a,",
            f"\t.param .u64 {p}b,",
            f"\t.param .u64 {p}c,",
            f"\t.param .u32 {p}n",
            ")",
            "{",
            "\t.reg .pred %out_of_range;",
            "\t.reg .b32 %idx, %n, %block, %width, %thread;",
            "\t.reg .b64 %pa, %pb, %pc, %offset;",
            "\t.reg .f32 %x, %y, %sum;",
            "",
            f"\tld.param.u64 %pa, [{p}a];",
            f"\tld.param.u64 %pb, [{p}b];",
            f"\tld.param.u64 %pc, [{p}c];",
            f"\tld.param.u32 %n, [{p}n];",
            "\tmov.u32 %block, %ctaid.x;",
            "\tmov.u32 %width, %ntid.x;",
            "\tmov.u32 %thread, %tid.x;",
            "\tmad.lo.u32 %idx, %block, %width, %thread;",
            "\tsetp.ge.u32 %out_of_range, %idx, %n;",
            "\t@%out_of_range bra DONE;",
            "\tcvta.to.global.u64 %pa, %pa;",
            "\tcvta.to.global.u64 %pb, %pb;",
            "\tcvta.to.global.u64 %pc, %pc;",
            "\tmul.wide.u32 %offset, %idx, 4;",
            "\tadd.s64 %pa, %pa, %offset;",
            "\tadd.s64 %pb, %pb, %offset;",
            "\tadd.s64 %pc, %pc, %offset;",
            "\tld.global.f32 %x, [%pa];",
            "\tld.global.f32 %y, [%pb];",
            "\tadd.rn.f32 %sum, %x, %y;",
            "\tst.global.f32 [%pc], %sum;",
            "DONE:",
            "\tret;",
            "}",
            "",
        ]
    )


def launch_config(elements: int, block: int = BLOCK_SIZE) -> tuple[int, int]:
    """(grid, block) for a 1-D launch that covers ``elements`` threads."""
    if elements < 1 or block < 1:
        raise ValueError("elements and block must be positive")
    return (elements + block - 1) // block, block


def make_inputs(elements: int) -> tuple[array, array]:
    """The two float32 input vectors (see VALUE_PERIOD)."""
    a = array("f", (float(i % VALUE_PERIOD) for i in range(elements)))
    b = array("f", (2.0 * (i % VALUE_PERIOD) + 1.0 for i in range(elements)))
    return a, b


def expected_sum(a: array, b: array) -> array:
    """Element-wise float32 sum computed on the host (exact for float32 a+b)."""
    return array("f", map(operator.add, a, b))


def float_bits(value: float) -> int:
    return int.from_bytes(array("f", [value]).tobytes(), sys.byteorder)


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass
class Verification:
    elements: int
    mismatches: int = 0
    first_bad_index: int | None = None
    expected: float | None = None
    got: float | None = None
    got_bits: str | None = None

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def message(self) -> str:
        if self.ok:
            return f"all {self.elements} elements correct"
        got = self.got if self.got is not None else "NaN/inf"
        return (
            f"wrong result: {self.mismatches} of {self.elements} elements differ; first bad "
            f"index {self.first_bad_index}: expected {self.expected}, got {got} "
            f"(bits {self.got_bits})"
        )


def verify_sum(a: array, b: array, c: array) -> Verification:
    """Compare every element of ``c`` bit-for-bit with ``a + b``."""
    n = len(a)
    if len(b) != n or len(c) != n:
        raise ValueError(f"length mismatch: a={n} b={len(b)} c={len(c)}")
    expected = expected_sum(a, b)
    if expected.tobytes() == c.tobytes():
        return Verification(elements=n)
    want = array("I")
    want.frombytes(expected.tobytes())
    have = array("I")
    have.frombytes(c.tobytes())
    bad = [i for i in range(n) if want[i] != have[i]]  # no zip(strict=): runs on 3.8
    first = bad[0]
    return Verification(
        elements=n,
        mismatches=len(bad),
        first_bad_index=first,
        expected=expected[first],
        got=_json_float(c[first]),
        got_bits=f"0x{have[first]:08x}",
    )


def format_uuid(raw: bytes, prefix: str = "GPU-") -> str:
    """16 UUID bytes as nvidia-smi prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    raw = bytes(raw)
    if len(raw) != 16:
        raise ValueError(f"a UUID has 16 bytes, got {len(raw)}")
    h = raw.hex()
    return f"{prefix}{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def format_driver_version(raw: int | None) -> str | None:
    """cuDriverGetVersion's integer (12040) as ``"12.4"``."""
    if raw is None or raw <= 0:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def bytes_to_mib(n: int) -> int:
    return n // MIB


def exceeds_mib(n_bytes: int, limit_mib: int) -> bool:
    return n_bytes > limit_mib * MIB


def parse_device_selection(text: str) -> list[int] | None:
    """``all`` -> None; ``"0,1"`` -> [0, 1] (duplicates dropped, order kept)."""
    text = text.strip()
    if text.lower() == "all":
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--devices takes 'all' or comma-separated indices, not {text!r}")
        if int(part) not in out:
            out.append(int(part))
    return out


@dataclass
class Failure:
    kind: str
    message: str

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


class ProbeAbort(Exception):
    """A failure after which there is nothing more to probe."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.failure = Failure(kind, message)


def select_devices(selection: list[int] | None, count: int) -> list[int]:
    if selection is None:
        return list(range(count))
    missing = [i for i in selection if i >= count]
    if missing:
        raise ProbeAbort(
            "device_selection",
            f"--devices asks for {missing} but only {count} device(s) are visible "
            f"(indices 0..{count - 1})",
        )
    return selection


def exit_code_for(failures: list[Failure]) -> int:
    codes = {_KIND_EXIT.get(f.kind, EXIT_FAILED) for f in failures}
    for code in (EXIT_USAGE, EXIT_NO_GPU, EXIT_FAILED):
        if code in codes:
            return code
    return EXIT_OK


def no_driver_message(library: str, detail: str = "") -> str:
    msg = (
        f"{library} not found: the NVIDIA driver library was not injected into this "
        "container; is the pod using the nvidia runtime (runtimeClassName: nvidia, or nvidia "
        "as containerd's default runtime) and does it request a GPU (an nvidia.com/gpu limit, "
        "or NVIDIA_VISIBLE_DEVICES set to a device)?"
    )
    return f"{msg} (dlopen: {detail})" if detail else msg


def no_device_message(source: str) -> str:
    visible = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    shown = "unset" if visible is None else repr(visible)
    return (
        f"no CUDA device: {source}; the driver library is present but this container was "
        "given no GPU: check the pod's GPU request (nvidia.com/gpu limit or device claim) "
        f"and NVIDIA_VISIBLE_DEVICES (here {shown}; 'none', 'void' or empty means no device), "
        "and CUDA_VISIBLE_DEVICES"
    )


def build_report(
    *,
    library: str,
    elements: int,
    failures: list[Failure],
    devices: list[dict],
    driver_version_raw: int | None = None,
    device_count: int | None = None,
    selected: list[int] | None = None,
    require_count: int | None = None,
    max_memory_mib: int | None = None,
    elapsed_ms: float | None = None,
) -> dict:
    code = exit_code_for(failures)
    kinds = {f.kind for f in failures}
    if code == EXIT_OK:
        status = "passed"
    elif code == EXIT_USAGE:
        status = "usage_error"
    elif code == EXIT_NO_GPU:
        status = "no_driver" if "no_driver" in kinds else "no_device"
    else:
        status = "failed"
    return {
        "probe": PROBE_NAME,
        "schema": SCHEMA_VERSION,
        "ok": code == EXIT_OK,
        "status": status,
        "exit_code": code,
        "error": failures[0].message if failures else None,
        "failures": [f.as_dict() for f in failures],
        "library": library,
        "driver_version": format_driver_version(driver_version_raw),
        "driver_version_raw": driver_version_raw,
        "device_count": device_count,
        "selected_devices": selected,
        "elements": elements,
        "require_count": require_count,
        "max_memory_mib": max_memory_mib,
        "ptx": {"version": PTX_VERSION, "target": PTX_TARGET, "entry": KERNEL_NAME},
        "environment": {
            k: os.environ.get(k)
            for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY")
        },
        "host": platform.node(),
        "elapsed_ms": elapsed_ms,
        "devices": devices,
    }


def summary_lines(report: dict) -> list[str]:
    """Human-readable lines for stderr."""
    count = report["device_count"]
    selected = report["selected_devices"]
    lines = [
        f"cuda-probe: library {report['library']}, driver {report['driver_version'] or '?'}, "
        f"{'?' if count is None else count} device(s) visible, probing "
        f"{'none' if selected is None else ','.join(map(str, selected))}"
    ]
    for d in report["devices"]:
        k = d.get("kernel") or {}
        kernel = (
            f"vector add of {k['elements']} elements "
            f"{'OK' if k['ok'] else 'WRONG'} in {k['kernel_ms']} ms"
            if k
            else "kernel not run"
        )
        lines.append(
            f"cuda-probe: device {d['index']} {d.get('name')} {d.get('uuid')} "
            f"cc {d.get('compute_capability')}, {d.get('memory_total_mib')} MiB total / "
            f"{d.get('memory_free_mib')} MiB free: {kernel}"
        )
    lines.extend(f"cuda-probe: FAIL [{f['kind']}] {f['message']}" for f in report["failures"])
    return lines


def render(report: dict, json_only: bool) -> tuple[str, str]:
    """(stdout text, stderr text) for a report; see the output contract above."""
    verdict = "Test PASSED" if report["ok"] else "Test FAILED"
    out = json.dumps(report, allow_nan=False) + "\n"
    err = "".join(line + "\n" for line in summary_lines(report))
    if json_only:
        err += verdict + "\n"
    else:
        out += verdict + "\n"
    return out, err


# --------------------------------------------------------------------------- ctypes layer

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
_c_void_p_p = ctypes.POINTER(ctypes.c_void_p)
_c_u64_p = ctypes.POINTER(ctypes.c_uint64)
_c_char_p_p = ctypes.POINTER(ctypes.c_char_p)

# argument types; every entry point returns CUresult (int).  Handles are void*,
# CUdeviceptr is a 64-bit unsigned, CUdevice an int.
_PROTOTYPES = {
    "cuInit": (ctypes.c_uint,),
    "cuDriverGetVersion": (_c_int_p,),
    "cuDeviceGetCount": (_c_int_p,),
    "cuDeviceGet": (_c_int_p, ctypes.c_int),
    "cuDeviceGetName": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceGetUuid_v2": (ctypes.c_void_p, ctypes.c_int),
    "cuDeviceGetUuid": (ctypes.c_void_p, ctypes.c_int),
    "cuDeviceGetPCIBusId": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceTotalMem_v2": (_c_size_t_p, ctypes.c_int),
    "cuDeviceGetAttribute": (_c_int_p, ctypes.c_int, ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (_c_void_p_p, ctypes.c_int),
    "cuDevicePrimaryCtxRelease_v2": (ctypes.c_int,),
    "cuDevicePrimaryCtxRelease": (ctypes.c_int,),
    "cuCtxSetCurrent": (ctypes.c_void_p,),
    "cuCtxSynchronize": (),
    "cuMemGetInfo_v2": (_c_size_t_p, _c_size_t_p),
    "cuModuleLoadDataEx": (_c_void_p_p, ctypes.c_char_p, ctypes.c_uint, _c_int_p, _c_void_p_p),
    "cuModuleGetFunction": (_c_void_p_p, ctypes.c_void_p, ctypes.c_char_p),
    "cuModuleUnload": (ctypes.c_void_p,),
    "cuMemAlloc_v2": (_c_u64_p, ctypes.c_size_t),
    "cuMemFree_v2": (ctypes.c_uint64,),
    "cuMemsetD32_v2": (ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t),
    "cuMemcpyHtoD_v2": (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t),
    "cuMemcpyDtoH_v2": (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t),
    "cuLaunchKernel": (
        ctypes.c_void_p,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        _c_void_p_p,
        _c_void_p_p,
    ),
    "cuGetErrorName": (ctypes.c_int, _c_char_p_p),
    "cuGetErrorString": (ctypes.c_int, _c_char_p_p),
}


class CudaError(Exception):
    def __init__(self, call: str, code: int, name: str, description: str = ""):
        self.call, self.code, self.name = call, code, name
        self.description = description
        self.details: list[str] = []
        super().__init__(call)

    def __str__(self) -> str:
        text = f"{self.call} failed: {self.name} ({self.code})"
        if self.description:
            text += f": {self.description}"
        hint = _ERROR_HINTS.get(self.code)
        if hint:
            text += f" [{hint}]"
        return "; ".join([text, *self.details])


class Driver:
    """Thin wrapper over the driver library: typed entry points, CUresult -> CudaError."""

    def __init__(self, library: str):
        self.library = library
        self._lib = ctypes.CDLL(library)  # OSError when it cannot be loaded
        self._fns: dict = {}

    def has(self, name: str) -> bool:
        try:
            self._fn(name)
        except ProbeAbort:
            return False
        return True

    def _fn(self, name: str):
        fn = self._fns.get(name)
        if fn is None:
            try:
                fn = getattr(self._lib, name)
            except AttributeError:
                raise ProbeAbort(
                    "missing_symbol",
                    f"{self.library} does not export {name}: the driver is too old or this is "
                    "not the NVIDIA driver library",
                ) from None
            fn.restype = ctypes.c_int
            fn.argtypes = _PROTOTYPES[name]
            self._fns[name] = fn
        return fn

    def _error_text(self, getter: str, code: int) -> str | None:
        if not self.has(getter):
            return None
        text = ctypes.c_char_p()
        if self._fn(getter)(code, ctypes.byref(text)) != CUDA_SUCCESS or not text.value:
            return None
        return text.value.decode("utf-8", "replace")

    def error_name(self, code: int) -> str:
        return (
            self._error_text("cuGetErrorName", code)
            or _FALLBACK_ERROR_NAMES.get(code)
            or f"CUDA_ERROR_{code}"
        )

    def error(self, call: str, code: int) -> CudaError:
        description = self._error_text("cuGetErrorString", code) or ""
        return CudaError(call, code, self.error_name(code), description)

    def call(self, name: str, *args) -> None:
        code = self._fn(name)(*args)
        if code != CUDA_SUCCESS:
            raise self.error(name, code)

    def call_first(self, names: tuple[str, ...], *args) -> str:
        """Call the first of ``names`` the library exports; return the one used."""
        for name in names[:-1]:
            if self.has(name):
                self.call(name, *args)
                return name
        self.call(names[-1], *args)
        return names[-1]


class _Cleanups:
    """LIFO cleanup calls whose failures are collected instead of masking the first error."""

    def __init__(self, drv: Driver):
        self.drv = drv
        self.actions: list[tuple[tuple[str, ...], tuple]] = []
        self.errors: list[str] = []

    def push(self, names: tuple[str, ...], *args) -> None:
        self.actions.append((names, args))

    def run(self) -> None:
        while self.actions:
            names, args = self.actions.pop()
            try:
                self.drv.call_first(names, *args)
            except (CudaError, ProbeAbort) as exc:
                self.errors.append(f"cleanup: {exc}")


def _get_int(drv: Driver, call: str, *args) -> int:
    value = ctypes.c_int()
    drv.call(call, ctypes.byref(value), *args)
    return value.value


def _get_uuid(drv: Driver, call: str, dev: int) -> bytes:
    raw = (ctypes.c_ubyte * 16)()
    drv.call(call, raw, dev)
    return bytes(raw)


def _device_identity(drv: Driver, dev: int, info: dict) -> None:
    name = ctypes.create_string_buffer(256)
    drv.call("cuDeviceGetName", name, len(name), dev)
    info["name"] = name.value.decode("utf-8", "replace")

    # _v2 gives the MIG instance's UUID on a MIG device; the legacy call gives the parent
    # GPU's.  When both exist and differ, the device is a MIG instance.
    has_v2, has_v1 = drv.has("cuDeviceGetUuid_v2"), drv.has("cuDeviceGetUuid")
    if not (has_v1 or has_v2):
        raise ProbeAbort(
            "missing_symbol",
            f"{drv.library} exports neither cuDeviceGetUuid_v2 nor cuDeviceGetUuid",
        )
    legacy: bytes | None = None
    if has_v1:
        try:
            legacy = _get_uuid(drv, "cuDeviceGetUuid", dev)
        except CudaError:
            if not has_v2:
                raise
    # Without _v2 the legacy call succeeded (or raised above), so `legacy` is the UUID.
    raw = _get_uuid(drv, "cuDeviceGetUuid_v2", dev) if has_v2 or legacy is None else legacy
    parent = legacy if legacy is not None and legacy != raw else None
    info["mig"] = parent is not None
    info["uuid"] = format_uuid(raw, "MIG-" if parent is not None else "GPU-")
    if parent is not None:
        info["parent_uuid"] = format_uuid(parent)

    if drv.has("cuDeviceGetPCIBusId"):
        bus = ctypes.create_string_buffer(64)
        drv.call("cuDeviceGetPCIBusId", bus, len(bus), dev)
        info["pci_bus_id"] = bus.value.decode("ascii", "replace")

    major = _get_int(drv, "cuDeviceGetAttribute", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    minor = _get_int(drv, "cuDeviceGetAttribute", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    info["compute_capability"] = f"{major}.{minor}"
    info["multiprocessor_count"] = _get_int(
        drv, "cuDeviceGetAttribute", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev
    )

    total = ctypes.c_size_t()
    drv.call("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
    info["memory_total_bytes"] = total.value
    info["memory_total_mib"] = bytes_to_mib(total.value)


def _run_vector_add(drv: Driver, cleanups: _Cleanups, elements: int) -> dict:
    """JIT the PTX, run it once over ``elements`` floats, copy back and verify."""
    module = ctypes.c_void_p()
    error_log = ctypes.create_string_buffer(JIT_LOG_SIZE)
    # the size option's value is the integer itself, passed in a void* slot
    options = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
    values = (ctypes.c_void_p * 2)(ctypes.addressof(error_log), JIT_LOG_SIZE)
    ptx = build_vector_add_ptx().encode("ascii")
    try:
        drv.call("cuModuleLoadDataEx", ctypes.byref(module), ptx, len(options), options, values)
    except CudaError as exc:
        log = error_log.value.decode("utf-8", "replace").strip()
        exc.details.append(f"JIT error log: {log}" if log else "JIT error log is empty")
        raise
    cleanups.push(("cuModuleUnload",), module)
    function = ctypes.c_void_p()
    drv.call("cuModuleGetFunction", ctypes.byref(function), module, KERNEL_NAME.encode())

    a, b = make_inputs(elements)
    nbytes = elements * a.itemsize
    pointers = []
    for _ in range(3):
        ptr = ctypes.c_uint64()
        drv.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
        cleanups.push(("cuMemFree_v2",), ptr)
        pointers.append(ptr)
    d_a, d_b, d_c = pointers
    drv.call("cuMemsetD32_v2", d_c, SENTINEL_BITS, elements)
    drv.call("cuMemcpyHtoD_v2", d_a, a.buffer_info()[0], nbytes)
    drv.call("cuMemcpyHtoD_v2", d_b, b.buffer_info()[0], nbytes)

    count = ctypes.c_uint32(elements)
    params = (ctypes.c_void_p * 4)(*(ctypes.addressof(v) for v in (d_a, d_b, d_c, count)))
    grid, block = launch_config(elements)
    started = time.perf_counter()
    drv.call("cuLaunchKernel", function, grid, 1, 1, block, 1, 1, 0, None, params, None)
    drv.call("cuCtxSynchronize")
    kernel_ms = round((time.perf_counter() - started) * 1000.0, 3)

    c = array("f", [0.0]) * elements
    drv.call("cuMemcpyDtoH_v2", c.buffer_info()[0], d_c, nbytes)
    check = verify_sum(a, b, c)
    return {
        "ok": check.ok,
        "elements": elements,
        "grid": [grid, 1, 1],
        "block": [block, 1, 1],
        "kernel_ms": kernel_ms,
        "mismatches": check.mismatches,
        "first_bad_index": check.first_bad_index,
        "expected": check.expected,
        "got": check.got,
        "got_bits": check.got_bits,
        "message": check.message(),
    }


def probe_device(
    drv: Driver, ordinal: int, elements: int, max_memory_mib: int | None
) -> tuple[dict, list[Failure]]:
    """Identity, memory and a verified kernel run for one device."""
    started = time.perf_counter()
    info: dict = {"index": ordinal, "ok": False}
    failures: list[Failure] = []
    cleanups = _Cleanups(drv)
    try:
        dev = _get_int(drv, "cuDeviceGet", ordinal)
        _device_identity(drv, dev, info)
        ctx = ctypes.c_void_p()
        drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        cleanups.push(("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"), dev)
        drv.call("cuCtxSetCurrent", ctx)
        cleanups.push(("cuCtxSetCurrent",), None)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        drv.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        info["memory_free_bytes"] = free.value
        info["memory_free_mib"] = bytes_to_mib(free.value)
        info["memory_info_total_bytes"] = total.value
        info["memory_info_total_mib"] = bytes_to_mib(total.value)
        if max_memory_mib is not None:
            for key, call in (
                ("memory_total_bytes", "cuDeviceTotalMem_v2"),
                ("memory_info_total_bytes", "cuMemGetInfo_v2"),
            ):
                if exceeds_mib(info[key], max_memory_mib):
                    failures.append(
                        Failure(
                            "memory_limit",
                            f"device {ordinal}: {call} reports {bytes_to_mib(info[key])} MiB "
                            f"total, above --max-memory-mib {max_memory_mib}: the GPU memory "
                            "limit for this container is not enforced",
                        )
                    )
        info["kernel"] = _run_vector_add(drv, cleanups, elements)
        if not info["kernel"]["ok"]:
            failures.append(
                Failure("wrong_result", f"device {ordinal}: {info['kernel']['message']}")
            )
    except (CudaError, ProbeAbort) as exc:
        kind = exc.failure.kind if isinstance(exc, ProbeAbort) else "cuda"
        failures.append(Failure(kind, f"device {ordinal}: {exc}"))
    finally:
        cleanups.run()
    failures.extend(Failure("cuda", f"device {ordinal}: {e}") for e in cleanups.errors)
    info["kernel"] = info.pop("kernel", None)  # last, after the identity and memory keys
    info["errors"] = [f.message for f in failures]
    info["ok"] = not failures
    info["elapsed_ms"] = round((time.perf_counter() - started) * 1000.0, 3)
    return info, failures


def load_driver(library: str) -> Driver:
    try:
        return Driver(library)
    except OSError as exc:
        raise ProbeAbort("no_driver", no_driver_message(library, str(exc))) from None


def init_driver(drv: Driver) -> int:
    """cuInit + cuDeviceGetCount; a driver that sees no GPU raises a no_device abort."""
    try:
        drv.call("cuInit", 0)
    except CudaError as exc:
        if exc.code == CUDA_ERROR_NO_DEVICE:
            message = no_device_message(f"cuInit returned {exc.name}")
            raise ProbeAbort("no_device", message) from None
        if exc.code == CUDA_ERROR_STUB_LIBRARY:
            raise ProbeAbort(
                "no_driver",
                no_driver_message(drv.library)
                + f" ({drv.library} is the CUDA toolkit's stub library, cuInit: {exc.name})",
            ) from None
        raise
    count = _get_int(drv, "cuDeviceGetCount")
    if count < 1:
        raise ProbeAbort("no_device", no_device_message("cuDeviceGetCount returned 0"))
    return count


def run_probe(
    library: str = DEFAULT_LIBRARY,
    selection: list[int] | None = None,
    elements: int = DEFAULT_ELEMENTS,
    require_count: int | None = None,
    max_memory_mib: int | None = None,
) -> dict:
    """Run the whole probe and return the report (never raises for GPU problems)."""
    started = time.perf_counter()
    failures: list[Failure] = []
    devices: list[dict] = []
    version = count = selected = None
    try:
        drv = load_driver(library)
        if drv.has("cuDriverGetVersion"):  # allowed before cuInit
            version = _get_int(drv, "cuDriverGetVersion")
        count = init_driver(drv)
        if require_count is not None and count < require_count:
            failures.append(
                Failure(
                    "device_count",
                    f"{count} device(s) visible, --require-count asks for {require_count}",
                )
            )
        selected = select_devices(selection, count)
        for ordinal in selected:
            info, device_failures = probe_device(drv, ordinal, elements, max_memory_mib)
            devices.append(info)
            failures.extend(device_failures)
    except ProbeAbort as exc:
        failures.append(exc.failure)
    except CudaError as exc:
        failures.append(Failure("cuda", str(exc)))
    return build_report(
        library=library,
        elements=elements,
        failures=failures,
        devices=devices,
        driver_version_raw=version,
        device_count=count,
        selected=selected,
        require_count=require_count,
        max_memory_mib=max_memory_mib,
        elapsed_ms=round((time.perf_counter() - started) * 1000.0, 3),
    )


# --------------------------------------------------------------------------- command line


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit 2, which means "no GPU" here
        raise UsageError(message)


def _bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    return parse


def _device_list(text: str) -> list[int] | None:
    try:
        return parse_device_selection(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The probe's options. `prog`: the name usage shows; default `cuda_probe.py` as the
    pods run it, or `$GPUPLANE_PROBE_PROG` (`gpuplane probe` sets it for its child)."""
    parser = _Parser(
        prog=prog or os.environ.get("GPUPLANE_PROBE_PROG") or "cuda_probe.py",
        description="Run a verified vector-add kernel on the GPUs this container can see.",
        epilog="Exit codes: 0 pass, 1 GPU present but wrong, 2 no driver or no device, 3 usage.",
    )
    parser.add_argument(
        "--devices",
        type=_device_list,
        default=None,
        metavar="all|0,1",
        help="device indices to probe (default: all)",
    )
    parser.add_argument(
        "--elements",
        type=_bounded_int(1, MAX_ELEMENTS),
        default=DEFAULT_ELEMENTS,
        metavar="N",
        help=f"vector length (default: {DEFAULT_ELEMENTS})",
    )
    parser.add_argument(
        "--json-only",
        action="store_true",
        help="stdout is the JSON report alone; the Test PASSED/FAILED line goes to stderr",
    )
    parser.add_argument(
        "--require-count",
        type=_bounded_int(1, 1 << 16),
        default=None,
        metavar="N",
        help="fail unless at least N devices are visible",
    )
    parser.add_argument(
        "--max-memory-mib",
        type=_bounded_int(1, 1 << 40),
        default=None,
        metavar="M",
        help="fail if a device reports more than M MiB of total memory",
    )
    parser.add_argument(
        "--library",
        default=DEFAULT_LIBRARY,
        metavar="PATH",
        help=f"driver library to load (default: {DEFAULT_LIBRARY})",
    )
    return parser


def _emit(report: dict, json_only: bool) -> int:
    out, err = render(report, json_only)
    sys.stderr.write(err)
    sys.stderr.flush()
    sys.stdout.write(out)
    sys.stdout.flush()
    return report["exit_code"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        report = build_report(
            library=DEFAULT_LIBRARY,
            elements=DEFAULT_ELEMENTS,
            failures=[Failure("usage", f"usage error: {exc}")],
            devices=[],
        )
        return _emit(report, "--json-only" in argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    report = run_probe(
        library=args.library,
        selection=args.devices,
        elements=args.elements,
        require_count=args.require_count,
        max_memory_mib=args.max_memory_mib,
    )
    return _emit(report, args.json_only)


if __name__ == "__main__":
    sys.exit(main())
