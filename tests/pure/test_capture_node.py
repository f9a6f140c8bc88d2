"""`gpuplane nodes capture`: the node's role (its distribution's units), the kubelet
cgroup driver where each distribution states it, `ssh.sudo: true` as a non-root user, and
the SSH key from the stack's Pulumi secret. The SSH tests run the real script over the real
sshd of tests/pure/test_capture.py on sandboxed node roots with the real containerd builds."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.oracle import binary, unavailable
from test_capture import (  # noqa: F401
    CAPTURED,
    CONFIG,
    ROOT,
    PodApi,
    Sshd,
    copies_in,
    node_root,
    sshd,
)

from gpuplane.capture.remote import capture_script, parse_answer
from gpuplane.cli.main import main
from gpuplane.distros.profiles import Distro, profile
from gpuplane.rules.kubelet_node import node_role, stated_driver

# --- Files shaped like each distribution's own --------------------------------------

# kubeadm's KubeletConfiguration (/var/lib/kubelet/config.yaml), as `kubeadm init` writes it.
KUBEADM_KUBELET = """\
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
cgroupDriver: {driver}
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
kind: KubeletConfiguration
"""
# k8sd's args file (one `--flag=value` a line; canonical/k8s-snap setup/kubelet.go).
K8S_SNAP_ARGS = """\
--anonymous-auth=false
--authentication-token-webhook=true
--cert-dir=/etc/kubernetes/pki
--client-ca-file=/etc/kubernetes/pki/client-ca.crt
--container-runtime-endpoint=/run/containerd/containerd.sock
--containerd=/run/containerd/containerd.sock
--eviction-hard='memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi'
--fail-swap-on=false
--kubeconfig=/etc/kubernetes/kubelet.conf
--node-labels=node-role.kubernetes.io/worker=
--read-only-port=0
--root-dir=/var/lib/kubelet
"""
# MicroK8s's default args file (microk8s-resources/default-args/kubelet).
MICROK8S_ARGS = """\
--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--cert-dir=${SNAP_DATA}/certs
--client-ca-file=${SNAP_DATA}/certs/ca.crt
--anonymous-auth=false
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--fail-swap-on=false
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"
--container-runtime-endpoint=${SNAP_COMMON}/run/containerd.sock
--containerd=${SNAP_COMMON}/run/containerd.sock
--node-labels="microk8s.io/cluster=true"
--authentication-token-webhook=true
--read-only-port=0
"""
# k0s's kubelet-config.yaml (a marshalled KubeletConfiguration: keys sorted).
K0S_KUBELET = """\
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  x509:
    clientCAFile: /var/lib/k0s/pki/ca.crt
{driver_line}cgroupsPerQOS: true
containerRuntimeEndpoint: unix:///run/k0s/containerd.sock
kind: KubeletConfiguration
kubeReservedCgroup: system.slice
kubeletCgroups: /system.slice/containerd.service
resolvConf: /etc/resolv.conf
volumePluginDir: /usr/libexec/k0s/kubelet-plugins/volume/exec
"""
# RKE2/K3s config.yaml as an operator writes it.
RANCHER_CONFIG = """\
server: https://10.0.0.10:9345
token: K10abc::server:def
node-label:
  - "nvidia.com/gpu.present=true"
