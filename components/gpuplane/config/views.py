"""The stack config's derived views: the one place that turns keys into what the library
needs (the distribution's profile, the plan options, the cluster intent the rules read).

They live apart from the keys (`stack.py`) because they pull in the planner's world
(profiles, containerd's effective config, the RKE2/K3s runtime setup) while the keys are
plain data; `StackConfig` inherits them, so callers keep writing `cfg.intent()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuplane.config.errors import NAMESPACE
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.intent import CgroupDriver, ClusterIntent, NodeIntent
from gpuplane.distros.docker_daemon import DockerSettings
from gpuplane.distros.profiles import DistroProfile, profile
from gpuplane.distros.rancher_mode import Choice, choose
from gpuplane.platforms.profiles import PlatformProfile, on_platform, platform_profile
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

if TYPE_CHECKING:
    from gpuplane.config.releases import GpuOperatorConfig, HamiConfig
    from gpuplane.config.sections import (
        ClusterConfig,
        DevicePlugin,
        DockerConfig,
        NodeConfig,
        NodePodConfig,
        RolloutConfig,
        RuntimeConfig,
        TimeSlicingConfig,
    )


class StackViews:
    """What `StackConfig` derives from its keys. A mixin: the keys it reads are declared
    for the type checker only, `StackConfig` defines them."""

    if TYPE_CHECKING:
        cluster: ClusterConfig
        node_pod: NodePodConfig
        nodes: list[NodeConfig]
        device_plugin: DevicePlugin
        runtime: RuntimeConfig
        gpu_operator: GpuOperatorConfig
        time_slicing: TimeSlicingConfig
        hami: HamiConfig
        rollout: RolloutConfig
        docker: DockerConfig
        rules: Mapping[str, str]

    @property
    def platform(self) -> PlatformProfile | None:
        """The managed platform's profile (`cluster.platform`), or None."""
        return platform_profile(self.cluster.platform) if self.cluster.platform else None

    @property
    def profile(self) -> DistroProfile:
        # A platform: the kubeadm layout, with the config it writes as the fresh node.
        return on_platform(profile(self.cluster.distro, self.cluster.containerd_base_dir),
                           self.cluster.platform)

    @property
    def containerd(self) -> ContainerdVersion:
        return ContainerdVersion.parse(self.cluster.containerd_version)

    @property
    def node_access(self) -> bool:
        """Whether gpuplane writes node files (`ssh` or `pod`: the same agent)."""
        return self.cluster.node_access in ("ssh", "pod")

    @property
    def node_pod_namespace(self) -> str:
        """Where the node agent's pods run: `nodePod.namespace`, else the operator's."""
        return self.node_pod.namespace or self.gpu_operator.namespace

    @property
    def docker_settings(self) -> DockerSettings | None:
        """What the planner writes into Docker's daemon.json; None: Docker is left alone."""
        if not self.docker.nvidia_runtime:
            return None
        return DockerSettings(set_as_default=self.docker.set_as_default)

    @property
    def kubelet_cgroup_driver(self) -> CgroupDriver:
        """As set, else what the distribution pairs its kubelet with: the cgroup driver its
        own containerd config gives runc on a fresh node."""
        if self.cluster.kubelet_cgroup_driver:
            return self.cluster.kubelet_cgroup_driver
        from gpuplane.containerd import MemoryFiles, effective_config
        from gpuplane.containerd.options import decoded
        from gpuplane.plan.layout import rendered_layout

        prof, version = self.profile, self.containerd
        eff = effective_config(prof.config_path, MemoryFiles(
            rendered_layout(prof.baseline(version), prof, version)), version)
        # runc, or the default where the distribution's config has no runc table (the
        # platforms whose images make NVIDIA's runtime the default: gpuplane.platforms.profiles).
        runc = eff.runtimes.get("runc") if eff.default_runtime not in eff.runtimes \
            else eff.runtimes[eff.default_runtime]
        systemd = runc and decoded(runc.options, "SystemdCgroup", version) is True
        return "systemd" if systemd else "cgroupfs"

    def baseline_files_of(self, index: int) -> dict[str, tuple[str, str]]:
        """Node `index`'s captured files: node path -> (the stack key that names it, the
        local copy's path). A node's own entries override the cluster's."""
        out = {path: (f"{NAMESPACE}:cluster.baselineFiles", local)
               for path, local in self.cluster.baseline_files.items()}
        out.update({path: (f"{NAMESPACE}:nodes[{index}].baselineFiles", local)
                    for path, local in self.nodes[index].baseline_files.items()})
        return out

    @property
    def hami_scheduler_tag(self) -> str:
        return self.hami.scheduler_image_tag or f"v{self.cluster.kubernetes_version}"

    @property
    def runtime_setup(self) -> Choice | None:
        """RKE2/K3s with the operator's toolkit: the path `gpuOperator.runtimeSetup` gives
        (gpuplane.distros.rancher_mode); None elsewhere. ValueError for an explicit `detected` the
        distribution's detection cannot serve."""
        return choose(self.profile, self._plan_options(), self.cluster.kubernetes_version,
                      self.gpu_operator.runtime_setup)

    def plan_options(self) -> PlanOptions:
        options = self._plan_options()
        choice = self.runtime_setup
        if choice is None:
            return options
        return replace(options, runtime_setup=choice.path, runtime_setup_why=choice.why)

    def _plan_options(self) -> PlanOptions:
        return PlanOptions(
            toolkit=ToolkitMode(self.gpu_operator.toolkit),
            nvidia_default=self.runtime.nvidia_default,
            cdi=self.gpu_operator.cdi,
            systemd_cgroup=self.runtime.systemd_cgroup,
            toolkit_version=self.gpu_operator.toolkit_release,
            runtime_name=self.runtime.name,
            operator_chart=self.gpu_operator.chart_version,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            writes_files=self.node_access,
        )

    def intent(self) -> ClusterIntent:
        return ClusterIntent(
            distro=self.cluster.distro.value,
            platform=self.cluster.platform.value if self.cluster.platform else None,
            containerd_version=self.cluster.containerd_version,
            kubernetes_version=self.cluster.kubernetes_version,
            containerd_base_dir=self.cluster.containerd_base_dir,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            device_plugin=self.device_plugin,
            toolkit=self.gpu_operator.toolkit,
            driver_preinstalled=self.gpu_operator.driver == "preinstalled",
            cdi=self.gpu_operator.cdi,
            nvidia_default=self.runtime.nvidia_default,
            runtime_class=self.runtime.name,
            runtime_setup=self.plan_options().runtime_setup,
            operator_namespace=self.gpu_operator.namespace,
            hami_namespace=self.hami.namespace,
            time_slicing_replicas=self.time_slicing.replicas,
            time_slicing_configmap=self.time_slicing.config_map,
            time_slicing_profile=self.time_slicing.profile,
            time_slicing_rename=self.time_slicing.rename_by_default,
            hami_split_count=self.hami.device_split_count,
            max_unavailable=self.rollout.max_unavailable,
            canary=self.rollout.canary,
            allow_all_at_once=self.rollout.allow_all_at_once,
            nodes=tuple(NodeIntent(n.name, n.gpus, n.os, n.pool) for n in self.nodes),
            rule_levels=tuple(sorted((k, v) for k, v in self.rules.items()
                                     if v != "mandatory")),
        )
