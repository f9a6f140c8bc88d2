"""`gpuplane:draDriver`: its keys, the values gpuplane renders for NVIDIA's DRA driver
(through Helm's engine on the driver's chart at every tag in ../shared/charts), and the
bundled DRA stack, clean and broken, under the offline plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support import charts

from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfig, StackConfigError
from gpuplane.config.helm_values import dra_values, operator_values
from gpuplane.rules.dra_facts import DRA_KNOWN, device_classes, dra_chart_of

STACKS = Path(__file__).resolve().parents[2] / "stacks"
BASE: dict[str, Any] = {
    "cluster": {"kubernetesVersion": "1.34.3", "containerdVersion": "2.1",
                "nodeAccess": "none"},
    "gpuOperator": {"chartVersion": "v25.10.1"},
    "draDriver": {"chartVersion": "v0.4.1"},
}


def config(**changes: Any) -> StackConfig:
    data = {**BASE, **changes}
    return StackConfig.model_validate(data)


def problems(**changes: Any) -> list[tuple[str, str]]:
    with pytest.raises((StackConfigError, ValueError)) as exc:
        config(**changes)
    return [(str(e.get("loc")), e["msg"]) for e in exc.value.errors()] \
        if hasattr(exc.value, "errors") else [("", str(exc.value))]


def test_dra_driver_keys_are_typed() -> None:
    cfg = config(draDriver={"chartVersion": "v25.12.0", "computeDomains": True,
                            "featureGates": {"MPSSupport": True}, "driverRoot": "/opt/nv"})
    assert cfg.dra_driver is not None and cfg.dra_driver.chart_name == "nvidia-dra-driver-gpu"
    values = dra_values(cfg)
    assert values["nvidiaDriverRoot"] == "/opt/nv" and values["featureGates"] == {
        "MPSSupport": True}
    assert cfg.intent().dra and cfg.intent().dra_compute_domains
    assert "draDriver" in str(problems(draDriver={"chartVersion": "v0.4.1", "bogus": 1}))
    assert "v0.4.1" in str(problems(draDriver={"chartVersion": "v0.3.0"}))
    assert "hand out nothing" in str(problems(draDriver={
        "chartVersion": "v0.4.1", "gpus": False, "computeDomains": False}))
    assert "default namespace" in str(problems(draDriver={
        "chartVersion": "v0.4.1", "namespace": "default"}))
    assert "absolute" in str(problems(draDriver={"chartVersion": "v0.4.1",
                                                 "driverRoot": "run/nvidia"}))
    # An OCI reference names the chart the version is published as.
    assert "nvidia-dra-driver-gpu" in str(problems(draDriver={
        "chartVersion": "v25.12.0", "chart": "oci://r.example/charts/dra-driver-nvidia-gpu"}))


def test_fm31_driver_root_follows_where_the_driver_lives() -> None:
    assert dra_values(config())["nvidiaDriverRoot"] == "/"
    managed = config(gpuOperator={"chartVersion": "v25.10.1", "driver": "managed"})
    assert dra_values(managed)["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert managed.intent().dra_driver_root == "/run/nvidia/driver"


def test_fm32_the_operator_device_plugin_is_off_with_dra_gpus() -> None:
    assert operator_values(config(), [])["devicePlugin"]["enabled"] is False
    cds_only = config(draDriver={"chartVersion": "v0.4.1", "gpus": False,
                                 "computeDomains": True})
    assert operator_values(cds_only, [])["devicePlugin"]["enabled"] is True


def _kubelet_plugin(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "DaemonSet"
                and d["metadata"]["name"].endswith("kubelet-plugin"))


def _env(ds: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for c in ds["spec"]["template"]["spec"]["containers"]
            for e in c.get("env", []) if "value" in e}


@pytest.mark.parametrize("tag", DRA_KNOWN)
def test_fm32_gpuplane_values_render_at_every_driver_tag(tag: str) -> None:
    """Helm's engine on the chart at `tag`: the chart's own guard (no GPUs without
    gpuResourcesEnabledOverride) fails its defaults, gpuplane's values render, and the
    DeviceClasses it creates are the ones the rules judge claims against."""
    folder = charts.chart_dirs(dra_chart_of(tag))[tag]
    with pytest.raises(Exception, match="gpuResourcesEnabledOverride"):
        charts.render(folder, {}, namespace="nvidia-dra-driver-gpu")
    cfg = config(draDriver={"chartVersion": tag, "computeDomains": True})
    docs = charts.render(folder, dra_values(cfg), namespace="nvidia-dra-driver-gpu")
    classes = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "DeviceClass")
    assert classes == sorted(device_classes(tag))
    gpus_only = charts.render(folder, dra_values(config(draDriver={"chartVersion": tag})),
                              namespace="nvidia-dra-driver-gpu")
    assert sorted(d["metadata"]["name"] for d in gpus_only if d["kind"] == "DeviceClass") \
        == sorted(device_classes(tag, compute_domains=False))


@pytest.mark.parametrize("tag", DRA_KNOWN)
def test_fm31_fm36_driver_root_and_k0s_paths_reach_the_kubelet_plugin(tag: str) -> None:
    folder = charts.chart_dirs(dra_chart_of(tag))[tag]
    k0s = config(cluster={"distro": "k0s", "kubernetesVersion": "1.34.3",
                          "containerdVersion": "1.7", "nodeAccess": "none"},
                 gpuOperator={"chartVersion": "v25.10.1", "driver": "managed"},
                 draDriver={"chartVersion": tag})
    ds = _kubelet_plugin(charts.render(folder, dra_values(k0s),
                                       namespace="nvidia-dra-driver-gpu"))
    env = _env(ds)
    assert env["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert env["KUBELET_REGISTRAR_DIRECTORY_PATH"] == "/var/lib/k0s/kubelet/plugins_registry"
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/k0s/kubelet/plugins"
    host = {v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"]
            if "hostPath" in v}
    assert {"/var/lib/k0s/kubelet/plugins_registry", "/var/lib/k0s/kubelet/plugins"} <= host


@pytest.mark.parametrize("tag", DRA_KNOWN)
def test_image_mirror_moves_the_driver_image_at_every_tag(tag: str) -> None:
    folder = charts.chart_dirs(dra_chart_of(tag))[tag]
    default = charts.values(folder)["image"]["repository"]
    mirrored = config(draDriver={"chartVersion": tag, "imageMirror": "mirror.example:5000"})
    docs = charts.render(folder, dra_values(mirrored), namespace="nvidia-dra-driver-gpu")
    images = {c["image"] for d in docs if d["kind"] in ("DaemonSet", "Deployment")
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images and all(i.startswith("mirror.example:5000/") for i in images), images
    path = default.split("/", 1)[1]
    assert all(i.split(":")[1].removeprefix("5000/") == path for i in images), images


def _variant(tmp_path: Path, **keys: Any) -> dict[str, Any]:
    doc = yaml.safe_load((STACKS / "Pulumi.kubeadm-dra.yaml").read_text())
    for key, value in keys.items():
        section, _, field = key.partition(".")
        name = f"gpuplane:{section}"
        if value is None:   # the key goes
            doc["config"].pop(name, None)
        elif field:
            doc["config"][name] = {**doc["config"].get(name, {}), field: value}
        else:
            doc["config"][name] = value
    (tmp_path / "Pulumi.kubeadm-dra.yaml").write_text(yaml.safe_dump(doc))
    return plan_stack("kubeadm-dra", tmp_path)


def _errors(plan: dict[str, Any]) -> list[str]:
    return sorted({f["id"] for f in plan["findings"] if f["severity"] == "error"})


def test_fm30_fm31_fm32_fm33_bundled_dra_stack_and_its_broken_variants(
        tmp_path: Path) -> None:
    clean = plan_stack("kubeadm-dra", STACKS)
    assert clean["findings"] == [] and list(clean["helm"]) == [
        "gpu-operator", "dra-driver-nvidia-gpu"]
    cluster = yaml.safe_load((STACKS / "Pulumi.kubeadm-dra.yaml").read_text())[
        "config"]["gpuplane:cluster"]
    assert _errors(_variant(tmp_path, **{"gpuOperator.cdi": False, "cluster": {
        **cluster, "kubernetesVersion": "1.31.4", "containerdVersion": "1.7"}})) == [
        "FM30", "FM33"]
    assert _errors(_variant(tmp_path, **{"draDriver.driverRoot": "/run/nvidia/driver"})) \
        == ["FM31"]
    assert _errors(_variant(tmp_path, **{"gpuOperator.values": {
        "devicePlugin": {"enabled": True}}})) == ["FM32"]
    assert _errors(_variant(tmp_path, **{"draDriver.values": {"kubeletPlugin": {
        "kubeletPluginsDirectoryPath": "/srv/kubelet/plugins"}}})) == ["FM36"]


def test_fm34_fm35_operator_dra_mode_and_imex_in_the_bundled_stack(tmp_path: Path) -> None:
    plan = _variant(tmp_path, **{"gpuOperator.values": {"gpuCluster": {"deployCR": True}}})
    assert _errors(plan) == ["FM34"]
    assert len([f for f in plan["findings"] if f["id"] == "FM34"]) == 2
    plan = _variant(tmp_path, **{"draDriver.computeDomains": True})
    assert [(f["id"], f["severity"]) for f in plan["findings"]] == [("FM35", "warning")]


def test_fm35_the_node_plan_masks_imex_where_gpuplane_reaches_the_nodes(
        tmp_path: Path) -> None:
    """ComputeDomains on the nodes' own driver with `nodeAccess: ssh`: each node's plan
    carries the mask step (the JSON, the text and markdown views, the diff against the
    plan without it, and the node command's stdin), and FM35 says gpuplane masks it
    there; with `nodeAccess: none` no step, and FM35 keeps the commands."""
    from io import StringIO

    from rich.console import Console

    from gpuplane.cli.plan.diff import plan_diff
    from gpuplane.cli.plan.render import render_markdown, render_text

    base = plan_stack("kubeadm-dra", STACKS)
    plan = _variant(tmp_path, **{"draDriver.computeDomains": True})
    step = [{"unit": "nvidia-imex.service", "action": "mask"}]
    assert [n["hostUnits"] for n in plan["nodes"]] == [step, step]
    assert [n["hostUnits"] for n in base["nodes"]] == [[], []]
    (fm35,) = plan["findings"]
    assert "gpuplane masks it on h100-01, h100-02" in fm35["message"]
    assert "systemctl" not in fm35["fix"]
    stdin = next(r["inputs"]["stdin"] for r in plan["resources"]
                 if r["name"] == "containerd-h100-01")
    assert "gp_plan mask_unit nvidia-imex.service" in stdin.splitlines()
    plan["diff"] = plan_diff(base, plan)
    assert plan["diff"]["hostUnits"] == {
        n: [{"unit": "nvidia-imex.service", "change": "mask"}] for n in ("h100-01", "h100-02")}
    assert "host unit `nvidia-imex.service` is masked on h100-01, h100-02" in \
        render_markdown(plan)
    out = StringIO()
    render_text(plan, Console(file=out, width=200))
    assert "host unit nvidia-imex.service: masked on h100-01, h100-02" in out.getvalue()

    cluster = yaml.safe_load((STACKS / "Pulumi.kubeadm-dra.yaml").read_text())[
        "config"]["gpuplane:cluster"]
    unreached = _variant(tmp_path, cluster={**cluster, "nodeAccess": "none"},
                         **{"draDriver.computeDomains": True, "ssh": None,
                            "sshPrivateKey": None, "rollout": None})
    assert all(n["hostUnits"] == [] for n in unreached["nodes"])
    (fm35,) = [f for f in unreached["findings"] if f["id"] == "FM35"]
    assert "systemctl mask nvidia-imex.service" in fm35["fix"]


def test_fm35_with_dra_pools_only_the_drivers_nodes_are_masked(tmp_path: Path) -> None:
    """ComputeDomains run only where the driver's kubelet plugin runs: with
    `draDriver.pools`, the nodes of the other pools keep their host nvidia-imex.service
    (no mask step in their plan), and FM35 names the driver's nodes only."""
    nodes = [{"name": "h100-01", "host": "10.30.0.11", "gpus": 8, "os": "ubuntu24.04",
              "pool": "training"},
             {"name": "l40s-01", "host": "10.30.0.21", "gpus": 4, "os": "ubuntu24.04",
              "pool": "inference"}]
    plan = _variant(tmp_path, nodes=nodes, **{"draDriver.computeDomains": True,
                                              "draDriver.pools": ["training"]})
    step = [{"unit": "nvidia-imex.service", "action": "mask"}]
    assert {n["name"]: n["hostUnits"] for n in plan["nodes"]} == {
        "h100-01": step, "l40s-01": []}
    stdin = {r["name"]: r["inputs"]["stdin"] for r in plan["resources"]
             if r["name"].startswith("containerd-")}
    assert "gp_plan mask_unit nvidia-imex.service" in stdin["containerd-h100-01"]
    assert "mask_unit" not in stdin["containerd-l40s-01"]
    (fm35,) = [f for f in plan["findings"] if f["id"] == "FM35"]
    assert "gpuplane masks it on h100-01 " in fm35["message"]
    assert "l40s-01" not in fm35["message"]


def _foreign(config: dict[str, Any], operator: dict[str, Any] | None = None
             ) -> list[tuple[str, str]]:
    """A plain program's DRA release (and operator), judged with the pack config's facts."""
    from gpuplane.policy.collect import intent_from_config, stack_findings
    from gpuplane.policy.views import View

    release = "kubernetes:helm.sh/v3:Release"
    views = [View(release, "dra", "urn:dra", {
        "name": "dra-driver-nvidia-gpu", "chart": "dra-driver-nvidia-gpu", "version": "0.4.1",
        "values": {"gpuResourcesEnabledOverride": True}})]
    if operator is not None:
        views.append(View(release, "op", "urn:op", {
            "name": "gpu-operator", "chart": "gpu-operator", "version": "v25.10.1",
            "values": operator}))
    found = stack_findings(views, intent_from_config(config), config).items
    return sorted((i.finding.id, i.finding.severity.value) for i in found)


def test_fm30_fm33_a_plain_dra_release_is_judged_on_the_facts_given() -> None:
    facts = {"kubernetesVersion": "1.34.3", "containerdVersion": "2.1"}
    # The chart's default: ComputeDomains on; the nodes' own driver: host IMEX (FM35).
    assert _foreign(facts) == [("FM35", "warning")]
    assert _foreign({**facts, "containerdVersion": "1.6"}) == [
        ("FM30", "error"), ("FM35", "warning")]
    # Without the facts, the defaults do not stand in: "not judged", once per fact.
    assert _foreign({}) == [("FM30", "warning"), ("FM33", "warning"), ("FM35", "warning")]
    # The operator in the same program installs the driver: its root is /run/nvidia/driver.
    assert ("FM31", "error") in _foreign(facts, operator={"devicePlugin": {"enabled": False}})
    assert ("FM32", "error") in _foreign(facts, operator={"driver": {"enabled": False}})


def test_fm30_a_node_whose_merged_config_keeps_cdi_off(tmp_path: Path) -> None:
    """Captured files that set enable_cdi = false on containerd 2.x, the operator's CDI
    off: the node plan's merged config keeps CDI off, and the stack is refused (FM30);
    gpuOperator.cdi: true (the toolkit's drop-in then turns it on) plans clean."""
    captured = tmp_path / "captured.toml"
    captured.write_text('version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n'
                        "  enable_cdi = false\n"
                        '[plugins."io.containerd.cri.v1.runtime".containerd]\n'
                        '  default_runtime_name = "runc"\n'
                        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]\n'
                        '  runtime_type = "io.containerd.runc.v2"\n'
                        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc'
                        '.options]\n  SystemdCgroup = true\n')
    cluster = yaml.safe_load((STACKS / "Pulumi.kubeadm-dra.yaml").read_text())[
        "config"]["gpuplane:cluster"]
    cluster = {**cluster, "baselineFiles": {"/etc/containerd/config.toml": str(captured)}}
    plan = _variant(tmp_path, cluster=cluster, **{"gpuOperator.cdi": False})
    assert [(f["id"], f["where"]) for f in plan["findings"] if f["severity"] == "error"] \
        == [("FM30", "node plan /etc/containerd/config.toml")]
    assert _errors(_variant(tmp_path, cluster=cluster)) == []


