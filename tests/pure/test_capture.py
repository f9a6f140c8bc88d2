"""`gpuplane nodes capture` against a real sshd on 127.0.0.1: each node is a host alias of
the test's own sshd, whose files live under a per-node root (`--remote-root`), and whose
`containerd` is the real build for its line (tests/support/oracle.py)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from support.oracle import binary, unavailable

from gpuplane.capture.remote import capture_script, parse_answer
from gpuplane.capture.stackedit import updated_text
from gpuplane.cli.main import main
from gpuplane.distros.profiles import profile

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "/etc/containerd/config.toml"
MIRROR = "/etc/containerd/conf.d/50-mirror.toml"

CAPTURED = """\
# written by the site's provisioning, 2026-11-02
version = 2
root = "/data/containerd"
state = "/run/containerd"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
"""

DROPIN = """\
version = 2

[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.example.internal"]
"""

STACK = """\
# Lab cluster: kubeadm nodes with the site's own containerd config.
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.31.4"   # keep in step with the control plane
    containerdVersion: "1.7"
    kubeletCgroupDriver: systemd
  # how gpuplane reaches the nodes
  gpuplane:ssh: {user: USER, port: PORT}
  gpuplane:sshPrivateKey: {secure: v1:x}
  gpuplane:nodes:
NODES  gpuplane:runtime: {systemdCgroup: true}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
"""


@dataclass
class Sshd:
    port: int
    key: Path
    config: Path        # the client's config: every node name is an alias of 127.0.0.1
    roots: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """A throw-away sshd on 127.0.0.1 accepting one key for the current user."""
    server, proc = start_sshd(tmp_path)
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def start_sshd(tmp_path: Path, prefix: Sequence[str] = ()
               ) -> tuple[Sshd, subprocess.Popen[bytes]]:
    """The sshd of `sshd`, started through `prefix` (tests/support/ns_node.py: in a node's mount
    namespace); the caller stops the process."""
    daemon = shutil.which("sshd") or "/usr/sbin/sshd"
    if not (os.access(daemon, os.X_OK) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        unavailable("no sshd/ssh (openssh-server, openssh-client: scripts/fetch-containerd.sh)")
    d = tmp_path / "sshd"
    d.mkdir()
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        # The test's key for the current user; a test-made user's own ~/.ssh (sudo test).
        f"AuthorizedKeysFile {d / 'authorized_keys'} .ssh/authorized_keys\n"
        "PidFile none\nStrictModes no\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nLogLevel ERROR\n"
        # The command provider's CopyToRemote uploads over SFTP.
        "Subsystem sftp internal-sftp\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # privilege separation dir
    proc = subprocess.Popen([*prefix, daemon, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    assert proc.stderr is not None
                    unavailable(f"sshd did not start: {proc.stderr.read().decode()[-300:]}")
                time.sleep(0.05)
        host_key = (d / "host.pub").read_text().split()[:2]
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
        (d / "ssh_config").write_text(
            "Host *\n  HostName 127.0.0.1\n  StrictHostKeyChecking yes\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n  LogLevel ERROR\n")
    except BaseException:
        proc.terminate()
        proc.wait(timeout=10)
        raise
    return Sshd(port, d / "client", d / "ssh_config", tmp_path / "roots"), proc


def node_root(sshd: Sshd, name: str, files: dict[str, str | bytes], line: str = "1.7",
              containerd: str = "/usr/bin/containerd") -> None:
    """A sandboxed node: its files under roots/NAME, and the real containerd of `line`."""
    root = sshd.roots / name
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    (root / containerd.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / containerd.lstrip("/")).symlink_to(binary(line))


def project(tmp_path: Path, sshd: Sshd, nodes: list[str]) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = (STACK.replace("USER", getpass.getuser()).replace("PORT", str(sshd.port))
            .replace("NODES", "".join(f"    - {n}\n" for n in nodes)))
    (stacks / "Pulumi.t.yaml").write_text(text)
    return stacks


def capture(capsys: pytest.CaptureFixture[str], sshd: Sshd, stacks: Path) -> tuple[int, str]:
    code = main(["nodes", "capture", "--stack", "t", "--stacks-dir", str(stacks),
                 "--identity", str(sshd.key), "--ssh-config", str(sshd.config),
                 "--remote-root", str(sshd.roots / "{node}")])
    out = capsys.readouterr()
    return code, out.out + out.err


def copies_in(folder: Path) -> list[Path]:
    """The file copies in a capture's folder (not its per-node binaries records)."""
    return [p for p in folder.iterdir() if not p.name.endswith(".binaries.json")]


def stack_values(stacks: Path) -> dict:
    return yaml.safe_load((stacks / "Pulumi.t.yaml").read_text())["config"]


def test_capture_then_plan_from_the_nodes_own_files(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:
    for name in ("a1", "a2"):
        node_root(sshd, name, {CONFIG: CAPTURED})
    node_root(sshd, "b1", {CONFIG: CAPTURED, MIRROR: DROPIN})
    stacks = project(tmp_path, sshd, ["{name: a1, host: a1, gpus: 8}",
                                      "{name: a2, host: a2, gpus: 8}",
                                      "{name: b1, host: b1, gpus: 4}"])
    before = (stacks / "Pulumi.t.yaml").read_text()
    code, out = capture(capsys, sshd, stacks)
    assert code == 0, out
    assert "b1  ok      containerd 1.7." in out and "2 files, 1 new" in out
    copies = sorted(p.name for p in copies_in(stacks / "captured" / "t"))
    assert len(copies) == 2 and copies[0].endswith(("-config.toml", "-50-mirror.toml"))
    after = (stacks / "Pulumi.t.yaml").read_text()
    # Comments, quoting and order kept; only the nodes' lines gained baselineFiles.
    for kept in ("# Lab cluster: kubeadm nodes", '"1.31.4"   # keep in step',
                 "  # how gpuplane reaches the nodes", '    containerdVersion: "1.7"'):
        assert kept in after
    assert [ln for ln in after.splitlines() if "{name:" not in ln] == \
        [ln for ln in before.splitlines() if "{name:" not in ln]
    nodes = stack_values(stacks)["gpuplane:nodes"]
    config_copy = nodes[0]["baselineFiles"][CONFIG]
    assert config_copy.startswith("stacks/captured/t/") and (tmp_path / config_copy).is_file()
    assert nodes[0]["baselineFiles"] == nodes[1]["baselineFiles"] == {CONFIG: config_copy}
    assert set(nodes[2]["baselineFiles"]) == {CONFIG, MIRROR}
    assert "baselineFiles" not in stack_values(stacks)["gpuplane:cluster"]

    # The plan starts from the captured files: the node's root and b1's mirror drop-in.
    code = main(["plan", "--stack", "t", "--stacks-dir", str(stacks), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    a1, _, b1 = report["nodes"]
    # b1's mirror drop-in is planned from, and its real consequence on containerd 1.7 is
    # found (FM02: it replaces the CRI table of config.toml); the model alone has no drop-in.
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert code == 1 and errors and all("b1" in f["where"] for f in errors)
    assert any(f["id"] == "FM02" and MIRROR in f["where"] for f in errors)
    assert a1["baselineFiles"] == {CONFIG: config_copy}
    # The planned config keeps the node's own root (withheld while the plan has errors).
    for node in (a1, b1):
        planned = {**node["files"], **node.get("withheldFiles", {})}[CONFIG]
        assert 'root = "/data/containerd"' in planned
        assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in planned
    assert b1["baselineFiles"][MIRROR].startswith("stacks/captured/t/")

    # A rerun finds nothing new: same bytes, no new copies.
    code, out = capture(capsys, sshd, stacks)
    assert code == 0 and "unchanged" in out and out.count("files, 0 new") == 3
    assert (stacks / "Pulumi.t.yaml").read_text() == after
    assert sorted(p.name for p in copies_in(stacks / "captured" / "t")) == copies


def test_nodes_with_the_same_files_share_the_cluster_entry(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:
    for name in ("a1", "a2"):
        node_root(sshd, name, {CONFIG: CAPTURED, MIRROR: DROPIN})
    stacks = project(tmp_path, sshd, ["name: a1\n      host: a1\n      gpus: 8",
                                      "name: a2\n      host: a2\n      gpus: 8"])
    code, out = capture(capsys, sshd, stacks)
    assert code == 0, out
    values = stack_values(stacks)
    assert set(values["gpuplane:cluster"]["baselineFiles"]) == {CONFIG, MIRROR}
    assert all("baselineFiles" not in n for n in values["gpuplane:nodes"])
    assert len(copies_in(stacks / "captured" / "t")) == 2   # one copy per content


def test_bad_nodes_are_reported_and_the_others_captured(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:
    node_root(sshd, "good", {CONFIG: CAPTURED})
    node_root(sshd, "big", {CONFIG: CAPTURED, MIRROR: "#" * (1024 * 1024 + 1)})
    node_root(sshd, "latin1", {CONFIG: CAPTURED, MIRROR: b"# caf\xe9\nversion = 2\n"})
    node_root(sshd, "newer", {CONFIG: CAPTURED}, line="2.1")
    node_root(sshd, "cgroupfs", {CONFIG: CAPTURED,
                                 "/var/lib/kubelet/config.yaml": "cgroupDriver: cgroupfs\n"})
    node_root(sshd, "rke2", {}, containerd="/var/lib/rancher/rke2/bin/containerd")
    closed = _free_port()
    stacks = project(tmp_path, sshd, [
        "{name: good, host: good}", "{name: big, host: big}",
        "{name: latin1, host: latin1}", "{name: newer, host: newer}",
        "{name: cgroupfs, host: cgroupfs}", "{name: rke2, host: rke2}",
        f"{{name: down, host: down, port: {closed}}}",
        "{name: denied, host: denied, user: no-such-user}"])
    code, out = capture(capsys, sshd, stacks)
    assert code == 1, out
    assert "  good      ok      containerd 1.7." in out
    assert f"{MIRROR}: 1048577 bytes, over the 1048576 byte limit" in out
    assert f"{MIRROR}:1: not UTF-8 text (byte 0xe9)" in out
    assert ('gpuplane:cluster.containerdVersion is "1.7" but the node runs containerd 2.1'
            in out) and 'set cluster.containerdVersion: "2.1"' in out
    assert ("gpuplane:cluster.kubeletCgroupDriver is systemd (set) but the node's kubelet "
            "uses cgroupfs (/var/lib/kubelet/config.yaml)") in out
    assert ("gpuplane:cluster.distro is kubeadm but the node has no /usr/bin/containerd; it "
            "has the containerd of rke2: set cluster.distro: rke2") in out
    assert f"ssh {getpass.getuser()}@down:{closed}: " in out and "Connection refused" in out
    assert "ssh no-such-user@denied:" in out and "Permission denied (publickey)" in out
    assert ("7 of 8 nodes not captured: big, latin1, newer, cgroupfs, rke2, down, denied"
            in out)
    nodes = stack_values(stacks)["gpuplane:nodes"]
    assert set(nodes[0]["baselineFiles"]) == {CONFIG}
    assert all("baselineFiles" not in n for n in nodes[1:])
    assert len(copies_in(stacks / "captured" / "t")) == 1   # only good's file


def test_a_node_without_a_top_level_config_is_recorded_as_null_and_planned(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:
    """No config.toml: containerd runs on its defaults. Capture records that (`null`), so
    the plan starts from it, not from gpuplane's model of the distribution (#39)."""
    node_root(sshd, "bare", {MIRROR: DROPIN})
    stacks = project(tmp_path, sshd, ["{name: bare, host: bare, gpus: 8}"])
    code, out = capture(capsys, sshd, stacks)
    assert code == 0, out
    assert f"1 files, 1 new, absent: {CONFIG}" in out
    text = (stacks / "Pulumi.t.yaml").read_text()
    assert f"{CONFIG}: null" in text
    files = stack_values(stacks)["gpuplane:cluster"]["baselineFiles"]
    assert files[CONFIG] is None and files[MIRROR].startswith("stacks/captured/t/")

    code = main(["plan", "--stack", "t", "--stacks-dir", str(stacks), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    (bare,) = report["nodes"]
    assert bare["baselineFiles"][CONFIG] is None
    planned = {**bare["files"], **bare.get("withheldFiles", {})}
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in planned[CONFIG]


# Without sshd: the framing, the edit and bad input.

def test_the_answer_names_each_bad_file() -> None:
    prof = profile("kubeadm")
    script = capture_script(prof, "/srv/n1")
    assert "R=/srv/n1" in script and '"$R"/etc/containerd/conf.d/*.toml' in script
    report = parse_answer("MISSING /etc/containerd/config.toml\nDENIED /etc/x.toml\n"
                          "FILE /etc/y.toml 3\nAAEC\nEND\nVERSION containerd x 1.7.2 y\n")
    assert report.missing == ("/etc/containerd/config.toml",)
    assert report.version_output == "containerd x 1.7.2 y" and report.files == {}
    assert "/etc/x.toml: permission denied (set ssh.sudo: true" in report.problems[0]
    assert "/etc/y.toml: binary (NUL bytes)" in report.problems[1]
    assert "no `containerd --version` answer" in parse_answer("FILE /a 1\n").problems[-1]


def test_the_edit_keeps_comments_and_flow_style() -> None:
    text = ("config:\n  # first\n  gpuplane:cluster:\n    distro: kubeadm  # d\n"
            "    baselineFiles: {/etc/containerd/config.toml: old.toml}\n"
            "  gpuplane:nodes:\n    - {name: a, host: a}  # the A node\n"
            "    - name: b\n      host: b\n")
    new = updated_text(text, {0: {CONFIG: "x.toml"}, 1: {CONFIG: "y.toml"}}, 2)
    assert new == ("config:\n  # first\n  gpuplane:cluster:\n    distro: kubeadm  # d\n"
                   "  gpuplane:nodes:\n"
                   "    - {name: a, host: a, baselineFiles: {/etc/containerd/config.toml: "
                   "x.toml}} # the A node\n"
                   "    - name: b\n      host: b\n      baselineFiles:\n"
                   "        /etc/containerd/config.toml: y.toml\n")
    # A node without the file: null, spelt out.
    absent = updated_text(text, {0: {CONFIG: None}, 1: {CONFIG: None}}, 2)
    assert "    baselineFiles:\n      /etc/containerd/config.toml: null\n" in absent
    # Only node 1 captured: the cluster entry stays for node 0.
    kept = updated_text(text, {1: {CONFIG: "y.toml"}}, 2)
    assert "baselineFiles: {/etc/containerd/config.toml: old.toml}" in kept


def test_a_stack_without_node_access_is_bad_input(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.t.yaml").write_text(
        "config:\n  gpuplane:cluster: {kubernetesVersion: \"1.31.4\", containerdVersion: "
        "\"1.7\", nodeAccess: none}\n  gpuplane:gpuOperator: {chartVersion: v25.10.1}\n"
        "  gpuplane:nodes: [{name: a1}]\n")
    code = main(["nodes", "capture", "--stack", "t", "--stacks-dir", str(stacks)])
    err = capsys.readouterr().err
    assert code == 2 and "gpuplane:cluster.nodeAccess is none" in err
    assert "--via kubernetes" in err
    assert main(["nodes", "capture", "--stack", "nope", "--stacks-dir", str(stacks)]) == 2
    assert "no such stack file" in capsys.readouterr().err


# The way in without SSH: a capture pod per node, against a recorded Kubernetes API.

POD_STACK = """\
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.31.4"
    containerdVersion: "1.7"
    nodeAccess: none   # no SSH into this cluster
  gpuplane:nodes:
    - {name: gpu-1, gpus: 8}
    - {name: gpu-2, gpus: 8}
    - {name: gpu-3, gpus: 8}
    - {name: gpu-4, gpus: 8}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
"""


class PodApi:
    """Just the API calls a capture pod makes. A pod 'runs' by executing its own command
    with the node's sandbox root in place of `chroot /host` (the script's R= line), so the
    log is what the script prints there; some nodes answer with recorded failures."""

    def __init__(self, roots: Path, forbidden: set[str], failing: set[str]):
        self.roots, self.forbidden, self.failing = roots, forbidden, failing
        self.calls: list[tuple[str, str]] = []
        self.pods: dict[str, dict] = {}

    def post(self, path: str, body: dict) -> dict:
        from gpuplane.kube.client import ApiError

        self.calls.append(("POST", path))
        kubernetes_validate.validate(body, "1.31", strict=True)
        if body["spec"]["nodeName"] in self.forbidden:
            raise ApiError(403, "POST", path, 'pods is forbidden: User "dev" cannot create '
                           'resource "pods" in API group "" in the namespace "kube-system"')
        self.pods[body["metadata"]["name"]] = body
        return body

    def get(self, path: str, params: dict | None = None) -> dict:
        self.calls.append(("GET", path))
        if path.startswith("/api/v1/nodes/"):   # capture reads the Node: a self-managed one
            return {"metadata": {"name": path.rsplit("/", 1)[1], "labels": {}},
                    "status": {"nodeInfo": {"osImage": "Ubuntu 22.04.4 LTS"}}}
        node = self.pods[path.rsplit("/", 1)[1]]["spec"]["nodeName"]
        return {"status": {"phase": "Failed" if node in self.failing else "Succeeded"}}

    def get_text(self, path: str, params: dict | None = None) -> str:
        self.calls.append(("LOG", path))
        pod = self.pods[path.split("/")[-2]]
        node = pod["spec"]["nodeName"]
        if node in self.failing:
            return "chroot: can't execute '/bin/sh': No such file or directory\n"
        command = pod["spec"]["containers"][0]["command"]
        assert command[:4] == ["chroot", "/host", "/bin/sh", "-c"]
        script = command[4].replace("R=''", f"R={self.roots / node}", 1)
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                              check=True).stdout

    def delete(self, path: str) -> None:
        self.calls.append(("DELETE", path))


def test_capture_through_the_kubernetes_api(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    roots = tmp_path / "roots"
    sandbox = Sshd(0, tmp_path, tmp_path, roots)   # only its roots are used
    for name in ("gpu-1", "gpu-2"):
        node_root(sandbox, name, {CONFIG: CAPTURED, MIRROR: DROPIN})
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.t.yaml").write_text(POD_STACK)
    api = PodApi(roots, forbidden={"gpu-3"}, failing={"gpu-4"})
    monkeypatch.setattr("gpuplane.capture.command._client", lambda *_: api)
    code = main(["nodes", "capture", "--stack", "t", "--stacks-dir", str(stacks),
                 "--via", "kubernetes"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1, text
    assert "gpu-1  ok      containerd 1.7." in text and "gpu-2  ok" in text
    assert ("capture pod on gpu-3: forbidden: needs permission to create pods in namespace "
            "kube-system") in text
    assert ("capture pod on gpu-4 ended Failed: chroot: can't execute '/bin/sh'") in text
    assert "2 of 4 nodes not captured: gpu-3, gpu-4" in text
    nodes = stack_values(stacks)["gpuplane:nodes"]
    assert set(nodes[0]["baselineFiles"]) == {CONFIG, MIRROR} == set(nodes[1]["baselineFiles"])
    assert "# no SSH into this cluster" in (stacks / "Pulumi.t.yaml").read_text()
    # Every pod is deleted before and after its run, whatever happened.
    pods = "/api/v1/namespaces/kube-system/pods"
    for name in {p.rsplit("/", 1)[1] for _, p in api.calls if p.startswith(pods + "/")}:
        deletes = [c for c in api.calls if c == ("DELETE", f"{pods}/{name}")]
        assert len(deletes) == 2 or name not in api.pods


def test_the_ssh_command_line_follows_the_stack() -> None:
    from gpuplane.capture.ssh import Target, ssh_argv

    argv = ssh_argv(Target("10.0.0.5", "ubuntu", 2222, sudo=True), Path("k"), Path("cfg"))
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "ubuntu"
    assert argv[argv.index("-i") + 1] == "k" and argv[argv.index("-F") + 1] == "cfg"
    assert argv[-3:] == ["--", "10.0.0.5", "sudo -n sh -s"]
    assert ssh_argv(Target("h", "root", 22, sudo=False))[-1] == "sh -s"
