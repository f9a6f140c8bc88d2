"""Shared fixtures. The real-containerd harness itself lives in ``tests/oracle.py``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import oracle


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
