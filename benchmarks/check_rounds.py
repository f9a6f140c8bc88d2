"""The post-deploy checks' polling against a real kube-apiserver, without the Pulumi engine:
API reads per round, a round's time and the wait's time per node, for 10, 100 and 1,000
GPU nodes.

The control plane is the tests' own (tests/support/control_plane.py; `make containerd`
builds it). For each size N: N Node objects (no kubelet, so every probe pod stays
Pending: the checks' worst case, each check waits for its whole timeout), then the two
wave-1 checks as `pulumi up` runs them, one after the other, through their dynamic
providers: `GpuJobCheck` (creates a probe Job per node, waits, judges) and
`GpuAllocatableCheck` (reads the nodes' allocatable until it settles or times out). Each in
a namespace of its own per size, so a size's LISTs do not see the last size's Jobs.

With `--cpu-nodes M` the cluster also holds M nodes without GPUs (a fleet's CPU nodes);
the GPU nodes carry the GPU Operator's `nvidia.com/gpu.present=true` label. "nodes listed"
is how many Node objects the allocatable check's LISTs returned in all.

Every call of the checks' `Cluster` is counted, and every HTTP request the kubernetes client
sends (its REST client's `request`); a round is what happens between two of the waiter's
sleeps. Printed per check and size: HTTP requests in all, polling rounds, requests per
round (the most in one round), the slowest round, the Job creates' time, the wait, and the
time per node of the whole check.

    .venv/bin/python benchmarks/check_rounds.py [--timeout 30] [--poll 5] [--cpu-nodes M]
        [SIZES...]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support import control_plane  # noqa: E402 - tests/ on the path

from gpuplane.checks.live import KubeCluster  # noqa: E402
from gpuplane.checks.manifests import plan_checks  # noqa: E402
from gpuplane.checks.provider import (  # noqa: E402
    AllocatableCheckProvider,
    ProbeJobCheckProvider,
)
from gpuplane.checks.settings import ChecksSettings  # noqa: E402
from gpuplane.core.intent import ClusterIntent, NodeIntent  # noqa: E402

POLL_CALLS = {"job", "job_pods", "jobs", "pods", "node", "nodes"}


@dataclass
class Tally:
    """Calls and HTTP requests, cut into rounds at each of the waiter's sleeps."""

    rounds: list[collections.Counter[str]] = field(
        default_factory=lambda: [collections.Counter()])
    round_start: float = field(default_factory=time.monotonic)
    round_s: list[float] = field(default_factory=list)
    http: int = 0
    listed: int = 0
    first_create: float | None = None
    last_create: float | None = None

    def call(self, name: str) -> None:
        self.rounds[-1][name] += 1
        if name == "create_job":
            now = time.monotonic()
            self.first_create = self.first_create or now
            self.last_create = now

    def sleep(self, seconds: float) -> None:
        self.round_s.append(time.monotonic() - self.round_start)
        time.sleep(seconds)
        self.rounds.append(collections.Counter())
        self.round_start = time.monotonic()


class Counted:
    """A Cluster that counts each call by name, and the HTTP requests under it."""

    def __init__(self, inner: KubeCluster, tally: Tally):
        self.inner, self.tally = inner, tally
        rest = inner.api_client.rest_client
        request = rest.request

        def counted(*args: Any, **kwargs: Any) -> Any:
            tally.http += 1
            return request(*args, **kwargs)

        rest.request = counted

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.tally.call(name)
            out = method(*args, **kwargs)
            if name == "nodes":
                self.tally.listed += len(out)
            return out

        return call


def _run(provider: Any, cp: Any, props: dict[str, Any], poll: float) -> tuple[Tally, dict, float]:
    tally = Tally()
    provider.cluster_factory = lambda *_: Counted(KubeCluster.connect(str(cp.kubeconfig)),
                                                  tally)
    provider.poll_seconds, provider.sleep = poll, tally.sleep
    start = time.monotonic()
    outs = provider.create(props).outs
    return tally, outs, time.monotonic() - start


def _row(label: str, n: int, tally: Tally, outs: dict, wall: float) -> str:
    polls = [sum(v for k, v in r.items() if k in POLL_CALLS) for r in tally.rounds]
    finals = sum(v for r in tally.rounds for k, v in r.items()
                 if k not in POLL_CALLS and k not in ("create_job", "delete_job"))
    creates = (tally.last_create - tally.first_create) if tally.first_create else 0.0
    verdict = ",".join(sorted(set(outs["result"].get("findings") or []))) or \
        ("passed" if outs["passed"] else "failed")
    return (f"| {label} | {n:,} | {len(tally.rounds)} | {max(polls)} | {sum(polls)} | "
            f"{finals} | {tally.http:,} | {max(tally.round_s or [0]):.2f} s | "
            f"{creates:.1f} s | {tally.listed:,} | {wall:.1f} s | {wall / n * 1000:.0f} ms | "
            f"{verdict} | "
            f"{os.getloadavg()[0]:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10, 100, 1000])
    ap.add_argument("--timeout", type=int, default=30, help="gpuplane:checks.timeoutSeconds")
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between rounds")
    ap.add_argument("--cpu-nodes", type=int, default=0, help="nodes without GPUs beside")
    a = ap.parse_args()
    if why := control_plane.missing():
        print(f"check_rounds: {why}", file=sys.stderr)
        return 1
    from kubernetes import client, config

    root = Path(tempfile.mkdtemp(prefix="gp-rounds-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
        client.NodeV1Api(core.api_client).create_runtime_class(   # the pods can be made
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": {"name": "nvidia"}, "handler": "nvidia"})
        print("| check | GPU nodes | rounds | reads per round (most) | poll reads | "
              "final reads | HTTP requests | slowest round | Job creates | nodes listed | "
              "check wall | per node | verdict | load (1 min) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
              "| --- |")
        for i in range(a.cpu_nodes):
            core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=f"cpu-{i:05d}")))
        made = 0
        settings = ChecksSettings(timeout_seconds=a.timeout)
        for n in sorted(a.sizes):
            for i in range(made, n):
                core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
                    name=f"gpu-{i:05d}", labels={"nvidia.com/gpu.present": "true"})))
            made = max(made, n)
            intent = ClusterIntent(nodes=tuple(NodeIntent(f"gpu-{i:05d}", 4)
                                               for i in range(n)))
            namespace = f"bench-{n}"
            core.create_namespace({"metadata": {"name": namespace}})
            checks = [c for c in plan_checks(intent, settings) if c.kind == "node"]
            props = {"checkName": "checks-nodes-check", "checks": [c.key for c in checks],
                     "intent": intent.to_json(), "namespace": namespace,
                     "settings": asdict(settings), "jobPrefix": "checks",
                     "fingerprint": f"bench{n}", "configmap": "checks-probe",
                     "timeoutSeconds": float(a.timeout), "kubeconfig": None}
            print(_row("nodes (GpuJobCheck)", n,
                       *_run(ProbeJobCheckProvider(), cp, props, a.poll)), flush=True)
            alloc = {"checkName": "checks-allocatable", "intent": intent.to_json(),
                     "timeoutSeconds": float(a.timeout), "hamiSplitCount": 10,
                     "kubeconfig": None}
            print(_row("allocatable", n, *_run(AllocatableCheckProvider(), cp, alloc, a.poll)),
                  flush=True)
            core.delete_namespace(namespace, propagation_policy="Background")
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