kubelet-arg:
  - "max-pods=250"
{arg}"""

# distro -> (node path, text stating cgroupfs, text that states nothing, containerd binary)
STATED = {
    "kubeadm": ("/var/lib/kubelet/config.yaml", KUBEADM_KUBELET.format(driver="cgroupfs"),
                KUBEADM_KUBELET.replace("cgroupDriver: {driver}\n", "")),
    "k8s-snap": ("/var/snap/k8s/common/args/kubelet",
                 K8S_SNAP_ARGS + "--cgroup-driver=cgroupfs\n", K8S_SNAP_ARGS),
    "microk8s": ("/var/snap/microk8s/current/args/kubelet",
                 MICROK8S_ARGS + "--cgroup-driver cgroupfs\n", MICROK8S_ARGS),
    "k0s": ("/var/lib/k0s/kubelet-config.yaml",
            K0S_KUBELET.format(driver_line="cgroupDriver: cgroupfs\n"),
            K0S_KUBELET.format(driver_line="")),
    "rke2": ("/etc/rancher/rke2/config.yaml",
             RANCHER_CONFIG.format(arg='  - "cgroup-driver=cgroupfs"\n'),
             RANCHER_CONFIG.format(arg="")),
    "k3s": ("/etc/rancher/k3s/config.yaml",
            RANCHER_CONFIG.format(arg="  - --cgroup-driver=cgroupfs\n"),
            RANCHER_CONFIG.format(arg="")),
}

STACK = """\
config:
  gpuplane:cluster:
    distro: {distro}
    kubernetesVersion: "1.31.4"
    containerdVersion: "1.7"
    kubeletCgroupDriver: systemd   # what the site says its kubelets use
  gpuplane:ssh: {ssh}
  gpuplane:sshPrivateKey: {{secure: v1:x}}
  gpuplane:nodes:
{nodes}  gpuplane:gpuOperator: {{chartVersion: v25.10.1}}
"""


def write_stack(tmp_path: Path, distro: str, nodes: list[str], ssh: str) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    (stacks / "Pulumi.t.yaml").write_text(STACK.format(
        distro=distro, ssh=ssh, nodes="".join(f"    - {n}\n" for n in nodes)))
    return stacks


def run_capture(capsys: pytest.CaptureFixture[str], stacks: Path, sshd: Sshd,  # noqa: F811
                roots: Path, *extra: str, identity: bool = True) -> tuple[int, str]:
    argv = ["nodes", "capture", "--stack", "t", "--stacks-dir", str(stacks),
            "--ssh-config", str(sshd.config), "--remote-root", str(roots / "{node}"), *extra]
    if identity:
        argv += ["--identity", str(sshd.key)]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def running(root: Path, unit: str, pids: str = "4242\n", v1: bool = False) -> None:
    """A unit's control group under a sandboxed node root, as systemd lays it out."""
    base = root / "sys/fs/cgroup" / ("systemd" if v1 else "")
    d = base / "system.slice" / f"{unit}.service"
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.procs").write_text(pids)


# --- 1. The node's role -------------------------------------------------------------

def test_the_role_is_read_from_the_units_that_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:  # noqa: F811
    rke2 = "/var/lib/rancher/rke2/bin/containerd"
    for name in ("agent", "server", "both", "nocgroup", "idle"):
        node_root(sshd, name, {}, containerd=rke2)
    running(sshd.roots / "agent", "rke2-agent")
    running(sshd.roots / "agent", "rke2-server", pids="")          # stopped: no process
    # cgroup v1 (systemd's named hierarchy), a process in a delegated sub-group.
    running(sshd.roots / "server", "rke2-server", v1=True)
    sub = sshd.roots / "server/sys/fs/cgroup/systemd/system.slice/rke2-server.service/x"
    sub.mkdir()
    (sub / "cgroup.procs").write_text("77\n")
    running(sshd.roots / "both", "rke2-agent")
    running(sshd.roots / "both", "rke2-server")
    (sshd.roots / "idle/sys/fs/cgroup").mkdir(parents=True)
    stacks = write_stack(tmp_path, "rke2", [f"{{name: {n}, host: {n}}}" for n in
                                            ("agent", "server", "both", "nocgroup", "idle")],
                         f"{{user: {getpass.getuser()}, port: {sshd.port}}}")
    code, out = run_capture(capsys, stacks, sshd, sshd.roots)
    assert code == 0, out
    assert "role: agent (active: rke2-agent)" in out
    assert "role: server (active: rke2-server)" in out
    assert "role: server+agent (active: rke2-server, rke2-agent)" in out
    assert "role: unknown (no systemctl answer and no /sys/fs/cgroup on the node)" in out
    assert "role: not told by its units (active: none of the distribution's units)" in out
    assert ("note: several (rke2-agent, rke2-server) of rke2-agent, rke2-server active: the "
            "agent restarts containerd through the one active unit and will refuse") in out
    assert "note: none of rke2-agent, rke2-server active" in out
    # RKE2 states no cgroup driver without a kubelet-arg: said, never compared.
    assert ("kubelet cgroup driver: not stated in /etc/rancher/rke2/config.yaml; RKE2 "
            "chooses it at start") in out

    code, out = run_capture(capsys, stacks, sshd, sshd.roots, "--format", "json")
    report = json.loads(out)
    by = {n["name"]: n for n in report["nodes"]}
    assert by["agent"]["role"] == "agent" and by["agent"]["activeUnits"] == ["rke2-agent"]
    assert by["nocgroup"]["role"] == "unknown"
    assert by["agent"]["kubeletCgroupDriver"]["driver"] is None


