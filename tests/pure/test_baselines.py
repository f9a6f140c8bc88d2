"""Planning from files captured from the nodes (`baselineFiles`): what the node has is
kept, the plan says what it was made from, and bad references name their stack key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gpuplane.agent.payload import payload_base_texts
from gpuplane.agent.script import agent_plan, apply_stdin
from gpuplane.cli.main import main
from gpuplane.config.baselines import plannable_paths
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "/etc/containerd/config.toml"

CAPTURED = """\
# captured from a1 on 2026-11-20
version = 2
root = "/data/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  max_concurrent_downloads = 8

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
"""

STACK = """\
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.31.4"
    containerdVersion: "1.7"
    kubeletCgroupDriver: systemd
    baselineFiles:
      /etc/containerd/config.toml: files/a.toml
  gpuplane:ssh: {user: ubuntu, sudo: true}
  gpuplane:sshPrivateKey: {secure: v1:x}
  gpuplane:nodes:
    - {name: a1, host: 10.0.0.1, gpus: 8}
    - {name: a2, host: 10.0.0.2, gpus: 8}
    - name: b1
      host: 10.0.0.3
      gpus: 4
      baselineFiles: {NODE_FILES}
  gpuplane:runtime: {systemdCgroup: true}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
"""


def project(tmp_path: Path, node_files: str = "{}", captured: str = CAPTURED) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.toml").write_text(captured)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text(STACK.replace("{NODE_FILES}", node_files))
    return tmp_path / "stacks"


def plan(capsys: pytest.CaptureFixture[str], stacks: Path) -> tuple[int, dict | None, str]:
    code = main(["plan", "--stack", "t", "--stacks-dir", str(stacks), "--format", "json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code != 2 else None), out.err


def test_captured_settings_are_kept_and_the_plan_names_its_source(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, report, _ = plan(capsys, project(tmp_path))
    assert code == 0 and report is not None
    a1, a2, b1 = report["nodes"]
    written = a1["files"][CONFIG]
    # Everything the node had stays; gpuplane adds the import and flips SystemdCgroup.
    for kept in ('# captured from a1 on 2026-11-20', 'root = "/data/containerd"',
                 "max_concurrent_downloads = 8", 'config_path = "/etc/containerd/certs.d"'):
        assert kept in written
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in written
    assert "SystemdCgroup = true" in written and "SystemdCgroup = false" not in written
    assert a1["baselineFiles"] == {CONFIG: "files/a.toml"} == a2["baselineFiles"]
    assert a2["files"] == a1["files"] and a1["restart"]
    # b1 has no files of its own listed: the cluster's copy applies to it too.
    assert b1["files"] == a1["files"]
    # The command tells the agent which original the plan was made from.
    stdin = next(r["inputs"]["stdin"] for r in report["resources"]
                 if r["name"] == "containerd-a1")
    assert hashlib.sha256(CAPTURED.encode()).hexdigest() in stdin


def test_a_node_override_and_the_model_give_their_own_plans(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stacks = project(tmp_path, "{/etc/containerd/config.toml: files/b.toml}")
    (tmp_path / "files" / "b.toml").write_text(CAPTURED.replace("max_concurrent_downloads = 8",
                                                               "max_concurrent_downloads = 2"))
    code, report, _ = plan(capsys, stacks)
    assert code == 0 and report is not None
    a1, _, b1 = report["nodes"]
    assert b1["baselineFiles"] == {CONFIG: "files/b.toml"}
    assert "max_concurrent_downloads = 2" in b1["files"][CONFIG]
    assert "max_concurrent_downloads = 8" in a1["files"][CONFIG]


def test_fm07_the_models_findings_do_not_block_nodes_planned_from_their_own_files(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every node captured, kubelets on cgroupfs and no `systemdCgroup` set: the nodes'
    files keep SystemdCgroup = false and their plans pass. The distribution's stock files
    (the model, SystemdCgroup = true on kubeadm) would conflict with cgroupfs (FM07), but no
    node is planned from them, so that is no finding (seen on the real node of
    tests/engine/test_kubelet_node.py)."""
    stacks = project(tmp_path)
    text = (stacks / "Pulumi.t.yaml").read_text()
    (stacks / "Pulumi.t.yaml").write_text(
        text.replace("kubeletCgroupDriver: systemd", "kubeletCgroupDriver: cgroupfs")
        .replace("  gpuplane:runtime: {systemdCgroup: true}\n", ""))
    code, report, err = plan(capsys, stacks)
    assert code == 0 and report is not None, err
    assert [f["id"] for f in report["findings"] if f["severity"] == "error"] == []
    assert all("SystemdCgroup = true" not in t for n in report["nodes"]
               for t in n["files"].values())


