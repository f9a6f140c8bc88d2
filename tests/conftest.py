"""Shared fixtures, and the tiers: each test's markers come from its folder.

- ``tests/pure``: the code alone (mocks, recorded data): `make test-fast`.
- ``tests/real``: real programs built or installed from registries (containerd, the
  toolkit, dockerd, Helm's engine): marker ``real``.
- ``tests/engine``: the real Pulumi CLI and provider, the control plane, kubelet nodes:
  markers ``real`` and ``engine`` (`make test` runs them once their build is done).
- ``tests/gpu``: the chain down to the CUDA probe: markers ``real`` and ``gpu``.

A test in ``tests/pure`` that reaches for a real program (a ``real``-marked fixture such
as ``containerd_line``) is a collection error: move it to ``tests/real``.
The real-containerd harness itself lives in ``tests/support/oracle.py``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from support import oracle


@pytest.fixture
def tmp_short() -> Iterator[Path]:
    """A fresh ``/tmp/gp-XXXX`` directory.

    pytest's ``tmp_path`` is too long for unix sockets (108-byte limit) once containerd
    adds its own path components; daemons placed here keep everything in one short dir.
    Anything still mounted below it is unmounted before it is removed.
    """
    path = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    try:
        yield path
    finally:
        oracle.unmount_under(path)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(
    params=[pytest.param(line, marks=pytest.mark.real) for line in oracle.LINES],
    ids=[f"containerd-{line}" for line in oracle.LINES],
)
def containerd_line(request: pytest.FixtureRequest) -> str:
    """Each containerd line in turn; skips (fails under GPUPLANE_REQUIRE_REAL) if absent."""
    oracle.require_line(request.param)
    return request.param


@pytest.fixture
def start_daemon(tmp_short: Path) -> Iterator[Callable[..., oracle.Daemon]]:
    """``start_daemon(line, config)`` -> a started :class:`oracle.Daemon`.

    Each daemon gets its own short work dir under ``tmp_short`` and is stopped and
    cleaned up at teardown, whatever the test did.
    """
    with ExitStack() as stack:
        count = 0

        def start(line: str, config: Path) -> oracle.Daemon:
            nonlocal count
            count += 1
            return stack.enter_context(oracle.Daemon(line, config, tmp_short / f"d{count}"))

        yield start