def test_the_role_through_the_capture_pod(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod path reads the host's cgroup tree (the recorded API runs each pod's own
    script on the node's sandbox root), and k0s's kubelet config for the driver."""
    roots = tmp_path / "roots"
    sandbox = Sshd(0, tmp_path, tmp_path, roots)
    k0s = "/var/lib/k0s/bin/containerd"
    node_root(sandbox, "w1", {STATED["k0s"][0]: STATED["k0s"][2].replace(
        "cgroupsPerQOS", "cgroupDriver: systemd\ncgroupsPerQOS")}, containerd=k0s)
    running(roots / "w1", "k0sworker")
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks/Pulumi.t.yaml").write_text(
        "config:\n  gpuplane:cluster: {distro: k0s, kubernetesVersion: \"1.31.4\", "
        "containerdVersion: \"1.7\", nodeAccess: none, kubeletCgroupDriver: systemd}\n"
        "  gpuplane:nodes: [{name: w1, gpus: 8}]\n"
        "  gpuplane:gpuOperator: {chartVersion: v25.10.1}\n")
    api = PodApi(roots, forbidden=set(), failing=set())
    monkeypatch.setattr("gpuplane.capture.command._client", lambda *_: api)
    code = main(["nodes", "capture", "--stack", "t", "--stacks-dir",
                 str(tmp_path / "stacks"), "--via", "kubernetes"])
    out = capsys.readouterr().out
    assert code == 0, out
    script = next(iter(api.pods.values()))["spec"]["containers"][0]["command"][4]
    assert "POD=1" in script
    assert "role: agent (active: k0sworker)" in out
    assert "kubelet cgroup driver: systemd (/var/lib/k0s/kubelet-config.yaml)" in out


def _fake_systemctl(tmp_path: Path, active: str) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    (bin_dir / "systemctl").write_text(
        f'#!/bin/sh\necho "$*" >> {log}\n'
        f'if [ "$2" = "{active}.service" ]; then echo active; exit 0; fi\n'
        "echo inactive; exit 3\n")
    (bin_dir / "systemctl").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, log


def test_over_ssh_on_the_node_itself_systemctl_answers(tmp_path: Path) -> None:
    """Without --remote-root the script asks `systemctl is-active` (a stand-in here: this
    machine is not booted with systemd); in the pod it never does (cgroup tree only)."""
    env, log = _fake_systemctl(tmp_path, "k0sworker")
    script = capture_script(profile("k0s"))
    out = subprocess.run(["sh", "-s"], input=script, env=env, capture_output=True,
                         text=True, check=True).stdout
    report = parse_answer(out)
    assert report.units == {"k0scontroller": "inactive", "k0sworker": "active"}
    assert log.read_text().splitlines() == ["is-active k0scontroller.service",
                                            "is-active k0sworker.service"]
    assert node_role(Distro.K0S, report.units).role == "agent"
    log.unlink()
    pod = capture_script(profile("k0s"), in_pod=True)
    subprocess.run(["sh", "-s"], input=pod, env=env, capture_output=True, text=True,
                   check=True)
    assert not log.exists()


# --- 2. The kubelet cgroup driver, per distribution ---------------------------------

@pytest.mark.parametrize("distro", sorted(STATED))
def test_the_cgroup_driver_each_distribution_states(distro: str) -> None:
    path, says_cgroupfs, says_nothing = STATED[distro]
    d = Distro(distro)
    found = stated_driver(d, {path: says_cgroupfs})
    assert (found.driver, found.source) == ("cgroupfs", path)
    silent = stated_driver(d, {path: says_nothing})
    assert silent.driver == "" and silent.why.startswith(f"not stated in {path}")
    assert stated_driver(d, {}).driver == ""
    denied = stated_driver(d, {path: says_cgroupfs}, {path: "permission denied"})
    assert denied.driver == "" and denied.why == f"unknown: {path}: permission denied"
    # A file of another distribution says nothing about this one.
    other = "/var/lib/kubelet/config.yaml" if distro != "kubeadm" else STATED["k0s"][0]
    assert stated_driver(d, {other: KUBEADM_KUBELET.format(driver="cgroupfs")}).driver == ""


BINARIES = {"kubeadm": "/usr/bin/containerd", "k8s-snap": "/snap/k8s/current/bin/containerd",
            "microk8s": "/snap/microk8s/current/bin/containerd",
            "k0s": "/var/lib/k0s/bin/containerd", "rke2": "/var/lib/rancher/rke2/bin/containerd",
            "k3s": "/var/lib/rancher/k3s/data/current/bin/containerd"}


@pytest.mark.parametrize("distro", sorted(STATED))
def test_capture_reports_the_stated_driver_against_the_stack(
        distro: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        sshd: Sshd) -> None:  # noqa: F811
    path, says_cgroupfs, says_nothing = STATED[distro]
    node_root(sshd, "stated", {path: says_cgroupfs}, containerd=BINARIES[distro])
    node_root(sshd, "silent", {path: says_nothing}, containerd=BINARIES[distro])
    stacks = write_stack(tmp_path, distro, ["{name: stated, host: stated}",
                                            "{name: silent, host: silent}"],
                         f"{{user: {getpass.getuser()}, port: {sshd.port}}}")
    code, out = run_capture(capsys, stacks, sshd, sshd.roots)
    assert code == 1, out
    assert ("gpuplane:cluster.kubeletCgroupDriver is systemd (set) but the node's kubelet "
            f"uses cgroupfs ({path}); set cluster.kubeletCgroupDriver: cgroupfs") in out
    assert f"kubelet cgroup driver: not stated in {path}" in out
    assert "1 of 2 nodes not captured: stated" in out


def test_kubelet_sources_are_framed_apart_from_the_captured_files() -> None:
    """A `KUBE` frame is read for the driver, never stored as a baseline; an unreadable
    one makes the driver unknown without failing the node."""
    body = "Y2dyb3VwRHJpdmVyOiBjZ3JvdXBmcwo="          # "cgroupDriver: cgroupfs\n"
    report = parse_answer(f"KUBE /var/lib/kubelet/config.yaml 23\n{body}\nEND\n"
                          "DENIEDKUBE /var/lib/k0s/kubelet-config.yaml\n"
                          "UNIT kubelet active\nVERSION containerd x 1.7.2 y\n")
    assert report.files == {} and report.problems == ()
    assert report.kubelet_files == {"/var/lib/kubelet/config.yaml": "cgroupDriver: cgroupfs\n"}
    assert "/var/lib/k0s/kubelet-config.yaml" in report.kubelet_unreadable
    assert report.units == {"kubelet": "active"}


# --- 3. ssh.sudo: true as a non-root user -------------------------------------------

@pytest.fixture
def sudo_user(sshd: Sshd) -> Iterator[tuple[str, Path]]:  # noqa: F811
    """A throw-away user with NOPASSWD sudo whose ~/.ssh accepts the test's key, and a
    node root it may traverse (the test's own tmp_path is private to root)."""
    if not shutil.which("sudo"):
        unavailable("no sudo (scripts/fetch-containerd.sh installs it from Debian)")
    if os.geteuid() != 0 or not shutil.which("useradd"):
        unavailable("the sudo test creates a user: it needs root and useradd")
    user = f"gpcap{os.getpid()}"
    sudoers = Path(f"/etc/sudoers.d/gpuplane-test-{user}")
    roots = Path(tempfile.mkdtemp(prefix="gpuplane-sudo-"))
    try:
        # '*': no password, and not locked ('!'), which sshd without PAM refuses.
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", "-p", "*", user], check=True)
        ssh_dir = Path(f"/home/{user}/.ssh")
        ssh_dir.mkdir(mode=0o700)
        shutil.copy(sshd.key.with_suffix(".pub"), ssh_dir / "authorized_keys")
        shutil.chown(ssh_dir, user, user)
        shutil.chown(ssh_dir / "authorized_keys", user, user)
        sudoers.write_text(f"{user} ALL=(root) NOPASSWD: ALL\n")
        sudoers.chmod(0o440)
        roots.chmod(0o755)
        yield user, roots
    finally:
        sudoers.unlink(missing_ok=True)
        subprocess.run(["userdel", "-r", user], capture_output=True, check=False)
        shutil.rmtree(roots, ignore_errors=True)


def test_sudo_reads_what_the_login_user_may_not(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd,  # noqa: F811
        sudo_user: tuple[str, Path]) -> None:
    user, roots = sudo_user
    root = roots / "n1"
    config = root / CONFIG.lstrip("/")
    config.parent.mkdir(parents=True)
    for d in (root, *config.parents):
        if d.is_relative_to(roots):
            d.chmod(0o755)
    config.write_text(CAPTURED)
    config.chmod(0o600)                               # root-only, as on many nodes
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/containerd").symlink_to(binary("1.7"))
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and config.stat().st_uid == 0

    stacks = write_stack(tmp_path, "kubeadm", ["{name: n1, host: n1}"],
                         f"{{user: {user}, port: {sshd.port}}}")
    code, out = run_capture(capsys, stacks, sshd, roots)
    assert code == 1, out
    assert f"{CONFIG}: permission denied (set ssh.sudo: true" in out

    stacks = write_stack(tmp_path, "kubeadm", ["{name: n1, host: n1}"],
                         f"{{user: {user}, port: {sshd.port}, sudo: true}}")
    code, out = run_capture(capsys, stacks, sshd, roots)
    assert code == 0, out
    assert "n1  ok      containerd 1.7." in out and "1 files, 1 new" in out
    copy = next(iter(copies_in(stacks / "captured/t")))
    assert copy.read_text() == CAPTURED


# --- 4. The SSH key from the stack's Pulumi secret ----------------------------------

def _stand_in_pulumi(tmp_path: Path, body: str) -> Path:
    """A `pulumi` on PATH for the command-line contract only (the real CLI is not
    installable here): it records its argv and cwd, then runs `body`."""
    bin_dir = tmp_path / "pulumi-bin"
    bin_dir.mkdir()
    exe = bin_dir / "pulumi"
    exe.write_text(f'#!/bin/sh\necho "$*" > {tmp_path}/pulumi.argv\n'
                   f'pwd > {tmp_path}/pulumi.cwd\n{body}\n')
    exe.chmod(0o755)
    return bin_dir


def test_the_key_comes_from_the_stack_secret_through_the_cli(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    node_root(sshd, "n1", {CONFIG: CAPTURED})
    stacks = write_stack(tmp_path, "kubeadm", ["{name: n1, host: n1}"],
                         f"{{user: {getpass.getuser()}, port: {sshd.port}}}")
    bin_dir = _stand_in_pulumi(tmp_path, f"cat {sshd.key}")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    keys = tmp_path / "tmp"
    keys.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(keys))
    seen: list[int] = []
    import gpuplane.capture.run as run_mod

    real = run_mod.run_script

    def spy(target, script, identity=None, ssh_config=None):  # type: ignore[no-untyped-def]
        if identity is not None:
            seen.append(stat.S_IMODE(identity.stat().st_mode))
            assert identity.read_text() == sshd.key.read_text()
        return real(target, script, identity, ssh_config)

    monkeypatch.setattr(run_mod, "run_script", spy)
    code, out = run_capture(capsys, stacks, sshd, sshd.roots, identity=False)
    assert code == 0, out
    assert (tmp_path / "pulumi.argv").read_text().split() == [
        "config", "get", "gpuplane:sshPrivateKey", "--stack", "t"]
    assert Path((tmp_path / "pulumi.cwd").read_text().strip()) == tmp_path   # project root
    assert seen == [0o600]
    assert list(keys.iterdir()) == []          # the key file is gone once capture ends

    # --ssh-agent: the CLI is not asked (ssh then finds no key: the node is reported).
    (tmp_path / "pulumi.argv").unlink()
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    code, out = run_capture(capsys, stacks, sshd, sshd.roots, "--ssh-agent", identity=False)
    assert not (tmp_path / "pulumi.argv").exists() and seen == [0o600]
    assert code == 1 and "Permission denied (publickey)" in out


@pytest.mark.parametrize(("body", "says"), [
    ('echo "error: no stack named \'t\' found" >&2; exit 255',
     "`pulumi config get gpuplane:sshPrivateKey --stack t` failed: error: no stack named "
     "'t' found"),
    ("echo not-a-key", "did not print a private key"),
    (None, "the `pulumi` CLI, which decrypts it, is not on PATH"),
])
def test_without_a_working_cli_the_key_is_bad_input(
        body: str | None, says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    stacks = write_stack(tmp_path, "kubeadm", ["{name: n1, host: n1}"], "{user: root}")
    if body is None:
        empty = tmp_path / "empty"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
    else:
        monkeypatch.setenv("PATH", f"{_stand_in_pulumi(tmp_path, body)}:/usr/bin:/bin")
    code = main(["nodes", "capture", "--stack", "t", "--stacks-dir", str(stacks)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err and "--identity FILE" in err and "--ssh-agent" in err
    assert "Traceback" not in err
