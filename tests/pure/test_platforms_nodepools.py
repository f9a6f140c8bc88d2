"""AKS and GKE: the node-pool commands and fields gpuplane hands the user (issue #29)."""

from __future__ import annotations

import json
import shlex

import pytest

from gpuplane.platforms.native import (
    AksNodePool,
    GkeNodePool,
    PlatformInputError,
    aks_nodepool,
    gke_nodepool,
)

AKS = dict(resource_group="rg", cluster="prod", name="gpu", vm_size="Standard_NC24ads_A100_v4")


@pytest.mark.parametrize(("cli", "flag"), [("2.72.2", "--gpu-driver none"),
                                           ("2.80.0", "--gpu-driver none"),
                                           ("2.72.1", "--skip-gpu-driver-install"),
                                           ("2.60", "--skip-gpu-driver-install")])
def test_aks_without_the_driver(cli: str, flag: str) -> None:
    p = aks_nodepool(AksNodePool(**AKS, driver="operator", az_cli_version=cli))
    assert flag in p.command_line
    assert p.command[:4] == ("az", "aks", "nodepool", "add")
    assert p.fields["gpuProfile"] == {"driver": "None"}
    assert ("--skip-gpu-driver-install" in p.command) is (flag != "--gpu-driver none")


def test_aks_keeping_the_preinstalled_stack() -> None:
    p = aks_nodepool(AksNodePool(**AKS, labels={"gpuplane.io/gpu": "true"}))
    assert "--gpu-driver" not in p.command and "--skip-gpu-driver-install" not in p.command
    assert "gpuProfile" not in p.fields
    assert p.command[-2:] == ("--labels", "gpuplane.io/gpu=true")
    assert p.fields["nodeLabels"] == {"gpuplane.io/gpu": "true"}
    assert any("driver" in item for item in p.will_not_touch)
    assert any("nvidia-container-runtime" in note for note in p.notes)


@pytest.mark.parametrize(("pool", "key"), [
    (AksNodePool(**AKS, driver="operator", az_cli_version="latest"),
     "gpuplane:platform.aks.azCliVersion"),
    (AksNodePool(**AKS, labels={"-bad": "x"}), "gpuplane:platform.aks.labels"),
    (AksNodePool(**AKS, labels={"ok": "not ok"}), "gpuplane:platform.aks.labels"),
])
def test_aks_bad_input(pool: AksNodePool, key: str) -> None:
    with pytest.raises(PlatformInputError) as err:
        aks_nodepool(pool)
    assert err.value.key == key


def test_gke_per_nvidias_recipe() -> None:
    p = gke_nodepool(GkeNodePool("prod", "gpu", "nvidia-l4", 2, machine_type="g2-standard-24",
                                 location="us-central1", labels={"team": "ml"}))
    argv = shlex.split(p.command_line)
    assert argv[:5] == ["gcloud", "container", "node-pools", "create", "gpu"]
    accel = argv[argv.index("--accelerator") + 1]
    assert accel == "type=nvidia-l4,count=2,gpu-driver-version=disabled"
    labels = argv[argv.index("--node-labels") + 1].split(",")
    assert "gke-no-default-nvidia-gpu-device-plugin=true" in labels and "team=ml" in labels
    acc = p.fields["nodeConfig"]["guestAccelerators"][0]
    assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}
    assert p.fields["nodeConfig"]["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert json.loads(json.dumps(p.to_output()))["commandLine"] == p.command_line


def test_gke_with_gkes_driver() -> None:
    p = gke_nodepool(GkeNodePool("prod", "gpu", "nvidia-tesla-t4", driver="latest",
                                 image_type="UBUNTU_CONTAINERD"))
    acc = p.fields["nodeConfig"]["guestAccelerators"][0]
    assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert "gpu-driver-version=latest" in p.command_line
    assert any("GKE's NVIDIA driver" in item for item in p.will_not_touch)


@pytest.mark.parametrize(("pool", "key"), [
    (GkeNodePool("c", "p", "nvidia-l4", 0), "gpuplane:platform.gke.acceleratorCount"),
    (GkeNodePool("c", "p", "nvidia-l4,count=2"), "gpuplane:platform.gke.acceleratorType"),
    (GkeNodePool("c", "p", "nvidia-l4",
                 labels={"gke-no-default-nvidia-gpu-device-plugin": "false"}),
     "gpuplane:platform.gke.labels"),
])
def test_gke_bad_input(pool: GkeNodePool, key: str) -> None:
    with pytest.raises(PlatformInputError) as err:
        gke_nodepool(pool)
    assert err.value.key == key
