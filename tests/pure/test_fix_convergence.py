"""Issue #39 item 5: fixes that converge. For every bundled stack and every broken stack of
tests/support/stack_cases.py (plus the toolkit.env traps below), each error whose fix is a stack
change (`Finding.changes`) is applied and the stack planned again, until the plan is clean
or its errors name no stack change (their prose fix is the next step). Never a loop: no
set of errors comes back after a fix was applied.

The known bad case (gpu-operator#992): FM04's old fix on RKE2 (point CONTAINERD_CONFIG at
the template, RUNTIME_CONFIG_SOURCE=file=<config>) led into FM17, then FM05."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import BROKEN, CLEAN, as_pod, broken_config, config_of, write_stack

from gpuplane.cli.plan.run import plan_stack

RANCHER = "/var/lib/rancher/rke2/agent/etc/containerd"
SOCKET = {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}


def _env(stack: str, *entries: dict[str, str], pod: bool = True) -> dict[str, Any]:
    cfg = config_of(stack)
    cfg = as_pod(cfg) if pod else cfg
    cfg["gpuplane:gpuOperator"].setdefault("values", {})["toolkit"] = {"env": list(entries)}
    return cfg


# Stacks a user writes by hand after a guide: toolkit.env aimed at RKE2's files.
ENV_TRAPS: dict[str, dict[str, Any]] = {
    # gpu-operator#992: the template, with the rendered config as source.
    "rke2-lab/template-by-hand": _env(
        "rke2-lab", {"name": "CONTAINERD_CONFIG", "value": f"{RANCHER}/config-v3.toml.tmpl"},
        {"name": "RUNTIME_CONFIG_SOURCE", "value": f"file={RANCHER}/config.toml"}, SOCKET),
    "rke2-lab/generated-config": _env(
        "rke2-lab", {"name": "CONTAINERD_CONFIG", "value": f"{RANCHER}/config.toml"}, SOCKET),
    # A 1.x guide on a containerd 2.x node: RKE2 renders that file instead of its own.
    "rke2-operator/v2-template-on-2.x": _env(
        "rke2-operator", {"name": "CONTAINERD_CONFIG", "value": f"{RANCHER}/config.toml.tmpl"},
        SOCKET),
    "rke2-operator/generated-config": _env(
        "rke2-operator", {"name": "CONTAINERD_CONFIG", "value": f"{RANCHER}/config.toml"},
        SOCKET),
    "k0s-operator/top-level-config": _env(
        "k0s-operator", {"name": "CONTAINERD_CONFIG", "value": "/etc/k0s/containerd.toml"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/k0s/containerd.sock"}),
}


def _apply(cfg: dict[str, Any], key: str, value: Any) -> None:
    """Set (or, value None, remove) `gpuplane:section.dotted.path` in a stack's config."""
    section, _, path = key.partition(".")
    parts = path.split(".") if path else []
    if not parts:
        if value is None:
            cfg.pop(section, None)
        else:
            cfg[section] = value
        return
    node = cfg.setdefault(section, {})
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def _errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["severity"] == "error"]


def converge(cfg: dict[str, Any], folder: Path, steps: int = 5) -> list[list[str]]:
    """Apply each error's stack change and plan again; the error ids of each round."""
    seen: list[frozenset[tuple[str, str]]] = []
    rounds: list[list[str]] = []
    cfg = copy.deepcopy(cfg)
    for step in range(steps):
        write_stack(folder / str(step), "case", cfg)
        errors = _errors(plan_stack("case", folder / str(step)))
        rounds.append(sorted(f["id"] for f in errors))
        state = frozenset((f["id"], f["message"]) for f in errors)
        assert state not in seen, f"the fixes loop: {rounds}"
        seen.append(state)
        changes = [c for f in errors for c in f.get("changes", [])]
        if not changes:
            for f in errors:   # the plan names the next step in words
                assert f["fix"].strip(), f
            return rounds
        for key, value in changes:
            _apply(cfg, key, value)
    raise AssertionError(f"no end after {steps} rounds: {rounds}")


@pytest.mark.parametrize("stack", CLEAN)
def test_a_bundled_stack_needs_no_fix(stack: str, tmp_path: Path) -> None:
    assert converge(config_of(stack), tmp_path) == [[]]


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_stacks_fixes_never_loop(case: str, tmp_path: Path) -> None:
    rounds = converge(broken_config(case, tmp_path), tmp_path / "plans")
    assert rounds[0], rounds


@pytest.mark.parametrize("case", list(ENV_TRAPS))
def test_toolkit_env_traps_converge_to_a_clean_plan(case: str, tmp_path: Path) -> None:
    """Each trap is an error whose fix is a stack change, and applying it gives a clean
    plan: gpuplane's own env for the distribution."""
    rounds = converge(ENV_TRAPS[case], tmp_path)
    assert rounds[0] and rounds[-1] == [], rounds
