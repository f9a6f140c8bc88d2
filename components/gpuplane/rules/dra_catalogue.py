"""The catalogue entries and the registry rows of FM30-FM38, NVIDIA's DRA driver for GPUs.

Kept apart from `catalogue.py` and `registry.py` (which merge them in) so that the DRA
rules read as one unit: the doc of each failure mode, the upstream files (file@tag) its
facts come from, the functions that emit it and the tests that hold it.
"""

from __future__ import annotations

from typing import Any

from gpuplane.core.findings import Severity

_E, _W = Severity.ERROR, Severity.WARNING
_DRA = "NVIDIA/k8s-dra-driver-gpu"
_SIGS = "kubernetes-sigs/dra-driver-nvidia-gpu"
_CHART = "deployments/helm/nvidia-dra-driver-gpu"

DRA_RULES: list[dict[str, Any]] = [
    dict(
        id="FM30", severity=_E, title="DRA driver on a containerd without CDI",
        symptom="Claimed pods fail to start with `unresolvable CDI devices`.",
        why="The DRA driver hands devices to containers only through CDI: it writes a CDI "
            "spec per claim into /var/run/cdi and the runtime injects what it names. "
            "containerd 1.6 has no CDI, 1.7 has it off unless `enable_cdi = true`, 2.x has "
            "it on.",
        example="draDriver on containerdVersion 1.7 with gpuOperator.cdi: false.",
        fix="containerd 2.x, or on 1.7 `enable_cdi = true` (gpuplane: gpuOperator.cdi: true, "
            "whose toolkit writes it).",
        upstream=f"{_DRA} docs/prerequisites.md@v0.4.0 (CDI on by default from containerd "
                 f"2.0); {_SIGS} {_CHART.replace('nvidia-dra-driver-gpu', 'dra-driver-nvidia-gpu')}"
                 "/templates/kubeletplugin.yaml@v0.4.1 (CDI_ROOT /var/run/cdi); "
                 "containerd/containerd pkg/cri/config/config.go@v1.7.24 (enable_cdi)"),
    dict(
        id="FM31", severity=_E,
        title="DRA driver's nvidiaDriverRoot is not where the driver lives",
        symptom="The kubelet plugin stays in Init; no ResourceSlice from gpu.nvidia.com.",
        why="The plugin mounts `nvidiaDriverRoot` (default `/`) and waits for nvidia-smi and "
            "libnvidia-ml there. A host driver is under `/`; the GPU Operator's driver "
            "container puts it under /run/nvidia/driver (GKE COS: FM15).",
        example="gpuOperator.driver: managed with the DRA driver's nvidiaDriverRoot left at /.",
        fix="Leave draDriver.driverRoot unset (gpuplane derives it) or set it to where the "
            "driver lives.",
        upstream=f"{_DRA} {_CHART}/values.yaml@v25.12.0 (nvidiaDriverRoot), docs/install.md"
                 f"@v0.4.0; {_SIGS} hack/kubelet-plugin-prestart.sh@v0.4.1"),
    dict(
        id="FM32", severity=_E,
        title="a device plugin and the DRA driver hand out the same GPUs",
        symptom="Nodes are over-admitted: one GPU goes to a claim and to a device-plugin pod.",
        why="With resources.gpus.enabled the driver must not share a node with the GPU "
            "device plugin until KEP 5004 is GA; its chart refuses to render unless "
            "gpuResourcesEnabledOverride says the plugin is off. Judged per node where the "
            "nodes are known: the operator's plugin runs where "
            "nvidia.com/gpu.deploy.device-plugin is \"true\" (the operator sets it on a GPU "
            "node without it and keeps a \"false\"), the driver's kubelet plugin where its "
            "kubeletPlugin.nodeSelector and its required node affinity "
            "(kubeletPlugin.affinity, terms ORed; a label the program sets on no node may "
            "match) match. A pod asking for both nvidia.com/gpu and a claim depends on "
            "both.",
        example="A GPU Operator release with devicePlugin.enabled left true beside the driver; "
                "with draDriver.pools, a kubeletPlugin.nodeSelector that also matches the "
                "device plugin's nodes.",
        fix="devicePlugin.enabled=false in the operator (gpuplane does it with draDriver.gpus), "
            "or the plugin off on the driver's nodes only (gpuplane: draDriver.pools labels "
            "them nvidia.com/gpu.deploy.device-plugin=false and selects them); pods ask for "
            "GPUs one way.",
        upstream=f"{_DRA} {_CHART}/templates/validation.yaml@v25.12.0 "
                 "(gpuResourcesEnabledOverride), templates/kubeletplugin.yaml@v25.12.0 "
                 "(kubeletPlugin.nodeSelector, kubeletPlugin.affinity); "
                 "docs/prerequisites.md@v0.4.0; NVIDIA/"
                 "gpu-operator controllers/state_manager.go@v24.3.0, @v26.7.0 "
                 "(addGPUStateLabels), assets/state-device-plugin/0500_daemonset.yaml@v26.7.0"),
    dict(
        id="FM33", severity=_E, title="DRA driver on a Kubernetes without DRA on",
        symptom="The release fails to install, or claims are never allocated.",
        why="DynamicResourceAllocation is GA and on from 1.34 (resource.k8s.io/v1). 1.32 "
            "and 1.33 have it beta and off: the gate on all four components and the beta "
            "API groups are needed. The charts refuse anything before 1.32.",
        example="draDriver on kubernetesVersion 1.31.4.",
        fix="Kubernetes 1.34 or later (or the gate and API groups on 1.32/1.33).",
        upstream=f"{_DRA} {_CHART}/Chart.yaml@v25.12.0 (kubeVersion >=1.32.0-0), "
                 "docs/prerequisites.md@v0.4.0; kubernetes/website feature-gates/"
                 "DynamicResourceAllocation.md"),
    dict(
        id="FM34", severity=_E,
        title="the GPU Operator's DRA mode beside a ClusterPolicy or a second driver",
        symptom="Two controllers reconcile the same nodes; two drivers publish gpu.nvidia.com.",
        why="GPU Operator v26.7 runs the DRA driver itself under a GPUCluster "
            "(gpuCluster.deployCR), which the chart calls invalid beside its ClusterPolicy "
            "(clusterPolicy.deployCR, on by default); a separate driver release doubles it.",
        example="gpuCluster.deployCR: true with clusterPolicy.deployCR left true.",
        fix="clusterPolicy.deployCR: false with gpuCluster.deployCR: true, and one DRA driver.",
        upstream="NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0 "
                 "(clusterPolicy, gpuCluster, draDriver)"),
    dict(
        id="FM35", severity=_W, title="host nvidia-imex.service with ComputeDomains",
        symptom="The ComputeDomain daemon never becomes Ready (NV_ERR_IN_USE).",
        why="ComputeDomains run their own IMEX daemon; a preinstalled driver ships "
            "nvidia-imex.service, which holds the IMEX session unless disabled and masked. "
            "Where gpuplane reaches the nodes (nodeAccess ssh or pod) its node agent masks "
            "the unit, recording its state, and destroy puts it back; with nodeAccess: none "
            "the step is the user's.",
        example="draDriver.computeDomains: true on nodes with gpuOperator.driver: preinstalled.",
        fix="With node access, nothing: the plan lists the mask step per node. Otherwise "
            "`systemctl disable --now nvidia-imex.service && systemctl mask "
            "nvidia-imex.service` on each GPU node.",
        upstream=f"{_DRA} docs/prerequisites.md@v0.4.0 (disable and mask nvidia-imex)"),
    dict(
        id="FM36", severity=_E, title="DRA kubelet plugin paths outside the kubelet's root",
        symptom="The kubelet never registers the plugin; claims are never prepared.",
        why="The plugin registers under kubeletPlugin.kubeletRegistrarDirectoryPath and "
            "serves under kubeletPluginsDirectoryPath (default /var/lib/kubelet/...). k0s "
            "keeps the kubelet's root in /var/lib/k0s/kubelet.",
        example="The driver on k0s with the chart's default kubelet paths.",
        fix="Point both paths under the kubelet's root (gpuplane does on k0s).",
        upstream=f"{_DRA} {_CHART}/values.yaml@v25.8.1 (kubeletPlugin.*DirectoryPath); "
                 "k0sproject/k0s pkg/constant/constant_posix.go (DataDirDefault /var/lib/k0s)"),
    dict(
        id="FM37", severity=_E,
        title="a claim asks for a DeviceClass or attribute the driver does not publish",
        symptom="The claim is never allocated; its pods stay Pending without an error.",
        why="The scheduler allocates only devices a ResourceSlice publishes that match the "
            "class and the CEL selectors. The driver creates five DeviceClasses at most and "
            "publishes a fixed set of attributes per release (`index` and `minor` are gone "
            "since v25.8.0).",
        example="A selector `device.attributes['gpu.nvidia.com'].index == 0`; a class "
                "imex.nvidia.com.",
        fix="Use the driver's classes (gpu.nvidia.com, mig.nvidia.com, ...) and attributes "
            "(uuid, productName, profile, ...).",
        upstream=f"{_SIGS} deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml"
                 "@v0.4.1, cmd/gpu-kubelet-plugin/deviceinfo.go@v0.4.1; "
                 f"{_DRA} cmd/gpu-kubelet-plugin/deviceinfo.go@v25.8.1"),
    dict(
        id="FM38", severity=_E, title="the DRA driver publishes no GPU for a GPU node",
        symptom="Pods that claim a GPU (a ResourceClaim of DeviceClass gpu.nvidia.com) stay "
            "Pending with `cannot allocate all claims`; `kubectl get resourceslices` shows "
            "nothing from driver gpu.nvidia.com for the node, or claims stay unallocated.",
        why="With Dynamic Resource Allocation the scheduler hands out only the devices a DRA "
            "driver publishes in ResourceSlices. NVIDIA's kubelet plugin publishes one pool per "
            "node, named after it; when the plugin is not running there (no GPU labels), cannot "
            "find the driver (`nvidiaDriverRoot`) or is not installed with GPUs enabled, the "
            "node has no ResourceSlice and no claim can be satisfied on it, while the node "
            "itself looks Ready.",
        example="The DRA driver installed with `nvidiaDriverRoot: /` on nodes whose driver the GPU "
            "Operator runs from /run/nvidia/driver: the kubelet plugin waits in its init "
            "container and gpu-node-1 never gets a ResourceSlice.",
        fix="Make the kubelet plugin run on every GPU node and find the driver: "
            "`nvidiaDriverRoot` (`/` for a host driver, `/run/nvidia/driver` with the GPU "
            "Operator's driver), the NFD / GPU Operator GPU labels on the node, "
            "`resources.gpus.enabled: true`. Then `kubectl get resourceslices --field-selector "
            "spec.driver=gpu.nvidia.com` lists one pool per GPU node. `gpuplane doctor` names "
            "each node without one and each unallocated GPU claim with its reason.",
        upstream="kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/main.go@v0.4.1 "
            "(DriverName gpu.nvidia.com), docs/install.md@v0.4.0 (a pool per node), "
            "hack/kubelet-plugin-prestart.sh@v0.4.1 (waits for the driver under "
            "nvidiaDriverRoot), templates/deviceclass-gpu.yaml@v0.4.1; kubernetes/kubernetes "
            "pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go@v1.34.3 "
            "(claims allocated only from published ResourceSlices)",
    ),
]

