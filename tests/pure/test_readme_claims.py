"""What the README claims about the repository holds: every bundled stack is listed, the
H100 claim names the distributions with GPU rows in the results file, and step 4 runs the
pack from gpuplane's virtualenv."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
RESULTS = ROOT / "docs" / "results" / "gpu-chain-h100-2026-11-27.jsonl"
NAMES = {"kubeadm", "k8s-snap", "rke2", "k3s", "microk8s", "k0s"}   # the distributions


def test_every_bundled_stack_is_listed() -> None:
    for path in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        assert f"`{name}`" in README or f"Pulumi.{name}.yaml" in README, name


def test_the_h100_claim_names_the_distributions_with_gpu_rows() -> None:
    """"every distribution but k0s": k0s alone of the distributions has no GPU row in the
    H100 results (its chain ran only in the driverless rehearsal)."""
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line]
    tested = {row["distro"].split("+")[0].split("-custom")[0].split("-legacy")[0]
              for row in rows if row.get("mode") == "gpu" and "distro" in row}
    claim = " ".join(next(p for p in README.split("\n\n") if "H100" in p).split())
    untested = sorted(set(NAMES) - tested)
    assert untested == ["k0s"], untested
    assert "H100 for every distribution but k0s," in claim, claim


def test_step_4_activates_the_virtualenv_before_the_pack() -> None:
    step = README.split("**4. ")[1].split("```sh")[1].split("```")[0]
    pack = next(line for line in step.splitlines() if "gpuplane policy-pack path" in line)
    assert "`. .venv/bin/activate`" in pack, pack
