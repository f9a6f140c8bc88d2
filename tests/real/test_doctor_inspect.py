"""Node inspection: the packaged program against sandbox roots, injected /proc trees and
real containerd 1.6 / 1.7 / 2.1 (config dump and daemons), and the doctor's reading of
its output through the rulebook."""

from __future__ import annotations

import json
import os
import platform
import stat
from pathlib import Path

import kubernetes_validate
import pytest
from support import oracle
from support.doctor_support import (
    KUBELET_PID,
    fake_process,
    inspect,
    kubelet,
    program,
    real_process,
    write_plain,
)
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import Distro, profile
from gpuplane.doctor.inspect import (
    InspectionFailed,
    inspect_node,
    parse_output,
    pod_manifest,
    program_source,
)
from gpuplane.doctor.nodes import NodeContext, ToolkitTarget, analyse_node
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

V2 = '"io.containerd.grpc.v1.cri"'
TOP = "/etc/containerd/config.toml"


# ------------------------------------------------------------------ processes and files


def test_kubelet_endpoint_picks_the_daemon_among_two(tmp_path: Path) -> None:
    """Docker's containerd on the default socket, the distro's on its own; the kubelet's
    --config file names the endpoint."""
    root, proc = tmp_path / "root", tmp_path / "proc"
    snap = "/var/lib/k8s-containerd/k8s-containerd"
    write_plain({
        TOP: "version = 2\n",
        f"{snap}/etc/containerd/config.toml":
            f'version = 2\n[grpc]\naddress = "{snap}/run/containerd/containerd.sock"\n',
        "/var/lib/kubelet/config.yaml":
            "kind: KubeletConfiguration\ncgroupDriver: systemd\n"
            f"containerRuntimeEndpoint: unix://{snap}/run/containerd/containerd.sock\n",
    }, root)
    fake_process(proc, 100, ["/usr/bin/containerd"], "/usr/bin/containerd")
    fake_process(proc, 200, ["/snap/k8s/current/bin/containerd", "--config",
                             f"{snap}/etc/containerd/config.toml"],
                 "/snap/k8s/123/bin/containerd")
    fake_process(proc, 300, ["/usr/bin/containerd-shim-runc-v2", "-address", "x"],
                 "/usr/bin/containerd-shim-runc-v2")
    fake_process(proc, KUBELET_PID, ["/snap/k8s/current/bin/kubelet",
                                     "--config=/var/lib/kubelet/config.yaml"],
                 "/snap/k8s/123/bin/kubelet")
    report = inspect(root, proc, "--no-cri-probe")
    daemons = {d["pid"]: d for d in report["daemons"]}
    assert set(daemons) == {100, 200}
    assert daemons[100]["address"] == "/run/containerd/containerd.sock"
    assert daemons[100]["config_source"] == "default"
    assert daemons[200]["address"] == f"{snap}/run/containerd/containerd.sock"
    assert daemons[200]["address_source"] == "config"
    assert report["kubelet"]["endpoint_source"] == "config /var/lib/kubelet/config.yaml"
    assert report["kubelet"]["cgroup_driver"] == "systemd"
    assert report["kubelet_daemon"] == 200
    assert {TOP, f"{snap}/etc/containerd/config.toml"} <= set(report["files"])


def test_k3s_and_kubelite_endpoints(tmp_path: Path) -> None:
    mod = program()
    proc = tmp_path / "proc"
    fake_process(proc, 10, ["/usr/local/bin/k3s", "agent"], "/usr/local/bin/k3s", "k3s-agent")
    host = mod.Host(str(tmp_path), str(proc), "none", 5)
    k3s = mod.processes(str(proc))[0]
    assert mod.is_kubelet(k3s)
    assert mod.kubelet_of(k3s, host)["endpoint"] == "/run/k3s/containerd/containerd.sock"

    args = tmp_path / "var/snap/microk8s/current/args/kubelet"
    args.parent.mkdir(parents=True)
    args.write_text("--container-runtime-endpoint=${SNAP_COMMON}/run/containerd.sock\n")
    fake_process(proc, 11, ["/snap/microk8s/1/kubelite",
                            "--kubelet-args-file=/var/snap/microk8s/current/args/kubelet"],
                 "/snap/microk8s/1/kubelite",
                 environ={"SNAP_COMMON": "/var/snap/microk8s/common"})
    kubelite = next(p for p in mod.processes(str(proc)) if p["pid"] == 11)
    assert mod.kubelet_of(kubelite, host)["endpoint"] == \
        "/var/snap/microk8s/common/run/containerd.sock"


