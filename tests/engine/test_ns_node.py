"""gpuplane's plan as it is, on nodes in namespaces of their own (tests/support/ns_node.py), under
the real Pulumi engine and over the node's real sshd (issue #28): the kubeadm node's
containerd reads /etc/containerd/config.toml, the NVIDIA runtime is
/usr/bin/nvidia-container-runtime (the logging stand-in: no GPU here) and `systemctl
restart containerd` restarts it from inside the node. No file is rewritten for the
test: what gpuplane plans is what the node runs.

- The chain (`nodeAccess: pod`, host toolkit, RuntimeClass, checks on): `pulumi up`
  writes the planned files through the agent's pod, containerd restarts exactly once,
  the node stays Ready, the probe Job runs through handler `nvidia` and the verdict fails
  `up` with the node's name, FM01 and no traceback; a second `up` runs only the failed
  check and restarts nothing; `pulumi destroy` restores byte for byte.
- Two nodes: canary first; an added node is the only one the next `up` changes.
- Drift: `pulumi preview --refresh --diff` names the hand-edited file; `up --refresh`
  refuses to overwrite it (FM05).
- Over the node's sshd: capture, plan, and the plan's SSH commands as the command
  provider would send them (it cannot be built here, issue #27).
- Every containerd line takes its plan through the pod and stays Ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, kubelet_node, oracle, pulumi_engine
from support.ns_node import NsNode, running
from test_pulumi_engine import check_jobs, stack_file

from gpuplane.distros.profiles import Distro, profile
from gpuplane.stack.node_pod import SANDBOX_ENV

pytestmark = [pytest.mark.real, pytest.mark.engine]
LINE = "1.7"
REPO = Path(__file__).resolve().parents[2]
NODE = "gpu-ns-01"
CONFIG = "/etc/containerd/config.toml"


def pod_stack(dest: Path, names: list[str], captured: Path, *, checks: bool = False,
              runtime_class: bool = False) -> Path:
    """kind-smoke as a `nodeAccess: pod` stack with the host toolkit for the namespaced
    nodes `names`, planned from `captured` (their config.toml as the node holds it)."""
    return stack_file(dest, "kind-smoke", {
        "gpuplane:cluster": {"nodeAccess": "pod", "containerdVersion": LINE,
                             "kubeletCgroupDriver": "cgroupfs",
                             "baselineFiles": {CONFIG: str(captured)}},
        "gpuplane:gpuOperator": {"toolkit": "host"},
        "gpuplane:nodes": [{"name": name, "gpus": 1} for name in names],
        "gpuplane:nodePod": {"timeoutSeconds": 180},
        "gpuplane:rollout": {"canary": True, "maxUnavailable": 1},
        "gpuplane:runtime": {"systemdCgroup": False, "createRuntimeClass": runtime_class},
        "gpuplane:checks": {"enabled": checks, "timeoutSeconds": 180}})


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    for why in (pulumi_engine.missing(), kubelet_node.missing()):
        if why:
            oracle.unavailable(f"the real Pulumi engine on a namespaced node: {why}",
                               "make test")
    oracle.require_daemon_support(LINE)
    root = Path(tempfile.mkdtemp(prefix="gp-nse-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def node(cluster: control_plane.ControlPlane) -> Iterator[tuple[NsNode, Any]]:
    with running(cluster, [NODE]) as made:
        yield made[NODE], made[NODE].kubelet


@pytest.fixture(autouse=True)
def _no_release_left(cluster: control_plane.ControlPlane) -> Iterator[None]:
    """A test that fails before its `destroy` leaves the GPU Operator's Helm release in
    the module's cluster, and the next test's `up` would fail on that ("cannot re-use a
    name that is still in use"), not on its own. Its Helm records go after each test, so
    a test fails only for itself."""
    yield
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    for secret in core.list_namespaced_secret("gpu-operator", label_selector="owner=helm").items:
        with contextlib.suppress(client.exceptions.ApiException):
            core.delete_namespaced_secret(secret.metadata.name, "gpu-operator")


@pytest.fixture
def engine(cluster: control_plane.ControlPlane, tmp_path: Path) -> Iterator[pulumi_engine.Engine]:
    """The test's engine. A test that fails before its `destroy` would leave its stack's
    objects (the GPU Operator's release, gpuplane's ConfigMaps, the RuntimeClass) in the
    module's cluster, and the next test's `up` would fail on them ("cannot re-use a name
    that is still in use", a server-side apply conflict), not on its own: whatever the
    stack still holds is destroyed after the test. Asked for after the node and the
    monkeypatched sandbox, so that the node still runs and the providers still reach it."""
    made = pulumi_engine.Engine(tmp_path / "engine", kubeconfig=cluster.kubeconfig)
    yield made
    for state in (made.root / "state").glob(".pulumi/stacks/*/*.json"):
        if json.loads(state.read_text())["checkpoint"].get("latest", {}).get("resources"):
            project = made.root / f"project-{state.stem}"
            with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
                made.run_project("destroy", project, state.stem, timeout=300)


def test_the_node_has_its_own_files_network_and_restart(
        cluster: control_plane.ControlPlane, node: tuple[NsNode, Any]) -> None:
    import subprocess

    n, kubelet = node
    host_config = Path(CONFIG).read_bytes() if Path(CONFIG).exists() else None
    n.host(CONFIG).write_text(n.host(CONFIG).read_text() + "# the node's own\n")
    assert (Path(CONFIG).read_bytes() if Path(CONFIG).exists() else None) == host_config
    assert n.daemon is not None and n.daemon.proc is not None
    for ns in ("mnt", "net"):
        theirs = os.readlink(f"/proc/{n.daemon.proc.pid}/ns/{ns}")
        assert theirs == os.readlink(f"/proc/{n.pid}/ns/{ns}") != os.readlink(
            f"/proc/self/ns/{ns}"), f"containerd is not in the node's {ns} namespace"
    assert os.readlink(f"/proc/{kubelet.pid}/ns/mnt") == os.readlink(f"/proc/{n.pid}/ns/mnt")
    restarted = subprocess.run(n.enter("systemctl", "restart", "containerd"),
                               capture_output=True, text=True, check=False)
    assert restarted.returncode == 0 and n.restarts == 1, restarted.stderr
    assert subprocess.run(n.enter("systemctl", "restart", "docker"), capture_output=True,
                          check=False).returncode == 1
    kubelet_node.wait_ready(cluster, NODE, kubelet, n.tmp / "k" / "kubelet.log", 60)


def test_pulumi_up_runs_the_plan_as_is_through_the_pod_to_the_probe_verdict(
        cluster: control_plane.ControlPlane, node: tuple[NsNode, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        engine: pulumi_engine.Engine) -> None:
    from kubernetes import client
    from support import gpu_chain
    from test_kubelet_node import _api
    from test_pulumi_engine import plan_json

    from gpuplane.checks.settings import ChecksSettings

    n, kubelet = node
    for key, value in n.sandbox_env().items():
        monkeypatch.setenv(key, value)      # the engine's providers inherit it
    n.import_image(gpu_chain.build_python_image(
        tmp_path / "python3.tar", name=f"docker.io/library/{ChecksSettings().image}"))
    core = _api(cluster)
    core.patch_node_status(NODE, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
    with contextlib.suppress(client.exceptions.ApiException):
        client.NodeV1Api(core.api_client).delete_runtime_class("nvidia")
    captured = tmp_path / "captured-config.toml"
    captured.write_text(n.host(CONFIG).read_text())
    original = n.snapshot()
    path = pod_stack(tmp_path / "stacks", [NODE], captured, checks=True,
                     runtime_class=True)
    code, plan = plan_json(path, "kind-smoke", capsys)
    assert code == 0, plan["findings"]
    [planned] = [nd for nd in plan["nodes"] if nd["name"] == NODE]
    files = planned["files"]
    assert CONFIG in files, files.keys()

    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        up = engine.run("up", "kind-smoke", stack_file=path, policy_pack=True, timeout=600)
    text = up.stdout + up.stderr
    assert not up.ok, text[-4000:]
    assert f"[FM01] node {NODE}: the CUDA probe found no GPU in its pod" in text, \
        text[-3000:] + "\n" + cluster.explain("gpu-operator") + "\n--- kubelet.log\n" \
        + (n.tmp / "k" / "kubelet.log").read_text(errors="replace")[-1500:]
    assert "no NVIDIA driver (no_driver)" in text and "Traceback" not in text, text[-4000:]
    assert "Exception calling application" not in text, text[-4000:]
    # The agent wrote the plan's files, byte for byte, and restarted containerd once,
    # through systemctl inside the node.
    for node_path, content in files.items():
        assert n.host(node_path).read_text() == content, node_path
    assert n.restarts == 1, n.restarts
    assert "restart containerd" in (n.tmp / "systemctl.log").read_text()
    assert "nvidia" in n.effective()["runtimes"]
    kubelet_node.wait_ready(cluster, NODE, kubelet, n.tmp / "k" / "kubelet.log", 60)
    assert client.NodeV1Api(core.api_client).read_runtime_class("nvidia").handler == "nvidia"
    assert oracle.wrapper_log(n.tmp / "nvidia" / oracle.WRAPPER_NAME).exists(), \
        "the probe's pod did not run through /usr/bin/nvidia-container-runtime"

    again = engine.run("up", "kind-smoke", stack_file=path, policy_pack=True, timeout=600)
    assert not again.ok
    assert sorted(s["name"] for s in again.steps if s["op"] in ("update", "replace")) \
        == ["gpu-checks-nodes-check"], again.steps
    assert n.restarts == 1, "a second up restarted containerd"

    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        down = engine.run("destroy", "kind-smoke", stack_file=path, timeout=600)
    assert down.ok, (down.stdout + down.stderr)[-6000:]
    assert n.snapshot() == original, "destroy did not restore the node byte for byte"
    assert not n.host("/var/lib/gpuplane").exists()
    assert "nvidia" not in n.effective()["runtimes"] and n.restarts == 2
    kubelet_node.wait_ready(cluster, NODE, kubelet, n.tmp / "k" / "kubelet.log", 60)
    assert [j for j in check_jobs(cluster) if j.startswith("gpu-checks-")] == []
    print(json.dumps({"up_to_verdict_s": round(up.seconds, 1),
                      "second_up_s": round(again.seconds, 1),
                      "destroy_s": round(down.seconds, 1), "restarts": n.restarts}))


@pytest.fixture
def nodes(cluster: control_plane.ControlPlane) -> Iterator[dict[str, NsNode]]:
    with running(cluster, ["gpu-ns-a", "gpu-ns-b", "gpu-ns-c"]) as made:
        yield made


def test_pulumi_up_changes_the_canary_first_and_a_new_node_alone(
        cluster: control_plane.ControlPlane, nodes: dict[str, NsNode], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine: pulumi_engine.Engine) -> None:
    """Two nodes, `maxUnavailable: 1` with a canary: `up` restarts each containerd once,
    the canary's before the other's. A node added to the stack is the only one the next
    `up` changes (the others restart nothing); `destroy` restores all three."""
    names = ["gpu-ns-a", "gpu-ns-b", "gpu-ns-c"]
    made = nodes
    monkeypatch.setenv(SANDBOX_ENV, json.dumps({name: n.sandbox() for name, n in made.items()}))
    captured = tmp_path / "captured-config.toml"
    captured.write_text(made["gpu-ns-a"].host(CONFIG).read_text())
    originals = {name: n.snapshot() for name, n in made.items()}

    def stack(members: list[str]) -> Path:
        return pod_stack(tmp_path / f"stacks-{len(members)}", members, captured)

    two = stack(names[:2])
    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        up = engine.run("up", "kind-smoke", stack_file=two, policy_pack=True, timeout=600)
    assert up.ok, (up.stdout + up.stderr)[-6000:]
    a, b, c = (made[name] for name in names)
    assert (a.restarts, b.restarts, c.restarts) == (1, 1, 0)
    assert a.restart_times()[0] < b.restart_times()[0], "the canary was not changed first"

    three = stack(names)
    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        grown = engine.run("up", "kind-smoke", stack_file=three, policy_pack=True, timeout=600)
    assert grown.ok, (grown.stdout + grown.stderr)[-6000:]
    agents = {s["name"]: s["op"] for s in grown.steps
              if s["type"].endswith("gpuplane:NodeAgentPod")}
    assert agents.get("containerd-gpu-ns-c") == "create", agents
    assert {k: v for k, v in agents.items() if k != "containerd-gpu-ns-c"} in (
        {}, {"containerd-gpu-ns-a": "same", "containerd-gpu-ns-b": "same"}), agents
    assert (a.restarts, b.restarts, c.restarts) == (1, 1, 1)
    for n in (a, b, c):
        assert "nvidia" in n.effective()["runtimes"]

    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        down = engine.run("destroy", "kind-smoke", stack_file=three, timeout=600)
    assert down.ok, (down.stdout + down.stderr)[-6000:]
    for name, n in made.items():
        assert n.snapshot() == originals[name], f"{name} is not restored byte for byte"
        assert n.restarts == 2, (name, n.restarts)
    print(json.dumps({"two_nodes_up_s": round(up.seconds, 1),
                      "third_node_up_s": round(grown.seconds, 1),
                      "destroy_three_s": round(down.seconds, 1)}))


DRIFT = '\n[debug]\n  level = "info"\n'


def test_a_file_edited_on_the_node_is_reported_by_preview_refresh_and_never_overwritten(
        cluster: control_plane.ControlPlane, node: tuple[NsNode, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine: pulumi_engine.Engine) -> None:
    """After `up`, a setting added by hand to the node's config: `pulumi preview --refresh`
    reads the agent's status through a pod (the drifted file) and plans to run the node's
    agent again; `up --refresh` runs it, the agent refuses to overwrite the edit (FM05)
    and `up` fails naming the file, no traceback, nothing restarted. With the edit taken
    back, `up --refresh` succeeds restarting nothing, and `destroy` restores byte for
    byte."""
    n, kubelet = node
    for key, value in n.sandbox_env().items():
        monkeypatch.setenv(key, value)
    captured = tmp_path / "captured-config.toml"
    captured.write_text(n.host(CONFIG).read_text())
    original = n.snapshot()
    path = pod_stack(tmp_path / "stacks", [NODE], captured)
    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        up = engine.run("up", "kind-smoke", stack_file=path, timeout=600)
    assert up.ok and n.restarts == 1, (up.stdout + up.stderr)[-4000:]
    written = n.host(CONFIG).read_text()

    quiet = engine.run("preview", "kind-smoke", stack_file=path, refresh=True)
    assert quiet.ok, quiet.stdout[-4000:]
    assert _op(quiet, f"containerd-{NODE}") in ("same", "refresh", None), quiet.steps

    n.host(CONFIG).write_text(written + DRIFT)
    seen = engine.run("preview", "kind-smoke", stack_file=path, refresh=True)
    assert seen.ok, seen.stdout[-4000:]
    assert _op(seen, f"containerd-{NODE}") == "update", seen.steps
    assert CONFIG in seen.stdout, seen.stdout[-4000:]       # the refreshed driftedFiles

    refused = engine.run("up", "kind-smoke", stack_file=path, refresh=True, timeout=600)
    text = refused.stdout + refused.stderr
    assert not refused.ok, text[-4000:]
    assert "FM05" in text and CONFIG in text and "Traceback" not in text, text[-4000:]
    assert n.host(CONFIG).read_text() == written + DRIFT, "the edit was overwritten"
    assert n.restarts == 1

    n.host(CONFIG).write_text(written)
    back = engine.run("up", "kind-smoke", stack_file=path, refresh=True, timeout=600)
    assert back.ok, (back.stdout + back.stderr)[-4000:]
    assert n.restarts == 1, "taking the edit back restarted containerd"
    with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
        down = engine.run("destroy", "kind-smoke", stack_file=path, timeout=600)
    assert down.ok, (down.stdout + down.stderr)[-4000:]
    assert n.snapshot() == original
    kubelet_node.wait_ready(cluster, NODE, kubelet, n.tmp / "k" / "kubelet.log", 60)


def _op(result: pulumi_engine.Result, name: str) -> str | None:
    """The last step of resource `name` (a refresh step comes before the update's)."""
    ops = [s["op"] for s in result.steps if s["name"] == name]
    return ops[-1] if ops else None


SSH_STACK = """\
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.34.3"
    containerdVersion: "{line}"
    nodeAccess: ssh
    kubeletCgroupDriver: cgroupfs
  gpuplane:ssh: {{user: root, port: {port}}}
  gpuplane:sshPrivateKey: {{secure: v1:x}}
  gpuplane:nodes:
    - {{name: {name}, host: {name}, gpus: 1}}
  gpuplane:gpuOperator: {{chartVersion: v25.10.1, toolkit: host}}
  gpuplane:runtime: {{createRuntimeClass: true, systemdCgroup: false}}
"""


def test_over_the_nodes_sshd_capture_plan_apply_drift_and_restore_with_its_own_paths(
        cluster: control_plane.ControlPlane, node: tuple[NsNode, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Over the node's real sshd (in the node's mount namespace, on 127.0.0.1), with no
    sandbox option anywhere: `gpuplane nodes capture` fills `baselineFiles` from the
    node's /etc/containerd; `gpuplane plan` of that stack gives the SSH commands; what
    Pulumi's command provider would do with them (issue #27: it cannot be built here) is
    done by hand: the CopyToRemote's upload over SFTP, the Command's `create` with its
    `stdin`. The agent writes the planned files, `systemctl restart containerd` runs once
    in the node, the node stays Ready and serves the nvidia runtime; a second apply
    restarts nothing; a setting added by hand is reported by the agent's `status` and
    the next apply refuses to overwrite it (FM05); the Command's `delete` gives every
    file back byte for byte, and the node is Ready."""
    import shlex
    import subprocess

    import yaml
    from support.agent_node import parse_result
    from test_capture import start_sshd

    from gpuplane.agent.script import AGENT_PATH, agent_source
    from gpuplane.cli.main import main as gpuplane

    n, kubelet = node
    server, sshd = start_sshd(tmp_path, n.enter(net=False))
    log = n.tmp / "k" / "kubelet.log"

    def ssh(command: str, stdin: str = "") -> Any:
        done = subprocess.run(
            ["ssh", "-F", str(server.config), "-i", str(server.key), "-p", str(server.port),
             "-o", "BatchMode=yes", f"root@{NODE}", command],
            input=stdin, capture_output=True, text=True, timeout=180, check=False)
        return parse_result(done.returncode, done.stdout, done.stderr)

    try:
        original = n.snapshot()
        (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
        stacks = tmp_path / "stacks"
        stacks.mkdir()
        stack = stacks / "Pulumi.ssh.yaml"
        stack.write_text(SSH_STACK.format(line=LINE, port=server.port, name=NODE))
        code = gpuplane(["nodes", "capture", "--stack", "ssh", "--stacks-dir", str(stacks),
                         "--ssh-config", str(server.config), "--identity", str(server.key)])
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        captured = yaml.safe_load(stack.read_text())["config"]["gpuplane:cluster"][
            "baselineFiles"]
        assert {p: (tmp_path / local).read_text() for p, local in captured.items()} == \
            {p: n.host(p).read_text() for p in captured}
        assert CONFIG in captured, captured

        code = gpuplane(["plan", "--stack", "ssh", "--stacks-dir", str(stacks),
                         "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 0, report.get("findings")
        planned = report["nodes"][0]["files"]
        resources = {r["name"]: r for r in report["resources"]}
        copy = resources[f"gpuplane-agent-copy-{NODE}"]["inputs"]
        command = resources[f"containerd-{NODE}"]["inputs"]

        upload = tmp_path / "agent-upload.sh"
        upload.write_text(agent_source())
        sent = subprocess.run(
            ["sftp", "-F", str(server.config), "-i", str(server.key), "-P",
             str(server.port), "-b", "-", f"root@{NODE}"],
            input=f"put {upload} {copy['remotePath']}\n", capture_output=True, text=True,
            timeout=60, check=False)
        assert sent.returncode == 0, sent.stderr
        applied = ssh(command["create"], command["stdin"])
        assert applied.rc == 0, applied.err
        assert n.restarts == 1 and "restart containerd" in (n.tmp / "systemctl.log").read_text()
        kubelet_node.wait_ready(cluster, NODE, kubelet, log, 60)
        for path, text in planned.items():
            assert n.host(path).read_text() == text, path
        assert "nvidia" in n.effective()["runtimes"]
        again = ssh(command["create"], command["stdin"])
        assert again.rc == 0 and n.restarts == 1, again.err

        written = n.host(CONFIG).read_text()
        n.host(CONFIG).write_text(written + DRIFT)
        status = ssh(f"sh {shlex.quote(AGENT_PATH)} status")
        assert status.rc == 0 and status.out["drift"] is True, status
        assert status.out["drifted_files"] == [CONFIG], status.out
        refused = ssh(command["create"], command["stdin"])
        assert refused.rc != 0 and "FM05" in refused.err, refused
        assert n.host(CONFIG).read_text() == written + DRIFT, "the edit was overwritten"
        assert n.restarts == 1
        n.host(CONFIG).write_text(written)          # the edit undone by its owner

        restored = ssh(command["delete"])
        assert restored.rc == 0, restored.err
        assert n.restarts == 2 and n.snapshot() == original
        assert not n.host("/var/lib/gpuplane").exists()
        kubelet_node.wait_ready(cluster, NODE, kubelet, log, 60)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)


def test_each_containerd_line_takes_the_plan_through_the_pod_and_stays_ready(
        cluster: control_plane.ControlPlane, containerd_line: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On every containerd line (Debian's 1.6 and 1.7, 2.x from the module builds): the
    kubeadm node's plan for that line, made from its captured files, goes through the
    agent's pod (gpuplane's provider, as `pulumi up` runs it): containerd restarts once
    through `systemctl`, serves the nvidia runtime, the node is Ready; delete restores
    the files byte for byte and the node is Ready."""
    from support import agent_pod

    from gpuplane.agent.script import agent_plan
    from gpuplane.containerd import ContainerdVersion
    from gpuplane.plan.node import plan_node
    from gpuplane.stack.node_pod import NodeAgentPodProvider
    from gpuplane.toolkit.options import PlanOptions, ToolkitMode

    name = f"gpu-ns-{containerd_line.replace('.', '-')}"
    with running(cluster, [name], containerd_line) as made:
        n = made[name]
        kubelet = n.kubelet
        assert kubelet is not None
        monkeypatch.setenv(SANDBOX_ENV, json.dumps(n.sandbox()))
        with contextlib.suppress(Exception):
            agent_pod.namespace(cluster, "gpuplane-nodes", "privileged")
        current = {CONFIG: n.host(CONFIG).read_text()}
        plan = agent_plan(plan_node(profile(Distro.KUBEADM),
                                    ContainerdVersion.parse(containerd_line),
                                    PlanOptions(toolkit=ToolkitMode.HOST,
                                                systemd_cgroup=False), current))
        original = n.snapshot()
        provider = NodeAgentPodProvider()
        provider.client_factory = lambda *_: agent_pod.client(cluster)
        provider.poll_seconds = 0.5
        props = {"node": name, "namespace": "gpuplane-nodes", "image": agent_pod.IMAGE,
                 "timeoutSeconds": 120, "planId": plan.plan_id,
                 "program": agent_pod.plan_program(cluster, "gpuplane-nodes", plan),
                 "tries": 3, "kubeconfig": None}
        outs = provider.create(props).outs
        assert outs["error"] is None, outs["error"]
        for path, text in plan.files.items():
            assert n.host(path).read_text() == text, path
        assert n.restarts == 1 and "nvidia" in n.effective()["runtimes"]
        log = n.tmp / "k" / "kubelet.log"
        kubelet_node.wait_ready(cluster, name, kubelet, log, 60)
        provider.delete("id", outs)
        assert n.snapshot() == original and n.restarts == 2
        assert "nvidia" not in n.effective()["runtimes"]
        kubelet_node.wait_ready(cluster, name, kubelet, log, 60)
