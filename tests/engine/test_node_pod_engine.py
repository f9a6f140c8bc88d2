"""`pulumi up` and `pulumi destroy` of a `cluster.nodeAccess: pod` stack under the real
Pulumi engine (tests/support/pulumi_engine.py: the CLI and the kubernetes provider built from
their Go modules; gpuplane's NodeAgentPod is a Python dynamic provider, which needs no
command provider) on a real kubelet node (tests/support/agent_pod.py) under the real control
plane: an agent pod that cannot start fails `up` with the fix and no traceback, and the
node is untouched; fixed, `up` writes the plan on the node through the agent's pod, a
second `up` changes nothing, `destroy` restores the node's files byte for byte.

The stack is the bundled kind-smoke with `nodeAccess: pod`, containerd 1.7, one GPU node
(the kubelet's) and the node's files captured as its baseline (`cluster.baselineFiles`:
the sandbox's files differ from gpuplane's model, see tests/kubelet_node.runnable). The
toolkit is the operator's: the file gpuplane writes (the import of the toolkit's drop-in
dir) leaves the effective config as it is, so the agent restarts nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import agent_pod, control_plane, kubelet_node, oracle, pulumi_engine
from test_pulumi_engine import stack_file

from gpuplane.distros.profiles import Distro, profile

pytestmark = [pytest.mark.real, pytest.mark.engine]
LINE = "1.7"
NODE = "gpu-node-engine"
CONFIG = "/etc/containerd/config.toml"


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    for why in (pulumi_engine.missing(), kubelet_node.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine on a kubelet node: {why}",
                               "make containerd")
    oracle.require_daemon_support(LINE)
    root = Path(tempfile.mkdtemp(prefix="gp-npe-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    try:
        yield cp
    finally:
        cp.stop()


def test_pulumi_up_applies_through_the_pod_and_destroy_restores_byte_for_byte(
        cluster: control_plane.ControlPlane, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    node = agent_pod.PodNode(tmp, LINE, profile(Distro.KUBEADM))
    node.boot()
    kubelet = kubelet_node.attach(cluster, node, tmp / "k", NODE)
    try:
        for key, value in node.sandbox_env().items():
            monkeypatch.setenv(key, value)   # the engine's providers inherit it
        captured = tmp_path / "captured-config.toml"
        original_text = (node.root / CONFIG.lstrip("/")).read_text()
        captured.write_text(original_text)
        original = node.snapshot()
        path = stack_file(tmp_path / "stacks", "kind-smoke", {
            "gpuplane:cluster": {"nodeAccess": "pod", "containerdVersion": LINE,
                                 "kubeletCgroupDriver": "cgroupfs",   # the sandbox kubelet
                                 "baselineFiles": {CONFIG: str(captured)}},
            "gpuplane:nodes": [{"name": NODE, "gpus": 1}],
            "gpuplane:nodePod": {"timeoutSeconds": 180},
            "gpuplane:runtime": {"systemdCgroup": False},
            "gpuplane:checks": {"enabled": False}})
        engine = pulumi_engine.Engine(tmp_path / "engine", kubeconfig=cluster.kubeconfig)

        # An agent pod that cannot start (an image no registry serves) fails `up` with
        # the fix and no traceback; the node is untouched, the operator never installed.
        bad = stack_file(tmp_path / "bad", "kind-smoke", {
            **yaml.safe_load(path.read_text())["config"],
            "gpuplane:nodePod": {"timeoutSeconds": 60,
                                 "image": "docker.io/library/gpuplane-nowhere:0"}})
        failed = engine.run("up", "kind-smoke", stack_file=bad, policy_pack=True)
        text = failed.stdout + failed.stderr
        assert not failed.ok, text[-4000:]
        assert f"node agent (apply) on {NODE}" in text and "gpuplane:nodePod.image" in text, \
            text[-4000:]
        assert "the node agent failed on containerd-" in text, text[-4000:]
        assert "Traceback" not in text, text[-6000:]
        assert not [s for s in failed.steps if s["type"] == "kubernetes:helm.sh/v3:Release"]
        assert node.snapshot() == original and node.restarts == 0

        # Fixed, the next `up` runs the agent (the failed resource always runs again).
        with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
            up = engine.run("up", "kind-smoke", stack_file=path, policy_pack=True)
        assert up.ok, (up.stdout + up.stderr)[-6000:]
        steps = {s["name"]: s for s in up.steps}
        pod_step = steps[f"containerd-{NODE}"]
        assert pod_step["type"] == "pulumi-python:dynamic/gpuplane:NodeAgentPod"
        assert pod_step["op"] == "update", pod_step
        written = (node.root / CONFIG.lstrip("/")).read_text()
        assert written != original_text and "imports" in written, written
        assert (node.root / "var/lib/gpuplane/state").is_file()
        assert node.restarts == 0, "the import of an empty drop-in dir restarted containerd"

        again = engine.run("up", "kind-smoke", stack_file=path, policy_pack=True)
        assert again.ok, again.stdout[-4000:]
        assert set(again.changes) == {"same"}, again.changes

        with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
            down = engine.run("destroy", "kind-smoke", stack_file=path)
        assert down.ok, (down.stdout + down.stderr)[-6000:]
        assert node.snapshot() == original, "destroy did not restore the node byte for byte"
        assert not (node.root / "var/lib/gpuplane").exists()
        print(f"nodeAccess pod under the engine: up {up.seconds:.1f} s, "
              f"destroy {down.seconds:.1f} s")
    finally:
        kubelet_node.stop_kubelet(kubelet, tmp / "k")
        node.close()
        oracle.unmount_under(tmp)