def test_files_follow_imports_drop_in_dirs_and_host_symlinks(tmp_path: Path) -> None:
    """Imports are followed; conf.d/ and config.d/ are read even when nothing imports them
    (that is how an unread drop-in is found); an absolute symlink resolves inside the root,
    never into the inspecting container's own filesystem."""
    root, proc = tmp_path / "root", tmp_path / "proc"
    write_plain({
        TOP: 'version = 2\nimports = ["/opt/extra/*.toml"]\n',
        "/opt/extra/10-a.toml": "version = 2\n",
        "/etc/containerd/config.d/99-nvidia.toml": "version = 2\n",
        "/etc/containerd/config.toml.tmpl": "# a template\n",
        "/etc/elsewhere/ignored.toml": "version = 2\n",
        "/usr/lib64/libc.so.6": "",
    }, root)
    (root / "usr/lib64/libc.so.6").write_bytes(
        b"\x7fELF\x02\x01" + b"\0" * 64 + b"GLIBC_2.2.5\0GLIBC_2.26\0"
        b"GNU C Library (GNU libc) stable release version 2.26.\n")
    (root / "lib64").symlink_to("/usr/lib64")          # absolute, as on many hosts
    (root / "etc/os-release").write_text('ID="amzn"\nVERSION_ID="2"\nPRETTY_NAME="Amazon '
                                         'Linux 2"\n')
    fake_process(proc, 100, ["containerd"], "/usr/bin/containerd")
    kubelet(proc, "/run/containerd/containerd.sock")
    report = inspect(root, proc, "--no-cri-probe")
    assert set(report["files"]) == {TOP, "/opt/extra/10-a.toml",
                                    "/etc/containerd/config.d/99-nvidia.toml",
                                    "/etc/containerd/config.toml.tmpl"}
    assert report["glibc"] == {"version": "2.26", "path": "/lib64/libc.so.6",
                               "resolved": "/usr/lib64/libc.so.6"}
    assert report["os_release"]["ID"] == "amzn"
    assert report["config_dump"] == {"pid": 100, "ok": False, "ran": False,
                                     "why": "host commands are off (--exec none)"}


def test_glibc_of_this_machine_matches_the_c_library() -> None:
    mod = program()
    report = mod.host_glibc(mod.Host("/", "/proc", "none", 5))
    lib, version = platform.libc_ver()
    assert lib == "glibc" and report is not None
    assert report["version"] == ".".join(version.split(".")[:2])


def test_toolkit_binaries_report_the_glibc_they_need(tmp_path: Path) -> None:
    root, proc = tmp_path / "root", tmp_path / "proc"
    cli = root / "usr/local/nvidia/toolkit/nvidia-container-cli"
    cli.parent.mkdir(parents=True)
    cli.write_bytes(b"\x7fELF\x02\x01" + b"\0" * 32 + b"GLIBC_2.2.5\0GLIBC_2.27\0GLIBC_2.14\0")
    cli.chmod(0o755)
    fake_process(proc, 100, ["containerd"], "/usr/bin/containerd")
    report = inspect(root, proc, "--no-cri-probe")
    binaries = {b["path"]: b for b in report["binaries"]}
    assert binaries["/usr/local/nvidia/toolkit/nvidia-container-cli"] == {
        "path": "/usr/local/nvidia/toolkit/nvidia-container-cli", "present": True,
        "executable": True, "elf": True, "glibc_required": "2.27"}
    assert binaries["/usr/bin/nvidia-container-runtime"] == {
        "path": "/usr/bin/nvidia-container-runtime", "present": False}


