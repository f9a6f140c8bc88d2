"""The stack config's derived views: the one place that turns keys into what the library
needs (the distribution's profile, the plan options, the cluster intent the rules read).

They live apart from the keys (`stack.py`) because they pull in the planner's world
(profiles, containerd's effective config, the RKE2/K3s runtime setup) while the keys are
plain data; `StackConfig` inherits them, so callers keep writing `cfg.intent()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from gpuplane.config.errors import NAMESPACE
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.intent import IMEX_UNIT, CgroupDriver, ClusterIntent, NodeIntent
from gpuplane.core.sharing import PoolSharing, advertised
from gpuplane.distros.docker_daemon import DockerSettings
from gpuplane.distros.profiles import DistroProfile, profile
from gpuplane.distros.rancher_mode import Choice, choose
from gpuplane.platforms.profiles import PlatformProfile, on_platform, platform_profile
from gpuplane.toolkit.options import NEWEST_TOOLKIT, PlanOptions, ToolkitMode

# gpuplane's own privileged namespace (its intent, the checks, the node agent's pods)
# when there is no GPU Operator, whose namespace it is otherwise: HAMi alone.
HAMI_ALONE_NAMESPACE = "gpuplane"

if TYPE_CHECKING:
    from gpuplane.config.dra import DraDriverConfig
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
    from gpuplane.config.sharing import SharingConfig


class StackViews:
    """What `StackConfig` derives from its keys. A mixin: the keys it reads are declared
    for the type checker only, `StackConfig` defines them."""

    if TYPE_CHECKING:
        cluster: ClusterConfig
        node_pod: NodePodConfig
        nodes: list[NodeConfig]
        device_plugin: DevicePlugin
        runtime: RuntimeConfig
        gpu_operator: GpuOperatorConfig | None
        time_slicing: TimeSlicingConfig
        hami: HamiConfig
        dra_driver: DraDriverConfig | None
        rollout: RolloutConfig
        docker: DockerConfig
        rules: Mapping[str, str]
        sharing: SharingConfig | None

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
    def hami_alone(self) -> bool:
        """HAMi without the GPU Operator block: the host's driver and toolkit."""
        return self.gpu_operator is None and self.device_plugin == "hami"

    @property
    def toolkit(self) -> Literal["operator", "host"]:
        """Who installs the toolkit: `gpuOperator.toolkit`; without the operator, the host."""
        return self.gpu_operator.toolkit if self.gpu_operator is not None else "host"

    @property
    def gpuplane_namespace(self) -> str:
        """The privileged namespace gpuplane creates (its intent ConfigMap, the checks):
        the operator's, else `gpuplane` (HAMi alone)."""
        return self.gpu_operator.namespace if self.gpu_operator is not None \
            else HAMI_ALONE_NAMESPACE

    @property
    def creates_runtime_class(self) -> bool:
        """Whether gpuplane creates the RuntimeClass: `runtime.createRuntimeClass: true`,
        or `auto` without the operator (which creates it otherwise). Never under the
        operator's NRI plugin: no node has the runtime it would name (`true` is refused
        there, gpuplane.config.stack._nri_runtime_class)."""
        create = self.runtime.create_runtime_class
        op = self.gpu_operator
        if op is not None and op.nri:
            return False
        return create is True or (create == "auto" and op is None)

    @property
    def node_pod_namespace(self) -> str:
        """Where the node agent's pods run: `nodePod.namespace`, else gpuplane's own."""
        return self.node_pod.namespace or self.gpuplane_namespace

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

    def baseline_files_of(self, index: int) -> dict[str, tuple[str, str | None]]:
        """Node `index`'s captured files: node path -> (the stack key that names it, the
        local copy's path, or None: the node has no such file). A node's own entries
        override the cluster's."""
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
        if self.gpu_operator is None:
            return None
        return choose(self.profile, self._plan_options(), self.cluster.kubernetes_version,
                      self.gpu_operator.runtime_setup)

    def plan_options(self) -> PlanOptions:
        options = self._plan_options()
        choice = self.runtime_setup
        if choice is None:
            return options
        return replace(options, runtime_setup=choice.path, runtime_setup_why=choice.why)

    def _plan_options(self) -> PlanOptions:
        op = self.gpu_operator
        return PlanOptions(
            toolkit=ToolkitMode(self.toolkit),
            nvidia_default=self.runtime.nvidia_default,
            # The host toolkit's CDI is gpuplane's to write: on for the DRA driver.
            cdi=(bool(op.cdi) if op else False) or (
                self.dra_driver is not None and self.toolkit == "host"),
            nri=bool(op.nri) if op else False,
            systemd_cgroup=self.runtime.systemd_cgroup,
            toolkit_version=op.toolkit_release if op else NEWEST_TOOLKIT,
            runtime_name=self.runtime.name,
            operator_chart=op.chart_version if op else None,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            writes_files=self.node_access,
            mask_units=(IMEX_UNIT,) if self.masks_imex else (),
        )

    @property
    def masks_imex(self) -> bool:
        """Whether the node agent masks the host's nvidia-imex.service: ComputeDomains on
        nodes that carry their own driver, which ships it (FM35), where gpuplane reaches
        the nodes (`nodeAccess: ssh` or `pod`)."""
        dra, op = self.dra_driver, self.gpu_operator
        return bool(self.node_access and dra is not None and dra.compute_domains
                    and (op is None or op.driver == "preinstalled"))

    def sharing_profiles(self) -> dict[str, PoolSharing]:
        """Every sharing profile by its ConfigMap key (gpuplane.config.sharing.profiles)."""
        from gpuplane.config.sharing import profiles

        return profiles(self)  # type: ignore[arg-type]

    def sharing_key(self, pool: str) -> str | None:
        """The ConfigMap key a node of `pool` uses; None: no sharing config."""
        from gpuplane.config.sharing import sharing_key

        return sharing_key(self, pool)  # type: ignore[arg-type]

    def _advertised(self, gpus: int, pool: str) -> tuple[tuple[str, int], ...]:
        """`NodeIntent.resources`: what the node's device plugin advertises where its
        pool's sharing is one the cluster-wide fields cannot say (a `gpuplane:sharing`
        stack: every node); empty otherwise (the cluster's time-slicing, as before). Only
        the modes the cluster's device plugin runs count: a HAMi mode under HAMi, the
        operator plugin's under the operator (the other is FM29's); a DRA pool's GPUs are
        the DRA driver's."""
        if getattr(self, "sharing", None) is None or \
                self.device_plugin not in ("gpu-operator", "hami") or pool in self.dra_pools:
            return ()
        key = self.sharing_key(pool)
        found = self.sharing_profiles().get(key) if key else None
        if found is None or found.hami != (self.device_plugin == "hami"):
            return ()
        return advertised(gpus, found)

    def _sharing_fields(self) -> dict[str, Any]:
        """The intent's sharing profiles and each pool's key: only a `gpuplane:sharing`
        stack writes them (a `timeSlicing` stack's record stays as it was)."""
        if getattr(self, "sharing", None) is None:
            return {}
        return {"sharing": tuple(self.sharing_profiles().values()),
                "sharing_pools": tuple(sorted({(n.pool, key) for n in self.nodes
                                               if (key := self.sharing_key(n.pool))
                                               and n.pool not in self.dra_pools}))}

    def _time_slicing_fields(self) -> dict[str, Any]:
        """The intent's cluster-wide time-slicing fields: `gpuplane:timeSlicing`, or with
        `gpuplane:sharing` its ConfigMap, the `default` key and that key's time-slicing
        (replicas 0 where the default is not time-slicing whole GPUs)."""
        ts = self.time_slicing
        sharing = getattr(self, "sharing", None)
        if sharing is None:
            return {"time_slicing_replicas": ts.replicas, "time_slicing_configmap":
                    ts.config_map, "time_slicing_profile": ts.profile,
                    "time_slicing_rename": ts.rename_by_default}
        d = sharing.default
        on = d.mode == "time-slicing" and d.mig is None and self.device_plugin != "hami"
        return {"time_slicing_replicas": d.replicas if on else 0,
                "time_slicing_configmap": sharing.config_map,
                "time_slicing_profile": "default",
                "time_slicing_rename": d.rename_by_default if on else False}
    @property
    def dra_pools(self) -> tuple[str, ...]:
        """`draDriver.pools`: the pools the DRA driver serves where it serves some only;
        empty: none, or every GPU node (no pools named)."""
        dra = self.dra_driver
        return tuple(dra.pools) if dra is not None and dra.pools is not None else ()

    def dra_pool_nodes(self) -> list[str]:
        """The GPU nodes of `dra_pools`, in stack order (they get `dra_node_labels`)."""
        pools = self.dra_pools
        return [n.name for n in self.nodes if n.gpus > 0 and n.pool in pools]

    @property
    def dra_driver_root(self) -> str:
        """Where the DRA driver reads the NVIDIA driver: `draDriver.driverRoot` as set,
        else the platform's driver directory (GKE COS), else `/run/nvidia/driver` where
        the operator installs the driver (its driver container's root), else `/`."""
        dra, op, plat = self.dra_driver, self.gpu_operator, self.platform
        if dra is not None and dra.driver_root:
            return dra.driver_root
        if plat is not None and plat.install_dir:
            return plat.install_dir
        return "/run/nvidia/driver" if op is not None and op.driver == "managed" else "/"

    def intent(self) -> ClusterIntent:
        op = self.gpu_operator
        dra = self.dra_driver
        return ClusterIntent(
            distro=self.cluster.distro.value,
            platform=self.cluster.platform.value if self.cluster.platform else None,
            containerd_version=self.cluster.containerd_version,
            kubernetes_version=self.cluster.kubernetes_version,
            containerd_base_dir=self.cluster.containerd_base_dir,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            device_plugin=self.device_plugin,
            toolkit=self.toolkit,
            # HAMi alone: the nodes carry the driver (no operator to install it).
            driver_preinstalled=op is None or op.driver == "preinstalled",
            cdi=bool(op.cdi) if op else False,
            nri=bool(op.nri) if op else False,
            nvidia_default=self.runtime.nvidia_default,
            runtime_class=self.runtime.name,
            runtime_setup=self.plan_options().runtime_setup,
            operator_namespace=self.gpuplane_namespace,
            hami_namespace=self.hami.namespace,
            **self._time_slicing_fields(),
            hami_split_count=self.hami.device_split_count,
            max_unavailable=self.rollout.max_unavailable,
            canary=self.rollout.canary,
            allow_all_at_once=self.rollout.allow_all_at_once,
            nodes=tuple(NodeIntent(n.name, n.gpus, n.os, n.pool,
                                   self._advertised(n.gpus, n.pool)) for n in self.nodes),
            **self._sharing_fields(),
            dra=dra is not None,
            dra_driver_root=self.dra_driver_root if dra else "/",
            dra_chart_version=dra.chart_version if dra else "",
            dra_gpus=dra.gpus if dra else True,
            dra_compute_domains=dra.compute_domains if dra else False,
            dra_masks_imex=self.masks_imex,
            dra_pools=self.dra_pools,
            rule_levels=tuple(sorted((k, v) for k, v in self.rules.items()
                                     if v != "mandatory")),
        )