def test_a_node_that_already_has_the_change_needs_no_restart(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    done = CAPTURED.replace("SystemdCgroup = false", "SystemdCgroup = true").replace(
        'state = "/run/containerd"\n',
        'state = "/run/containerd"\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    code, report, _ = plan(capsys, project(tmp_path, captured=done))
    assert code == 0 and report is not None
    assert [n["files"] for n in report["nodes"]] == [{}, {}, {}]
    assert report["summary"]["restarts"] == 0


def test_a_missing_copy_names_the_key_its_line_and_how_to_capture(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stacks = project(tmp_path, "{/etc/containerd/config.toml: files/missing.toml}")
    code, _, err = plan(capsys, stacks)
    assert code == 2
    assert "gpuplane:nodes[2].baselineFiles" in err and "Pulumi.t.yaml:" in err
    assert "files/missing.toml" in err
    assert "ssh 10.0.0.3 sudo cat /etc/containerd/config.toml > files/missing.toml" in err


def test_a_file_the_plan_never_reads_is_refused(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    stacks = project(tmp_path, "{/etc/containerd/other.toml: files/a.toml}")
    code, _, err = plan(capsys, stacks)
    assert code == 2
    assert "gpuplane:nodes[2].baselineFiles" in err
    assert "/etc/containerd/other.toml is not a file gpuplane plans from on kubeadm" in err


def test_a_relative_node_path_is_a_config_error(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    stacks = project(tmp_path, "{etc/containerd/config.toml: files/a.toml}")
    code, _, err = plan(capsys, stacks)
    assert code == 2 and "must be the file's absolute path on the node" in err


def test_plannable_paths_per_distro() -> None:
    assert plannable_paths(profile("kubeadm")) == [CONFIG, "/etc/containerd/conf.d/"]
    rke2 = plannable_paths(profile("rke2"))
    assert any(p.endswith("config.toml.tmpl") for p in rke2)


def test_policies_judge_a_node_against_its_captured_files(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Host toolkit on a node whose captured config already imports conf.d: gpuplane
    writes only its drop-in. Judged against the model (no imports) the drop-in would look
    unread (FM01); the command carries the captured original, so the pack sees the node."""
    imported = CAPTURED.replace('state = "/run/containerd"\n',
                                'state = "/run/containerd"\n'
                                'imports = ["/etc/containerd/conf.d/*.toml"]\n')
    stacks = project(tmp_path, captured=imported)
    stack = stacks / "Pulumi.t.yaml"
    stack.write_text(stack.read_text().replace("{chartVersion: v25.10.1}",
                                               "{chartVersion: v25.10.1, toolkit: host}"))
    code, report, _ = plan(capsys, stacks)
    assert code == 0 and report is not None and report["findings"] == []
    assert list(report["nodes"][0]["files"]) == ["/etc/containerd/conf.d/50-gpuplane.toml"]
    stdin = next(r["inputs"]["stdin"] for r in report["resources"]
                 if r["name"] == "containerd-a1")
    assert payload_base_texts(stdin) == {CONFIG: imported}


def test_captured_originals_travel_as_comments_and_are_sha_checked() -> None:
    model = profile("kubeadm")
    version = ContainerdVersion.parse("1.7")
    options = PlanOptions(toolkit=ToolkitMode.HOST, systemd_cgroup=True)
    captured = plan_node(model, version, options, current={**model.baseline(version),
                                                                     CONFIG: CAPTURED})
    stdin = apply_stdin(agent_plan(captured))
    assert payload_base_texts(stdin) == {CONFIG: CAPTURED}
    assert "\n#|# captured from a1 on 2026-11-20\n" in stdin   # comments: sh ignores them
    with pytest.raises(ValueError, match="does not match its sha256"):
        payload_base_texts(stdin.replace("#|root = ", "#|root= "))
    # A plan from the model carries no texts: the pack uses the same model.
    assert payload_base_texts(apply_stdin(agent_plan(plan_node(model, version, options)))) == {}


def test_each_node_reports_its_own_effective_runtimes_and_their_source(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`nodes[].effectiveRuntimes` describes the plan made for that node (issue #26): b1's
    own captured file defines a `kata` runtime the distro model lacks."""
    stacks = project(tmp_path, f"{{{CONFIG}: files/b.toml}}")
    (tmp_path / "files" / "b.toml").write_text(
        CAPTURED + '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
        'runtime_type = "io.containerd.kata.v2"\n')
    code, report, _ = plan(capsys, stacks)
    assert code == 0 and report is not None
    a1, _, b1 = report["nodes"]
    assert b1["effectiveRuntimes"]["source"] == {"kind": "captured",
                                                 "files": {CONFIG: "files/b.toml"}}
    for state in ("asFound", "afterGpuplane", "afterToolkit"):
        assert "kata" in b1["effectiveRuntimes"][state]["runtimes"], state
        assert "kata" not in a1["effectiveRuntimes"][state]["runtimes"], state
    assert "kata" not in report["effectiveRuntimes"]["afterToolkit"]["runtimes"]
    assert a1["effectiveRuntimes"]["source"]["files"] == {CONFIG: "files/a.toml"}