def test_protobuf_round_trip_of_the_probe_request() -> None:
    mod = program()
    config = mod._fields(mod.sandbox_config("probe", "/gp"))
    metadata = mod._fields(config[1][0])
    linux = mod._fields(config[8][0])
    assert metadata[1] == [b"probe"] and metadata[3] == [b"kube-system"]
    assert linux[1] == [b"/gp"]
    network = mod._fields(mod._fields(linux[2][0])[1][0])
    assert network == {1: [2]}   # NamespaceMode.NODE
    assert mod._varint(300) == b"\xac\x02"


# ------------------------------------------------------------------ crictl probe (stub)


def _stub_crictl(bindir: Path, *, fail: str | None = None) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    log = bindir / "crictl.log"
    body = (f"echo '{fail}' >&2; exit 1" if fail
            else 'case "$*" in *runp*) cat "$last" > ' + f"'{bindir}/pod.json'" +
            "; echo sandbox-123;; esac")
    script = bindir / "crictl"
    script.write_text(f"#!/bin/sh\nfor last; do :; done\nprintf '%s\\n' \"$*\" >> '{log}'\n"
                      f"{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def test_crictl_probe_runs_a_host_network_sandbox_and_cleans_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _stub_crictl(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = tmp_path / "proc"
    fake_process(proc, 100, ["containerd", "--address", "/tmp/x.sock"], "/usr/bin/containerd")
    kubelet(proc, "/tmp/x.sock", "--cgroup-driver=systemd")
    report = inspect("/", proc, "--exec", "direct", "--cri-method", "crictl")
    probe = report["cri_probe"]
    assert probe["status"] == "ok" and probe["sandbox_id"] == "sandbox-123"
    assert probe["cgroup_parent"] == "gpuplane-probe.slice"   # kubelet uses systemd
    calls = log.read_text().splitlines()
    assert calls[0].startswith("--runtime-endpoint unix:///tmp/x.sock --timeout 60s runp "
                               "--runtime nvidia ")
    assert calls[1:] == [f"--runtime-endpoint unix:///tmp/x.sock --timeout 60s {verb} "
                         "sandbox-123" for verb in ("stopp", "rmp")]
    pod = json.loads((tmp_path / "bin/pod.json").read_text())
    assert pod["linux"]["security_context"]["namespace_options"]["network"] == 2


def test_crictl_probe_failure_is_reported_with_runtime_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error = 'failed to get sandbox runtime: no runtime for "nvidia" is configured'
    _stub_crictl(tmp_path / "bin", fail=error)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = tmp_path / "proc"
    fake_process(proc, 100, ["containerd"], "/usr/bin/containerd")
    report = inspect("/", proc, "--exec", "direct", "--cri-method", "crictl")
    assert report["cri_probe"]["status"] == "failed"
    assert report["cri_probe"]["error"] == error


def test_no_probe_without_grpc_or_crictl(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    fake_process(proc, 100, ["containerd"], "/usr/bin/containerd")
    report = inspect(tmp_path, proc, "--cri-method", "crictl")
    assert report["cri_probe"]["status"] == "not-probed"
    assert "crictl" in report["cri_probe"]["why"]


# ------------------------------------------------------------------ real containerd


def _node_daemon(proc: Path, line: str, config: Path, pid: int = 100) -> None:
    """A containerd of `line` reading `config`, as /proc shows it (exe: the real binary)."""
    binary = str(oracle.binary(line))
    fake_process(proc, pid, [binary, "--config", str(config)], binary)


def _context(line: str, root: Path, *, distro: str = "kubeadm", dropin: str | None = None,
             toolkit: bool = True) -> NodeContext:
    intent = ClusterIntent(distro=distro, containerd_version=line)
    target = None
    if toolkit:
        target = ToolkitTarget(config=str(host_path(root, TOP)),
                               socket="/run/containerd/containerd.sock",
                               dropin=str(host_path(root, dropin)) if dropin else None,
                               source="helm release gpu-operator/gpu-operator toolkit.env")
    return NodeContext("gpu-1", intent, f"containerd://{line}.0", target)


def _errors(result) -> list[str]:
    return sorted(d.finding.id for d in result.diagnoses
                  if d.finding.severity is Severity.ERROR)


def test_incident_3_runc_lost_on_1x_kept_on_2x(containerd_line: str, tmp_short: Path) -> None:
    """k8s-snap's runc drop-in plus the toolkit's nvidia-only drop-in. The inspection reads
    the files and runs the real `containerd config dump`; the rulebook says FM02 on 1.6
    and 1.7 with the dump as evidence, nothing on 2.1."""
    cri = f"plugins.{V2}.containerd"
    layout = {
        TOP: 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
        "/etc/containerd/conf.d/00-k8s-runc.toml":
            f'version = 2\n[{cri}]\ndefault_runtime_name = "runc"\n'
            f'[{cri}.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n',
        "/etc/containerd/conf.d/99-nvidia.toml":
            f'version = 2\n[{cri}.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
            f'[{cri}.runtimes.nvidia.options]\nBinaryName = '
            '"/usr/local/nvidia/toolkit/nvidia-container-runtime"\n',
    }
    root, proc = tmp_short / "node", tmp_short / "proc"
    write_layout(layout, root)
    _node_daemon(proc, containerd_line, host_path(root, TOP))
    kubelet(proc, "/run/containerd/containerd.sock")
    report = inspect("/", proc, "--exec", "direct", "--no-cri-probe")
    assert report["config_dump"]["ok"], report["config_dump"]
    assert report["daemons"][0]["version"].startswith("containerd ")
    binaries = {b["path"] for b in report["binaries"]}
    assert "/usr/local/nvidia/toolkit/nvidia-container-runtime" in binaries

    result = analyse_node(report, _context(
        containerd_line, root, distro="k8s-snap", dropin="/etc/containerd/conf.d/99-nvidia.toml"))
    assert not result.notes, result.notes          # the model agrees with the real dump
    if containerd_line.startswith("2."):
        assert _errors(result) == []
        return
    assert _errors(result) == ["FM02"]
    fm02 = result.diagnoses[0]
    assert "99-nvidia.toml" in fm02.finding.where
    assert "gpuplane:cluster.containerdVersion" in fm02.finding.fix
    assert [s.evidence.detail for s in result.symptoms if s.ids[0] == "FM02"] == [
        "default runtime runc (not defined); runtimes nvidia"]


def test_toolkit_drop_in_that_nothing_imports_is_fm01(containerd_line: str,
                                                       tmp_short: Path) -> None:
    """Toolkit 1.18.0 wrote config.d/99-nvidia.toml while the planned kubeadm layout
    imports conf.d/: the toolkit's env names the file, so the rule reports it unread."""
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(containerd_line),
                     PlanOptions(toolkit=ToolkitMode.OPERATOR))
    layout = dict(plan.layout)
    layout["/etc/containerd/config.d/99-nvidia.toml"] = layout.pop(
        "/etc/containerd/conf.d/99-nvidia.toml")
    root, proc = tmp_short / "node", tmp_short / "proc"
    write_layout(layout, root)
    _node_daemon(proc, containerd_line, host_path(root, TOP))
    kubelet(proc, "/run/containerd/containerd.sock")
    report = inspect("/", proc, "--exec", "direct", "--no-cri-probe")
    assert str(host_path(root, "/etc/containerd/config.d/99-nvidia.toml")) in report["files"]

    result = analyse_node(report, _context(containerd_line, root,
                                           dropin="/etc/containerd/config.d/99-nvidia.toml"))
    assert _errors(result) == ["FM01"]
    fm01 = result.diagnoses[0].finding
    assert "config.d/99-nvidia.toml" in fm01.message and "nvidia" in fm01.message
    assert "gpuplane:cluster.distro" in fm01.fix
    real = oracle.dump(containerd_line, host_path(root, TOP))
    assert real.ok and "nvidia" not in oracle.effective_from_dump(
        containerd_line, real.config)["runtimes"]


@pytest.mark.real
@pytest.mark.parametrize("line", oracle.LINES)
def test_cri_probe_starts_a_sandbox_through_a_running_daemon(line: str, tmp_short: Path,
                                                             start_daemon) -> None:
    """A real daemon on a planned k8s-snap layout: the inspection finds it through the
    kubelet's endpoint, dumps its config and starts a sandbox with handler nvidia (the
    wrapper standing in for nvidia-container-runtime logs the call)."""
    oracle.require_line(line)
    prof = profile(Distro.K8S_SNAP, containerd_base_dir="/var/lib/k8s-containerd")
    plan = plan_node(prof, ContainerdVersion.parse(line), PlanOptions(toolkit=ToolkitMode.HOST))
    wrapper = oracle.nvidia_wrapper(tmp_short / "bin")
    layout = {p: t.replace('"/usr/bin/nvidia-container-runtime"', f'"{wrapper}"')
              .replace("SystemdCgroup = true", "SystemdCgroup = false")
              for p, t in plan.layout.items()}
    root, proc = tmp_short / "node", tmp_short / "proc"
    write_layout(layout, root)
    daemon = start_daemon(line, host_path(root, prof.config_path))
    daemon.require_started()
    daemon.ensure_pause_image()
    real_process(proc, daemon.proc.pid)
    kubelet(proc, str(daemon.socket))
    report = inspect("/", proc, "--exec", "direct", "--cgroup-parent", daemon.cgroup_parent)
    assert report["kubelet_daemon"] == daemon.proc.pid
    assert report["daemons"][0]["address"] == str(daemon.socket)
    probe = report["cri_probe"]
    assert probe["status"] == "ok", probe
    assert probe["method"] == "grpc" and probe["runtime"]["name"] == "containerd"
    assert ContainerdVersion.parse(probe["runtime"]["version"]) == ContainerdVersion.parse(line)
    assert oracle.wrapper_calls(wrapper), "the sandbox did not go through the nvidia handler"

    intent = ClusterIntent(distro="k8s-snap", containerd_version=line, toolkit="host")
    result = analyse_node(report, NodeContext("gpu-1", intent, None, None))
    assert _errors(result) == [] and not result.notes, (result.diagnoses, result.notes)
    assert "nvidia" in result.facts["effective"]["runtimes"]


@pytest.mark.real
@pytest.mark.parametrize("line", oracle.LINES)
def test_incident_1_two_daemons_toolkit_on_the_wrong_one(line: str, tmp_short: Path,
                                                          start_daemon) -> None:
    """Docker's containerd got the nvidia runtime (the toolkit's default paths), the
    kubelet talks to k8s-snap's: the probe fails exactly as in the field and the doctor
    names FM17 with the kubelet's containerd's paths as the fix."""
    oracle.require_line(line)
    version = ContainerdVersion.parse(line)
    wrapper = oracle.nvidia_wrapper(tmp_short / "bin")
    docker = plan_node(profile(Distro.KUBEADM), version, PlanOptions(toolkit=ToolkitMode.HOST))
    snap = profile(Distro.K8S_SNAP, containerd_base_dir="/var/lib/k8s-containerd")
    kube = plan_node(snap, version, PlanOptions(toolkit=ToolkitMode.NONE))
    root, proc = tmp_short / "node", tmp_short / "proc"
    layout = {p: t.replace('"/usr/bin/nvidia-container-runtime"', f'"{wrapper}"')
              .replace("SystemdCgroup = true", "SystemdCgroup = false")
              for p, t in {**docker.layout, **kube.layout}.items()}
    write_layout(layout, root)
    first = start_daemon(line, host_path(root, TOP))
    second = start_daemon(line, host_path(root, snap.config_path))
    for daemon in (first, second):
        daemon.require_started()
        real_process(proc, daemon.proc.pid)
    second.ensure_pause_image()
    kubelet(proc, str(second.socket))
    report = inspect("/", proc, "--exec", "direct", "--cgroup-parent", second.cgroup_parent)
    assert report["kubelet_daemon"] == second.proc.pid
    assert report["cri_probe"]["status"] == "failed"
    assert 'no runtime for "nvidia" is configured' in report["cri_probe"]["error"]
    # containerd 2.x asks every runtime binary for its `features` at start; nothing ran.
    assert [c for c in oracle.wrapper_calls(wrapper) if c != "features"] == []

    # The toolkit's env: its defaults, i.e. Docker's containerd (mirrored config path).
    docker_config = next(d["config"] for d in report["daemons"] if d["pid"] == first.proc.pid)
    target = ToolkitTarget(config=docker_config, socket=str(first.socket), dropin=None,
                           source="helm release gpu-operator/gpu-operator toolkit.env")
    intent = ClusterIntent(distro="k8s-snap", containerd_version=line,
                           containerd_base_dir="/var/lib/k8s-containerd")
    result = analyse_node(report, NodeContext("gpu-1", intent, None, target))
    assert _errors(result) == [], [d.finding for d in result.diagnoses]
    fm17 = next(s.fallback for s in result.symptoms if s.ids == ("FM17",))
    assert fm17 is not None and fm17.severity is Severity.ERROR
    kubelet_config = next(d["config"] for d in report["daemons"]
                          if d["pid"] == second.proc.pid)
    assert f"CONTAINERD_CONFIG={kubelet_config}" in fm17.fix
    assert f"CONTAINERD_SOCKET={second.socket}" in fm17.fix
    assert "gpuplane:cluster.containerdBaseDir: /var/lib/k8s-containerd" in fm17.fix
    probe = [s for s in result.symptoms if "CRI probe" in s.evidence.source]
    assert probe and probe[0].ids[0] == "FM17"


# ------------------------------------------------------------------ the pod


def test_pod_manifest_is_a_valid_pod_and_carries_the_program() -> None:
    manifest = pod_manifest("gpu-a1.example", namespace="kube-system")
    kubernetes_validate.validate(manifest, "1.31", strict=True)
    spec = manifest["spec"]
    assert spec["nodeName"] == "gpu-a1.example" and spec["hostPID"] is True
    container = spec["containers"][0]
    assert container["command"][:3] == ["python3", "-c", program_source()]
    assert container["securityContext"] == {"privileged": True}
    assert container["volumeMounts"] == [{"name": "host", "mountPath": "/host",
                                          "readOnly": True}]
    assert spec["volumes"][0]["hostPath"]["path"] == "/"
    assert "--no-cri-probe" in pod_manifest("n", cri_probe=False)["spec"]["containers"][0][
        "command"]


def test_pod_manifest_rejects_a_schema_violation() -> None:
    """The strict validation used above does catch mistakes."""
    manifest = pod_manifest("gpu-a1")
    manifest["spec"]["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, "1.31", strict=True)


class _PodClient:
    """Just enough of ClusterClient to run one inspection pod."""

    def __init__(self, phases: list[str], log: str):
        self.phases, self.log, self.calls = phases, log, []

    def get(self, path, params=None):
        self.calls.append(("GET", path))
        return {"status": {"phase": self.phases.pop(0)}}

    def get_text(self, path, params=None):
        self.calls.append(("LOG", path))
        return self.log

    def post(self, path, body):
        self.calls.append(("POST", path))
        self.body = body
        return body

    def delete(self, path):
        self.calls.append(("DELETE", path))


def test_inspect_node_runs_the_pod_reads_the_log_and_deletes_it() -> None:
    client = _PodClient(["Pending", "Running", "Succeeded"],
                        'noise\n{"format": 1, "daemons": []}\n')
    data = inspect_node(client, "gpu-a1", poll_s=0)
    assert data == {"format": 1, "daemons": []}
    name = client.body["metadata"]["name"]
    pods = "/api/v1/namespaces/kube-system/pods"
    assert client.calls[0] == ("DELETE", f"{pods}/{name}")
    assert client.calls[1] == ("POST", pods)
    assert client.calls[-2:] == [("LOG", f"{pods}/{name}/log"), ("DELETE", f"{pods}/{name}")]


def test_inspection_without_a_report_says_why() -> None:
    with pytest.raises(InspectionFailed, match="ended Failed without a report: boom"):
        parse_output("boom\n", "Failed")