def test_fm32_fm34_the_doctor_judges_a_live_dra_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A live cluster (the doctor's healthy snapshot) with the DRA driver's release added
    beside the operator whose device plugin is still on: FM32; with the operator's own
    DRA mode on as well, FM34. The plugin turned off: neither."""
    import json
    import shutil

    from gpuplane.cli.main import main

    def ids(operator: dict[str, Any]) -> set[str]:
        snap = tmp_path / f"snap-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(Path(__file__).resolve().parents[1] / "data/doctor/healthy", snap)
        releases = json.loads((snap / "helm-releases.json").read_text())
        releases["items"][0]["values"].update(operator)
        releases["items"].append({
            "chart": {"name": "dra-driver-nvidia-gpu", "version": "0.4.1"},
            "name": "dra-driver-nvidia-gpu", "namespace": "nvidia-dra-driver-gpu",
            "status": "deployed", "values": {"gpuResourcesEnabledOverride": True}})
        (snap / "helm-releases.json").write_text(json.dumps(releases))
        main(["doctor", "--from", str(snap), "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        return {d["id"] for d in report["findings"]}

    assert "FM32" in ids({})
    assert {"FM32", "FM34"} <= ids({"gpuCluster": {"deployCR": True}})
    assert not {"FM32", "FM34"} & ids({"devicePlugin": {"enabled": False}})


def test_fm18_an_unpinned_dra_chart(tmp_path: Path) -> None:
    """A DRA driver chart version that is a range is FM18, as the operator's is; a plain
    program's release without a version too."""
    plan = _variant(tmp_path, **{"draDriver.chartVersion": "0.4"})
    assert [(f["id"], f["severity"]) for f in plan["findings"]] == [("FM18", "warning")]
    assert "gpuplane:draDriver.chartVersion" in plan["findings"][0]["fix"]
    from gpuplane.policy.collect import intent_from_config, stack_findings
    from gpuplane.policy.views import View

    view = View("kubernetes:helm.sh/v3:Release", "dra", "urn:dra", {
        "name": "dra-driver-nvidia-gpu", "chart": "dra-driver-nvidia-gpu",
        "values": {"gpuResourcesEnabledOverride": True,
                   "resources": {"computeDomains": {"enabled": False}}}})
    facts = {"kubernetesVersion": "1.34.3", "containerdVersion": "2.1"}
    found = stack_findings([view], intent_from_config(facts), facts).items
    assert [i.finding.id for i in found] == ["FM18"]
