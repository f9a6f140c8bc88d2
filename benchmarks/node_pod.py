"""Figures for `cluster.nodeAccess: pod` (issue #30): the node agent through its pod against
the same agent over SSH, on one real kubelet node (tests/support/agent_pod.py: a kubeadm sandbox
on containerd 1.7, a kubelet registered with the test control plane, containerd restarts
that keep the shims as a real node's do).

Per path and run, on the same node and plan (host mode: one containerd restart):
- apply (the change): wall time and containerd restarts;
- apply again (no-op): wall time and restarts;
- restore: wall time and restarts (the files byte for byte is asserted).
The pod path is gpuplane's NodeAgentPodProvider (create / update / delete: a ConfigMap
and a pod per run, created, waited for and deleted through the API); the SSH path is
`ssh root@127.0.0.1 sh -s -- apply` with the same program to a throw-away sshd.

    .venv/bin/python benchmarks/node_pod.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "components"))

from support import (  # noqa: E402 - tests/ on the path
    agent_pod,
    control_plane,
    kubelet_node,
    oracle,
)

from gpuplane.agent.script import apply_stdin, plan_stdin, restore_script  # noqa: E402
from gpuplane.distros.profiles import Distro, profile  # noqa: E402
from gpuplane.stack.node_pod import NodeAgentPodProvider  # noqa: E402


def sshd(d: Path) -> tuple[subprocess.Popen[bytes], list[str]]:
    """A throw-away sshd on 127.0.0.1 for root with one key; the ssh argv to reach it."""
    d.mkdir(parents=True)
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile none\nStrictModes no\n"
        "UsePAM no\nPasswordAuthentication no\nPermitRootLogin prohibit-password\n"
        "LogLevel ERROR\n")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    proc = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f",
                             str(d / "sshd_config")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    argv = ["ssh", "-i", str(d / "client"), "-p", str(port), "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={d / 'kh'}",
            "-o", "LogLevel=ERROR", "root@127.0.0.1"]
    return proc, argv


def timed(step: Callable[[], object]) -> float:
    t0 = time.monotonic()
    step()
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    why = kubelet_node.missing()
    if why:
        print(f"cannot run: {why}")
        return 2
    root = Path(tempfile.mkdtemp(prefix="gp-bnp-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    tmp = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    node = agent_pod.PodNode(tmp, "1.7", profile(Distro.KUBEADM))
    node.boot()
    kubelet = kubelet_node.attach(cp, node, tmp / "k", "gpu-bench")
    ssh_proc, ssh = sshd(root / "sshd")
    try:
        agent_pod.namespace(cp, "gpuplane-nodes", "privileged")
        os.environ.update(node.sandbox_env())
        provider = NodeAgentPodProvider()
        provider.client_factory = lambda *_: agent_pod.client(cp)
        provider.poll_seconds = 0.25
        plan = node.plan()
        props = {"node": "gpu-bench", "namespace": "gpuplane-nodes",
                 "image": agent_pod.IMAGE, "timeoutSeconds": 180,
                 "stdin": plan_stdin(plan), "planId": plan.plan_id, "tries": 3,
                 "kubeconfig": None}
        original = node.snapshot()
        agent_args = shlex.join(node.args())

        def over_ssh(command: str, stdin: str = "") -> None:
            done = subprocess.run([*ssh, command], input=stdin, capture_output=True,
                                  text=True, timeout=180, check=False)
            assert done.returncode == 0, done.stderr[-2000:]

        def through_pod(outs: dict[str, object]) -> None:
            assert not outs.get("error"), outs["error"]    # a failure is an output

        paths: dict[str, dict[str, Callable[[], object]]] = {
            "pod": {
                "apply": lambda: through_pod(provider.create(props).outs),
                "no-op": lambda: through_pod(provider.update("id", props, props).outs),
                "restore": lambda: provider.delete("id", props),
            },
            "ssh": {
                "apply": lambda: over_ssh(f"sh -s -- apply {agent_args}", apply_stdin(plan)),
                "no-op": lambda: over_ssh(f"sh -s -- apply {agent_args}", apply_stdin(plan)),
                "restore": lambda: over_ssh(restore_script(
                    plan.plan_id, root=str(node.root), agent_args=tuple(node.args()))),
            },
        }
        figures: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for _ in range(args.runs):
            for path, steps in paths.items():
                for mode, step in steps.items():
                    before = node.restarts
                    seconds = timed(step)
                    figures.setdefault((path, mode), []).append(
                        (seconds, node.restarts - before))
                    kubelet_node.wait_ready(cp, "gpu-bench", kubelet,
                                            tmp / "k" / "kubelet.log", 60)
                assert node.snapshot() == original, f"{path}: not restored byte for byte"
        print(f"kubeadm node, containerd 1.7, one real kubelet; {args.runs} run(s) per path")
        print(f"{'path':5} {'step':8} {'median s':>9} {'min s':>7} {'max s':>7} restarts")
        for (path, mode), runs in figures.items():
            secs = [s for s, _ in runs]
            restarts = sorted({r for _, r in runs})
            print(f"{path:5} {mode:8} {statistics.median(secs):9.2f} {min(secs):7.2f} "
                  f"{max(secs):7.2f} {','.join(map(str, restarts))}")
        return 0
    finally:
        ssh_proc.terminate()
        ssh_proc.wait(timeout=10)
        kubelet_node.stop_kubelet(kubelet, tmp / "k")
        node.close()
        oracle.unmount_under(tmp)
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
