"""`pulumi preview` and a no-op `pulumi up` under the real engine, for 10, 100 and 1,000
GPU nodes: wall time, the peak RSS of the CLI and of the Python host, and state per node.

The engine, the kubernetes provider and the control plane are the tests' own
(tests/support/pulumi_engine.py, tests/support/control_plane.py; `make containerd` builds
them). The stack
is the bundled `hami-shared` with N GPU nodes (`nodeAccess: none`; HAMi's `gpu=on` label
goes on every node from one NodeLabels resource), its charts from ../shared/charts. The N
Node objects are registered in the API server first, and the charts' Helm hook Jobs are
completed in the missing kubelet's stead (tests/support/control_plane.py). For each size: `pulumi
preview` of the new stack, the first `pulumi up`, then a second `pulumi up` that changes
nothing (the no-op), then `pulumi destroy` (not timed: the next size's stack makes the
same objects). "state B/node" is the local backend's checkpoint file after the first `up`
divided by N.

The post-deploy checks are off by default (there is no kubelet to run their pods). With
`--checks` they are on (a probe Job per GPU node, timeout 30 s): the first `up` then ends
with the checks' failure, by design, after writing its state, and there is no no-op `up`;
each row adds the time per node (wall / N) and the load average
(benchmarks/check_rounds.py counts the checks' API reads per round).

With `--pod` the stack is the bundled `kubeadm-prod` with `nodeAccess: pod`: one
`NodeAgentPod` per GPU node (the node agent through a pod, no SSH), so a node is a
resource. Only `pulumi preview` is measured there: an `up` would start an agent pod on
each Node object, and these have no kubelet to run it (tests/engine/test_node_pod_engine.py runs
`up` through the pod on a real kubelet node).

`nodeAccess: ssh` is not measured: its node commands need pulumi-resource-command,
which the Go module proxy does not serve (docs/real-engine.md).

With `--per-node`: `pulumi preview` of kubeadm-prod at each size with `nodeAccess: none`
and with `nodeAccess: pod`, in the same run, and the time per node (their difference
divided by N): flat when the cost of a node does not grow with the fleet.

With `--pod-up`: kubeadm-prod with `nodeAccess: pod` through `pulumi up`, a second `pulumi
up` that changes nothing, then `pulumi destroy`: the state per node after the first `up`
and the no-op's time per node. The engine, the kubernetes provider and gpuplane's
NodeAgentPod provider run for real (the pods, their ConfigMaps, the polls, the logs
through the API server); only the agent pods' outcome is stood in for (:class:`StandIn`):
each Node object points at a stand-in kubelet on 127.0.0.1 that serves the agent's log
(its result line), and each agent pod is marked Succeeded with exit code 0. The no-op
must start no pod: the pods the stand-in completed during it are printed. The order the
engine kept is checked from what the stand-in saw: in `up` no node's pod appears before
every node it waits for (its dependencies in the state, through the rollout's barriers)
was done; in `destroy` the reverse.

    .venv/bin/python benchmarks/pulumi_engine.py [--checks | --pod | --per-node | --pod-up]
        [SIZES...]
        default sizes: 10 100 1000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "engine"))   # shared helpers of the engine tests

from support import (  # noqa: E402 - tests/ on the path
    control_plane,
    pulumi_engine,
)


def _stack(dest: Path, nodes: int, charts: dict[str, Path], checks: bool) -> Path:
    data: dict[str, Any] = yaml.safe_load((REPO / "stacks" / "Pulumi.hami-shared.yaml").read_text())
    cfg = data["config"]
    cfg["gpuplane:nodes"] = [{"name": f"gpu-{i:05d}", "gpus": 4, "os": "ubuntu22.04",
                              "pool": "inference"} for i in range(nodes)]
    # With checks: a probe Job per GPU node and their verdicts, which fail after the
    # timeout (no kubelet runs the pods): the first `up` fails, but its state is written.
    cfg["gpuplane:checks"] = {"enabled": True, "timeoutSeconds": 30} if checks else \
        {"enabled": False}
    op, hami = cfg["gpuplane:gpuOperator"], cfg["gpuplane:hami"]
    op.update(chart=str(charts["gpu-operator"]), skipAwait=True)
    hami.update(chart=str(charts["hami"]), skipAwait=True)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"Pulumi.bench{nodes}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _pod_stack(dest: Path, nodes: int, charts: dict[str, Path], access: str = "pod") -> Path:
    bundled = REPO / "stacks" / "Pulumi.kubeadm-prod.yaml"
    data: dict[str, Any] = yaml.safe_load(bundled.read_text())
    cfg = data["config"]
    cfg["gpuplane:cluster"]["nodeAccess"] = access
    cfg.pop("gpuplane:sshPrivateKey", None)
    cfg.pop("gpuplane:ssh", None)   # no SSH: the stack refuses settings it would ignore
    cfg["gpuplane:nodes"] = [{"name": f"gpu-{i:05d}", "gpus": 8, "os": "ubuntu22.04",
                              "pool": "a100"} for i in range(nodes)]
    if access == "none":   # nothing is rolled out: the stack refuses rollout settings
        cfg.pop("gpuplane:rollout", None)
    else:
        cfg["gpuplane:rollout"] = {"canary": True, "maxUnavailable": 10}
    cfg["gpuplane:checks"] = {"enabled": False}
    cfg["gpuplane:gpuOperator"].update(chart=str(charts["gpu-operator"]), skipAwait=True)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"Pulumi.bench{nodes}{access}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _per_node(root: Path, cp: Any, sizes: list[int], charts: dict[str, Path]) -> int:
    """`--per-node`: for each size, `pulumi preview` of kubeadm-prod with `nodeAccess: none`
    (the baseline: the charts, no node resource) and with `nodeAccess: pod`, in this one
    run; the difference divided by N is the time per node, which stays flat when the
    rollout is linear in nodes. The load average is printed with each row."""
    print("| GPU nodes | preview, none | preview, pod | pod / none | per node (pod - none) "
          "| host peak RSS | load (1 min) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in sorted(sizes):
        walls: dict[str, float] = {}
        host = 0.0
        for access in ("none", "pod"):
            stack = f"bench{n}{access}"
            engine = pulumi_engine.Engine(root / stack, kubeconfig=cp.kubeconfig)
            path = _pod_stack(root / stack / "stacks", n, charts, access)
            res = engine.run("preview", stack, stack_file=path, timeout=3600)
            if not res.ok:
                print(f"preview of {n} nodes ({access}) failed:\n{res.stderr[-3000:]}",
                      file=sys.stderr)
                return 1
            walls[access], host = res.seconds, res.host_peak_mb
        per = (walls["pod"] - walls["none"]) / n * 1000
        print(f"| {n:,} | {walls['none']:.1f} s | {walls['pod']:.1f} s | "
              f"{walls['pod'] / walls['none']:.1f} | {per:.1f} ms | {host:.0f} MB | "
              f"{os.getloadavg()[0]:.2f} |", flush=True)
    return 0


# What the agent prints after an apply (gpuplane/data/agent/60-state.sh gp_json_result),
# as a kubeadm node with the host toolkit gives it.
AGENT_LOG = "gpuplane-agent: applied the plan\n" + json.dumps({
    "mode": "apply", "ok": True, "changed": True, "restarted": True,
    "written": ["/etc/containerd/config.toml", "/etc/containerd/conf.d/99-gpuplane.toml"],
    "plan_id": "0123456789abcdef", "distro": "kubeadm", "config": "/etc/containerd/config.toml",
    "default_runtime": "runc", "cdi": False,
    "runtimes": {n: {"runtime_type": "io.containerd.runc.v2",
                     "binary_name": f"/usr/bin/{n}-container-runtime", "systemd_cgroup": True}
                 for n in ("runc", "nvidia", "nvidia-cdi", "nvidia-legacy")},
    "config_sha256": "0" * 64,
    "timings_ms": {"total": 4210, "restart": 912, "cri_ready": 1388}}) + "\n"


class StandIn:
    """The agent pods' outcome without kubelets: an HTTPS server on 127.0.0.1 that serves
    every container log as :data:`AGENT_LOG` (the Node objects point at it), and a thread
    that marks each node-agent pod Succeeded with exit code 0. `started`: the pods it
    completed."""

    def __init__(self, cp: Any, namespace: str) -> None:
        from kubernetes import client, config

        self.core = client.CoreV1Api(config.new_client_from_config(
            config_file=str(cp.kubeconfig)))
        self.namespace, self.started = namespace, 0
        self.done: set[str] = set()
        # (node, mode) -> (when the stand-in first saw its pod, when it marked it done)
        self.seen: dict[tuple[str, str], float] = {}
        self.finished: dict[tuple[str, str], float] = {}

        class Log(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = AGENT_LOG.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Log)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        pki = cp.root / "pki"
        ctx.load_cert_chain(str(pki / "apiserver.crt"), str(pki / "apiserver.key"))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True),
                        threading.Thread(target=self._complete, daemon=True)]
        for t in self.threads:
            t.start()

    def node(self, name: str) -> None:
        """A Node object whose kubelet is the stand-in."""
        from kubernetes import client

        self.core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
        self.core.patch_node_status(name, {"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}}}})

    def _complete(self) -> None:
        selector = "app.kubernetes.io/component=node-agent"
        while not self.stop.wait(0.2):
            with contextlib.suppress(Exception):   # the namespace is not there yet
                listed = time.monotonic()
                for pod in self.core.list_namespaced_pod(
                        self.namespace, label_selector=selector).items:
                    uid = pod.metadata.uid
                    if uid in self.done or pod.status.phase != "Pending":
                        continue
                    key = (pod.spec.node_name, pod.metadata.name.rsplit("-", 1)[-1])
                    self.seen.setdefault(key, listed)
                    self.core.patch_namespaced_pod_status(
                        pod.metadata.name, self.namespace, {"status": {
                            "phase": "Succeeded", "containerStatuses": [{
                                "name": "agent", "image": pod.spec.containers[0].image,
                                "imageID": "", "ready": False, "restartCount": 0,
                                "state": {"terminated": {"exitCode": 0,
                                                         "reason": "Completed"}}}]}})
                    self.done.add(uid)
                    self.started += 1
                    self.finished[key] = time.monotonic()

    def out_of_order(self, waits: dict[str, set[str]], mode: str) -> tuple[int, int]:
        """(pairs out of order, pairs) of `waits` (node: the nodes it waits for) in `mode`:
        apply (a node's pod seen before one it waits for was done) or restore (the
        reverse: a node's restore seen before the restore of one waiting for it was
        done)."""
        bad = total = 0
        for node, before in waits.items():
            for other in before:
                first, then = (other, node) if mode == "apply" else (node, other)
                if (first, mode) not in self.finished or (then, mode) not in self.seen:
                    continue
                total += 1
                bad += self.seen[(then, mode)] <= self.finished[(first, mode)]
        return bad, total

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        for t in self.threads:
            t.join()


def _node_bytes(checkpoint: Path) -> tuple[float, float, int]:
    """From a local backend's checkpoint, the mean bytes of one NodeAgentPod's state: its
    own inputs and outputs, and its whole record (with what the engine keeps beside them:
    URN, parent, the URNs of the batch before it, the SDK's source positions); and the plan
    ConfigMaps' bytes in all."""
    resources = json.loads(checkpoint.read_text())["checkpoint"]["latest"]["resources"]
    nodes = [r for r in resources if r["type"].endswith("gpuplane:NodeAgentPod")]
    own = [len(json.dumps(r.get("inputs"))) + len(json.dumps(r.get("outputs"))) for r in nodes]
    whole = [len(json.dumps(r)) for r in nodes]
    barriers = sum(len(json.dumps(r)) for r in resources
                   if r["type"].endswith("gpuplane:RolloutBarrier"))
    maps = sum(len(json.dumps(r)) for r in resources
               if r["type"] == "kubernetes:core/v1:ConfigMap"
               and "gpuplane-plan-" in json.dumps(r.get("inputs", {}).get("metadata")))
    if os.environ.get("GPUPLANE_BENCH_DUMP") and nodes:
        print(json.dumps(nodes[-1], indent=1), file=sys.stderr)
    count = max(len(nodes), 1)
    return sum(own) / count, sum(whole) / count, maps, barriers / count


def _waits(checkpoint: Path) -> dict[str, set[str]]:
    """Each node the state holds, and the nodes it waits for: its dependencies, through
    the rollout's barriers (gpuplane.stack.barrier), as the engine orders them."""
    resources = json.loads(checkpoint.read_text())["checkpoint"]["latest"]["resources"]
    by_urn = {r["urn"]: r for r in resources}

    def nodes(urns: list[str]) -> set[str]:
        out: set[str] = set()
        for urn in urns:
            r = by_urn.get(urn) or {}
            if r.get("type", "").endswith("gpuplane:NodeAgentPod"):
                out.add(r["inputs"]["node"])
            elif r.get("type", "").endswith("gpuplane:RolloutBarrier"):
                out |= nodes(r.get("dependencies") or [])
        return out
    return {r["inputs"]["node"]: nodes(r.get("dependencies") or []) for r in resources
            if r["type"].endswith("gpuplane:NodeAgentPod")}


def _pod_up(root: Path, cp: Any, sizes: list[int], charts: dict[str, Path]) -> int:
    """`--pod-up`: first `up`, state per node, a no-op `up` (its time per node and the pods
    it started: none), `destroy`; the load average beside each figure."""
    standin = StandIn(cp, "gpu-operator")
    print("| GPU nodes | first up | state B/node (file / N) | node inputs+outputs B | "
          "node record B | barriers B/node | plan ConfigMaps B | no-op up | no-op per node | "
          "pods started by the no-op | changes in the no-op | out of order (up; destroy) | "
          "load (1 min) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    made = 0
    try:
        for n in sorted(sizes):
            for i in range(made, n):
                standin.node(f"gpu-{i:05d}")
            made = max(made, n)
            stack = f"bench{n}pod"
            engine = pulumi_engine.Engine(root / stack, kubeconfig=cp.kubeconfig)
            path = _pod_stack(root / stack / "stacks", n, charts, "pod")
            results = []
            for label in ("first up", "no-op up"):
                before = standin.started
                with control_plane.helm_hooks_succeed(cp, "gpu-operator", "kube-system"):
                    res = engine.run("up", stack, stack_file=path, timeout=3600)
                if not res.ok:
                    errors = [d["message"] for d in res.diagnostics
                              if d["severity"] == "error"]
                    print(f"{label} of {n} nodes failed:\n" + "\n".join(errors)
                          + f"\n{res.stderr[-3000:]}", file=sys.stderr)
                    return 1
                results.append((res, standin.started - before, os.getloadavg()[0]))
                if label == "first up":
                    checkpoint = root / stack / "state" / ".pulumi" / "stacks" / \
                        "gpuplane" / f"{stack}.json"
                    per_file = checkpoint.stat().st_size / n
                    own_b, node_b, maps_b, barrier_b = _node_bytes(checkpoint)
                    waits = _waits(checkpoint)
            (first, _, load1), (noop, pods, load2) = results
            changes = {k: v for k, v in noop.changes.items() if k != "same"}
            with control_plane.helm_hooks_succeed(cp, "gpu-operator", "kube-system"):
                engine.run("destroy", stack, stack_file=path, timeout=3600)
            # The engine's order, from what the stand-in saw: each node's pod only after
            # the pods of every node it waits for were done; at destroy the reverse.
            order = "; ".join(f"{bad} of {total}" for bad, total in (
                standin.out_of_order(waits, "apply"), standin.out_of_order(waits, "restore")))
            standin.seen.clear()
            standin.finished.clear()
            print(f"| {n:,} | {first.seconds:.1f} s (load {load1:.2f}) | {per_file:,.0f} | "
                  f"{own_b:,.0f} | {node_b:,.0f} | {barrier_b:,.0f} | {maps_b:,} | "
                  f"{noop.seconds:.1f} s | {noop.seconds / n * 1000:.1f} ms | {pods} | "
                  f"{changes or 'none'} | {order} | {load2:.2f} |", flush=True)
    finally:
        standin.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10, 100, 1000])
    ap.add_argument("--charts", type=Path, default=REPO.parent / "shared" / "charts")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--checks", action="store_true",
                      help="post-deploy checks on (the first up fails at their timeout)")
    mode.add_argument("--pod", action="store_true",
                      help="kubeadm-prod with nodeAccess: pod (preview only)")
    mode.add_argument("--per-node", action="store_true",
                      help="preview time per GPU node: nodeAccess pod against none")
    mode.add_argument("--pod-up", action="store_true",
                      help="nodeAccess pod: state per node after up, the no-op up per node")
    a = ap.parse_args()
    for why in (pulumi_engine.missing(), control_plane.missing()):
        if why:
            print(f"pulumi_engine: {why}", file=sys.stderr)
            return 1
    root = Path(tempfile.mkdtemp(prefix="gp-bench-", dir="/tmp"))
    os.environ.setdefault("GPUPLANE_CHARTS", str(a.charts))
    from test_pulumi_engine import local_chart

    charts = {"gpu-operator": local_chart("gpu-operator", "v25.10.1"),
              "hami": local_chart("hami", "2.10.0")}
    cp = control_plane.start(root / "cp")
    try:
        from kubernetes import client, config

        core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
        if a.pod_up:
            return _pod_up(root, cp, a.sizes, charts)
        if a.per_node:
            for i in range(max(a.sizes)):
                core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
                    name=f"gpu-{i:05d}")))
            return _per_node(root, cp, a.sizes, charts)
        made = 0
        # With the checks: the time per node of each operation (wall / N; flat when the
        # checks' cost is linear in nodes) and the load average beside it.
        extra = " per node | load (1 min) |" if a.checks else ""
        print("| GPU nodes | operation | wall | CLI peak RSS | Python host peak RSS | "
              "resources | state B/node |" + extra)
        print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if a.checks else ""))
        for n in sorted(a.sizes):
            for i in range(made, n):
                core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
                    name=f"gpu-{i:05d}")))
            made = max(made, n)
            stack = f"bench{n}"
            engine = pulumi_engine.Engine(root / stack, kubeconfig=cp.kubeconfig)
            path = _pod_stack(root / stack / "stacks", n, charts) if a.pod else \
                _stack(root / stack / "stacks", n, charts, a.checks)
            state = ""
            ops = [("preview", "preview")]
            if not a.pod:
                ops.append(("first up", "up"))
            if not a.checks and not a.pod:
                ops.append(("no-op up", "up"))
            for label, op in ops:
                with control_plane.helm_hooks_succeed(cp, "gpu-operator", "kube-system"):
                    res = engine.run(op, stack, stack_file=path, timeout=3600)
                errors = [d["message"] for d in res.diagnostics if d["severity"] == "error"]
                failed_checks = a.checks and label == "first up" and \
                    any("post-deploy check" in e for e in errors)
                if not res.ok and not failed_checks:
                    print(f"{label} of {n} nodes failed:\n" + "\n".join(errors)
                          + f"\n{res.stderr[-3000:]}", file=sys.stderr)
                    return 1
                count = sum(res.changes.values())
                if label == "first up":
                    checkpoint = root / stack / "state" / ".pulumi" / "stacks" / "gpuplane" / \
                        f"{stack}.json"
                    state = f"{checkpoint.stat().st_size / n:,.0f}"
                per = (f" {res.seconds / n * 1000:,.0f} ms | {os.getloadavg()[0]:.2f} |"
                       if a.checks else "")
                print(f"| {n:,} | {label} | {res.seconds:.1f} s | {res.cli_peak_mb:.0f} MB | "
                      f"{res.host_peak_mb:.0f} MB | {count} | "
                      f"{state if label == 'first up' else ''} |{per}",
                      flush=True)
            # The next size's stack makes the same objects: this one goes first (not timed).
            if not a.pod:
                with control_plane.helm_hooks_succeed(cp, "gpu-operator", "kube-system"):
                    engine.run("destroy", stack, stack_file=path, timeout=3600)
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
