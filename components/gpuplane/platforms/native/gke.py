"""GKE: the node-pool accelerator flag and labels for a GPU pool the GPU Operator serves,
per NVIDIA's recipe.

Why: on COS the root is read-only and `/etc` is stateless, and GKE installs the driver
and runs its own device plugin; gpuplane writes no node file there. Facts:

- NVIDIA cloud-native-docs `gpu-operator/google-gke.rst`: create the pool with
  `--accelerator type=...,count=...,gpu-driver-version=disabled` and the node label
  `gke-no-default-nvidia-gpu-device-plugin=true` (GKE's device plugin stays off those
  nodes); operator values `hostPaths.driverInstallDir=/home/kubernetes/bin/nvidia`,
  `toolkit.installDir=/home/kubernetes/bin/nvidia`, `cdi.enabled=true`,
  `driver.enabled=false` on COS, and `RUNTIME_CONFIG_SOURCE=file` in `toolkit.env` on
  GKE 1.33+.
- `gcloud container node-pools create NAME --accelerator=[type=TYPE,[count=COUNT,
  gpu-driver-version=GPU_DRIVER_VERSION,...]]` and `--node-labels`
  (cloud.google.com/sdk/gcloud/reference/container/node-pools/create).
- The API field: `nodeConfig.accelerators[].gpuDriverInstallationConfig.gpuDriverVersion`
  = `INSTALLATION_DISABLED` (google.container.v1 `GPUDriverInstallationConfig`; DEFAULT,
  LATEST and GPU_DRIVER_VERSION_UNSPECIFIED are the others). pulumi-gcp
  `container.NodePool`: `nodeConfig.guestAccelerators[].gpuDriverInstallationConfig
  .gpuDriverVersion` and `nodeConfig.labels` (pulumi_gcp docs,
  `NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuplane.platforms.native.labels import check_labels
from gpuplane.platforms.native.result import PlatformInput, PlatformInputError

SOURCES = (
    "NVIDIA/cloud-native-docs gpu-operator/google-gke.rst",
    "cloud.google.com/sdk/gcloud/reference/container/node-pools/create (--accelerator, "
    "--node-labels)",
    "google.container.v1 GPUDriverInstallationConfig.GPUDriverVersion",
    "pulumi_gcp container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfig",
)
NO_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
_KEY = "gpuplane:platform.gke"
_DRIVER_API = {"disabled": "INSTALLATION_DISABLED", "default": "DEFAULT", "latest": "LATEST"}


@dataclass(frozen=True)
class GkeNodePool:
    """A GPU node pool to create. `driver`: `disabled` (NVIDIA's recipe; GKE installs no
    driver), or GKE's `default` / `latest` driver. `image_type`: COS_CONTAINERD or
    UBUNTU_CONTAINERD."""

    cluster: str
    name: str
    accelerator_type: str
    accelerator_count: int = 1
    machine_type: str | None = None
    location: str | None = None
    driver: Literal["disabled", "default", "latest"] = "disabled"
    image_type: str = "COS_CONTAINERD"
    labels: Mapping[str, str] = field(default_factory=dict)


def gke_nodepool(pool: GkeNodePool) -> PlatformInput:
    """The `gcloud container node-pools create` command and the NodePool fields."""
    if pool.accelerator_count < 1:
        raise PlatformInputError(f"{_KEY}.acceleratorCount",
                                 f"accelerator count {pool.accelerator_count}.",
                                 "Use 1 or more GPUs per node.")
    if pool.driver not in _DRIVER_API:
        raise PlatformInputError(f"{_KEY}.driver", f"driver {pool.driver!r}.",
                                 "Use disabled, default or latest.")
    if "," in pool.accelerator_type or "=" in pool.accelerator_type:
        raise PlatformInputError(f"{_KEY}.acceleratorType",
                                 f"accelerator type {pool.accelerator_type!r}.",
                                 "Use one GKE accelerator name, e.g. nvidia-l4.")
    user = check_labels(pool.labels, f"{_KEY}.labels")
    if user.get(NO_DEVICE_PLUGIN, "true") != "true":
        raise PlatformInputError(
            f"{_KEY}.labels", f"{NO_DEVICE_PLUGIN}={user[NO_DEVICE_PLUGIN]}: GKE's device "
            "plugin would run beside the operator's and both would advertise nvidia.com/gpu.",
            f"Drop the label; gpuplane sets {NO_DEVICE_PLUGIN}=true.")
    labels = {**user, NO_DEVICE_PLUGIN: "true"}
    accel = (f"type={pool.accelerator_type},count={pool.accelerator_count},"
             f"gpu-driver-version={pool.driver}")
    argv = ["gcloud", "container", "node-pools", "create", pool.name,
            "--cluster", pool.cluster]
    if pool.location:
        argv += ["--location", pool.location]
    if pool.machine_type:
        argv += ["--machine-type", pool.machine_type]
    argv += ["--image-type", pool.image_type, "--accelerator", accel,
             "--node-labels", ",".join(f"{k}={v}" for k, v in labels.items())]
    node_config: dict[str, object] = {
        "imageType": pool.image_type,
        "guestAccelerators": [{
            "type": pool.accelerator_type, "count": pool.accelerator_count,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": _DRIVER_API[pool.driver]}}],
        "labels": labels}
    if pool.machine_type:
        node_config["machineType"] = pool.machine_type
    fields: dict[str, object] = {"cluster": pool.cluster, "name": pool.name,
                                 "nodeConfig": node_config}
    if pool.location:
        fields["location"] = pool.location
    cos = pool.image_type.upper().startswith("COS")
    notes = [f"{NO_DEVICE_PLUGIN}=true keeps GKE's device plugin off: the operator's "
             "plugin advertises nvidia.com/gpu"]
    if pool.driver == "disabled" and cos:
        notes.append("COS: NVIDIA's recipe keeps driver.enabled=false; the driver comes "
                     "from GKE's driver installer into /home/kubernetes/bin/nvidia")
    untouched = ["the node's files (COS: read-only root, stateless /etc)" if cos
                 else "the node's files (GKE manages the node image)"]
    if pool.driver != "disabled":
        untouched.append(f"GKE's NVIDIA driver ({pool.driver}) in /home/kubernetes/bin/nvidia")
    summary = (f"create the GPU pool with gpu-driver-version={pool.driver} and GKE's device "
               "plugin off")
    return PlatformInput(kind="gke-nodepool", platform=f"GKE ({pool.image_type})",
                         summary=summary, fields=fields, command=tuple(argv),
                         will_not_touch=tuple(untouched), sources=SOURCES,
                         notes=tuple(notes))