_T = "tests/pure/test_dra_rules.py::"
_S = "tests/pure/test_dra_stack.py::"
_P = "tests/pure/test_dra_pools.py::"
_BUNDLED = f"{_S}test_fm30_fm31_fm32_fm33_bundled_dra_stack_and_its_broken_variants"
_DOCTOR = f"{_S}test_fm32_fm34_the_doctor_judges_a_live_dra_release"
_PLAIN = f"{_S}test_fm30_fm33_a_plain_dra_release_is_judged_on_the_facts_given"
DRA_REGISTRY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "FM30": (("gpuplane.rules.dra._cdi", "gpuplane.rules.dra.check_dra_node_cdi"),
             (f"{_T}test_fm30_containerd_1_6_and_1_7_without_cdi", _BUNDLED, _PLAIN,
              f"{_S}test_fm30_a_node_whose_merged_config_keeps_cdi_off",
              "tests/real/test_dra_cdi.py::"
              "test_fm30_the_dra_node_plan_turns_cdi_on_in_the_merged_config",
              "tests/real/test_dra_cdi.py::test_fm30_a_captured_config_with_cdi_off_is_refused")),
    "FM31": (("gpuplane.rules.dra._driver_root",),
             (f"{_T}test_fm31_driver_root_for_host_and_operator_driver",
              f"{_S}test_fm31_driver_root_follows_where_the_driver_lives",
              f"{_S}test_fm31_fm36_driver_root_and_k0s_paths_reach_the_kubelet_plugin",
              _BUNDLED)),
    "FM32": (("gpuplane.rules.dra._device_plugin", "gpuplane.rules.dra._twice",
              "gpuplane.rules.dra_workloads.check_pod_claims"),
             (f"{_T}test_fm32_operator_device_plugin_beside_the_driver",
              f"{_T}test_fm32_pod_asks_for_nvidia_gpu_and_a_claim",
              f"{_S}test_fm32_the_operator_device_plugin_is_off_with_dra_gpus",
              f"{_S}test_fm32_gpuplane_values_render_at_every_driver_tag", _BUNDLED, _DOCTOR,
              f"{_P}test_fm32_served_twice_by_the_labels_each_node_gets",
              f"{_P}test_fm32_per_node_in_the_release_check",
              f"{_P}test_fm32_the_bundled_split_plans_clean_and_an_override_is_refused",
              f"{_P}test_fm32_the_doctor_judges_the_live_nodes_labels",
              "tests/real/test_dra_pools_render.py::"
              "test_fm32_the_split_reaches_both_charts_at_every_tag",
              "tests/engine/test_dra_pools_nodes.py::"
              "test_fm32_the_dra_and_device_plugin_pools_get_one_plugin_each")),
    "FM33": (("gpuplane.rules.dra._kubernetes",),
             (f"{_T}test_fm33_kubernetes_before_1_34", _BUNDLED, _PLAIN)),
    "FM34": (("gpuplane.rules.dra.check_operator_dra",),
             (f"{_T}test_fm34_cluster_policy_and_gpu_cluster",
              f"{_S}test_fm34_fm35_operator_dra_mode_and_imex_in_the_bundled_stack", _DOCTOR)),
    "FM35": (("gpuplane.rules.dra._imex",),
             (f"{_T}test_fm35_imex_with_compute_domains_on_preinstalled_driver",
              f"{_T}test_fm35_says_where_gpuplane_masks_the_unit",
              f"{_S}test_fm34_fm35_operator_dra_mode_and_imex_in_the_bundled_stack",
              f"{_S}test_fm35_the_node_plan_masks_imex_where_gpuplane_reaches_the_nodes",
              "tests/real/test_agent_units.py::"
              "test_fm35_apply_masks_the_unit_and_restore_puts_back_its_state")),
    "FM36": (("gpuplane.rules.dra._kubelet_paths",),
             (f"{_T}test_fm36_k0s_kubelet_plugin_paths",
              f"{_S}test_fm31_fm36_driver_root_and_k0s_paths_reach_the_kubelet_plugin")),
    "FM37": (("gpuplane.rules.dra_workloads.check_claim",
              "gpuplane.rules.dra_workloads._unknown"),
             (f"{_T}test_fm37_device_class_the_driver_does_not_create",
              f"{_T}test_fm37_selector_on_an_attribute_the_driver_does_not_publish")),
    "FM38": ((
            "gpuplane.checks.dra.resourceslice_findings",
            "gpuplane.checks.dra.dra_cause",
            "gpuplane.doctor.dra.claim_finding",
            "gpuplane.doctor.dra.dra_health",
        ),
        (
            "tests/pure/test_checks_dra.py::test_fm38_fm08_resourceslice_findings",
            "tests/pure/test_checks_dra.py::test_fm38_a_probe_pod_whose_claim_cannot_be_allocated",
            "tests/pure/test_checks_dra.py::test_fm38_resourceslice_check_waits_for_the_plugin_then_fails_naming_the_node",
            "tests/pure/test_doctor_dra.py::test_fm38_doctor_names_each_gpu_node_without_a_resourceslice",
            "tests/pure/test_doctor_dra.py::test_fm38_doctor_explains_unallocated_claims",
            "tests/pure/test_dra_pools.py::"
            "test_fm38_fm10_the_allocatable_check_judges_each_node_its_own_way",
            "tests/pure/test_dra_pools.py::test_fm38_fm10_the_doctor_judges_each_pool_its_own_way",
            "tests/engine/test_dra_scheduler.py::test_fm38_scheduler_allocates_the_probe_claim_on_its_node_and_not_on_a_node_without_slices",
            "tests/engine/test_dra_scheduler.py::test_fm38_a_selector_on_index_stays_unallocated_as_predicted_and_the_doctor_says_why",
        ),
    ),
}

__all__ = ["DRA_REGISTRY", "DRA_RULES"]
