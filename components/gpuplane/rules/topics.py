"""Docs of the checks added under an existing failure mode: what each one finds, why it
breaks nodes, an example, the fix and the upstream source of the fact (file@tag).

`gpuplane explain FM06` prints them after the rule's own doc; `gpuplane explain
FM06-all-at-once` prints one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One check within a failure mode."""

    id: str          # <rule>-<slug>, e.g. FM06-all-at-once
    title: str
    why: str
    example: str
    fix: str
    upstream: str    # where the fact comes from, file@tag


TOPICS: dict[str, Topic] = {t.id: t for t in [
    Topic(
        "FM06-all-at-once", "a rollout that can take down every GPU node at once",
        "When one batch holds every GPU node (no canary, rollout.maxUnavailable at least "
        "the node count), a change that breaks containerd — or a containerd that does not "
        "come back after the restart — stops every GPU workload together, and no node has "
        "proved the change first.",
        "5 GPU nodes, rollout.canary: false, rollout.maxUnavailable: 5: one batch restarts "
        "containerd on all five.",
        "Keep rollout.canary: true and rollout.maxUnavailable below the GPU node count; to "
        "accept the outage (a maintenance window), set rollout.allowAllAtOnce: true, which "
        "the plan then shows as a warning.",
        "kubernetes/kubernetes pkg/controller/daemon/update.go@v1.31.4 (the same "
        "maxUnavailable model DaemonSet rolling updates use)"),
    Topic(
        "FM18-node-images", "operator chart or toolkit/driver image not pinned (blocking)",
        "The GPU Operator chart pins the toolkit that writes every node's containerd config "
        "and the driver every GPU pod loads. A chart range, a `latest` tag or an image "
        "without a tag lets one upstream publish change both on every node at the next "
        "`pulumi up`, with no change in the stack, and toolkit releases have changed where "
        "and how they write containerd config. So these are errors by default; other images "
        "(HAMi, DCGM, the driver manager) stay advice.",
        "gpuOperator.chartVersion: \"~25.10\", or gpuOperator.toolkitImage.tag: latest.",
        "Pin gpuOperator.chartVersion to one exact version (v25.10.1) and image tags to "
        "releases or sha256 digests. To accept the risk, lower the policy in the policy "
        "config: {\"gpuplane-fm18\": \"advisory\"} (the CrossGuard enforcement level; "
        "`gpuplane plan --policy-pack-config` reads the same file).",
        "NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v25.10.1 (toolkit.version, "
        "driver.version); NVIDIA/nvidia-container-toolkit CHANGELOG.md@v1.18.1 (1.18 writes a "
        "drop-in instead of the top-level config)"),
    Topic(
        "FM18-known-bad", "a GPU Operator release upstream lists as broken on this "
        "distribution (blocking)",
        "A pinned chart can still be one that NVIDIA's own release notes list as failing on "
        "the distribution the stack runs. GPU Operator v24.9.0 pins toolkit 1.17.0, which "
        "reads containerd's config only through `containerd config dump`; RKE2 and K3s keep "
        "their containerd off the PATH, so the toolkit DaemonSet fails on every GPU node. "
        "gpuplane carries such releases as data (gpuplane.rules.known_bad), each with its "
        "upstream record, and reports them while the release's own toolkit is deployed.",
        "gpuOperator.chartVersion: v24.9.0 on `gpuplane:cluster.distro: rke2`.",
        "Move to the release upstream names (v24.9.1 or later), or override the toolkit "
        "image (`gpuplane:gpuOperator.toolkitImage.tag` v1.17.1 or later), as the release "
        "notes recommend.",
        "NVIDIA/cloud-native-docs gpu-operator/release-notes.rst (v24.9.0 Known Limitations, "
        "pull request #127); NVIDIA/gpu-operator issue #1109; NVIDIA/nvidia-container-toolkit "
        "tools/container/runtime/containerd/containerd.go@v1.17.0 (`getRuntimeConfig`)"),
    Topic(
        "FM03-dump-off-path", "toolkit 1.17.0 where the distribution's containerd is off "
        "the PATH",
        "Toolkit 1.17.0 (GPU Operator v24.9.0's pin) reads containerd's config only through "
        "`chroot /host containerd config dump`, with no fall-back to the file. The "
        "`containerd` it runs is the one on the toolkit container's PATH (/usr/bin, "
        "/usr/local/bin, ...); K3s, RKE2, k0s, k8s-snap and MicroK8s keep theirs elsewhere, "
        "so the installer fails and the toolkit DaemonSet never starts on any GPU node.",
        "`gpuplane:cluster.distro: k0s` with gpuOperator.toolkitImage.tag v1.17.0.",
        "Use toolkit 1.18 or later (GPU Operator chart v25.10.0 or later, or "
        "`gpuplane:gpuOperator.toolkitImage.tag` v1.18.0+), which reads the config file "
        "named in RUNTIME_CONFIG_SOURCE.",
        "NVIDIA/nvidia-container-toolkit tools/container/runtime/containerd/containerd.go"
        "@v1.17.0 (`getRuntimeConfig`: dump only) and @v1.17.3 (falls back to the file); "
        "deployments/container/Dockerfile.ubuntu@v1.17.8 (the container's PATH)"),
    Topic(
        "FM03-toolkit-containerd2", "NVIDIA toolkit older than 1.17.4 on containerd 2.x",
        "containerd 2.x reads version-3 configs, where the CRI runtimes live under "
        "`io.containerd.cri.v1.runtime`. Toolkits before 1.17.4 only write the version-2 "
        "table (`io.containerd.grpc.v1.cri`), which containerd 2.x ignores or loses while "
        "migrating; the operator's toolkit DaemonSet does it on every GPU node at once, "
        "with no canary and no node agent to roll it back.",
        "rke2 1.31.6 (containerd 2.0) with gpuOperator.toolkitImage.tag: v1.17.3-ubuntu20.04.",
        "Use toolkit 1.17.4 or later: a chart that pins one (v24.9.2 is the first: it pins "
        "1.17.4; v25.3.0 1.17.5, v25.3.1-v25.3.4 1.17.8, v25.10.1 1.18.1; v24.9.0 and "
        "v24.9.1 pin 1.17.0 and 1.17.3) or a toolkitImage tag >= v1.17.4.",
        "NVIDIA/nvidia-container-toolkit CHANGELOG.md@v1.17.4 (containerd config v3 "
        "support); NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v24.9.1, "
        "@v24.9.2, @v25.3.0 (toolkit.version)"),
    Topic(
        "FM02-states", "a state between the start and the end of the rollout breaks the node",
        "The plan judges every state a node passes through: as found, after gpuplane's "
        "files (the node agent restarts containerd here), after the GPU Operator's toolkit, "
        "and after the toolkit's uninstall while gpuplane's files stay (`pulumi destroy` "
        "removes the operator before the agent restores the node). gpuplane's `imports` "
        "line can switch on drop-ins that lay unread: on 1.x an nvidia-only drop-in replaces "
        "the whole CRI table (runc gone, FM02) and a version-3 drop-in makes 1.7 refuse to "
        "start (FM03). The toolkit's later drop-in may repair the first, so a plan judged "
        "only at the end looked clean while the canary failed during `pulumi up`. Each "
        "finding names the state it first appears in (`state` in JSON, `(state: …)` in "
        "text and markdown).",
        "A node with /etc/containerd/conf.d/50-nvidia.toml holding only the nvidia runtime, "
        "unread because config.toml has no imports; gpuplane adds the conf.d import.",
        "Capture the node's files (baselineFiles), then delete or rewrite the stray drop-in "
        "(a whole CRI table in config version 2 on 1.x) before the rollout.",
        "containerd/containerd cmd/containerd/server/config/config.go@v1.7.24 (per-plugin "
        "table replacement of imports); pkg/cri/config/config.go@v1.7.24"),
    Topic(
        "FM13-webhook-exemptions", "HAMi's fail-closed webhook without namespace exemptions",
        "With `scheduler.admissionWebhook.failurePolicy: Fail` the API server asks HAMi's "
        "webhook about every pod CREATE in every namespace it does not exempt. While every "
        "hami-scheduler replica is down (an upgrade, a node drain, a bad image) no pod can "
        "be created there: kube-system's DNS, CNI and kube-proxy pods on a new node, the GPU "
        "Operator's own pods, and HAMi's scheduler itself if its namespace is not exempt. "
        "An error when kube-system is not exempt, a warning for the HAMi and operator "
        "namespaces. gpuplane exempts all three by default and pulls kube-scheduler from "
        "registry.k8s.io instead of the chart's default registry (registry.cn-hangzhou."
        "aliyuncs.com); `gpuplane:hami.schedulerImageRegistry`/`schedulerImageRepository` name a "
        "mirror.",
        "hami.values: {scheduler: {admissionWebhook: {whitelistNamespaces: []}}} with "
        "hami.webhookFailurePolicy: Fail.",
        "Keep gpuplane's exemptions (add namespaces with hami.webhookExemptNamespaces); raw "
        "Helm: --set 'scheduler.admissionWebhook.whitelistNamespaces={kube-system,"
        "hami-system,gpu-operator}'.",
        "Project-HAMi/HAMi charts/hami/values.yaml@v2.10.0 (scheduler.admissionWebhook."
        "whitelistNamespaces, failurePolicy; scheduler.kubeScheduler.image.registry, "
        ".repository)"),
    # The managed platforms (cluster.platform; gpuplane.platforms.profiles, rules/platform.py).
    Topic(
        "FM08-platform-driver", "the operator's driver where the platform's image has one",
        "The EKS AL2023 NVIDIA AMI, Bottlerocket's NVIDIA variants and AKS's GPU images "
        "preinstall the NVIDIA driver; the operator's driver container then cannot load its "
        "module and its validator loops. On the EKS AL2023 standard AMI the operator has no "
        "driver container at all. An error wherever driver.enabled ends up true there.",
        "cluster.platform: aks-ubuntu with gpuOperator.driver: managed.",
        "Set gpuOperator.driver: preinstalled (driver.enabled=false); on EKS AL2023 run the "
        "NVIDIA AMI or an image built with the driver.",
        "NVIDIA/cloud-native-docs gpu-operator/microsoft-aks.rst@06480cb0 (driver.enabled="
        "false); awslabs/amazon-eks-ami nodeadm/internal/containerd/runtime_config_nvidia.go"
        "@ed5cea81 (the AMI's runtime)"),
    Topic(
        "FM08-platform-toolkit", "the operator's toolkit where the platform's image has one",
        "Where the image preinstalls the NVIDIA Container Toolkit, the platform's own "
        "containerd config already runs NVIDIA's runtime as the default (EKS AL2023 NVIDIA: "
        "`nvidia`; Bottlerocket: `nvidia` via nvidia-oci; AKS: `nvidia-container-runtime`). "
        "The operator's toolkit would install a second copy and rewrite that config on every "
        "GPU node, which the platform writes again at its next boot or provisioning.",
        "cluster.platform: eks-al2023-nvidia with gpuOperator.toolkit: operator.",
        "Set gpuOperator.toolkit: host (toolkit.enabled=false): gpuplane then plans from the "
        "platform's config and writes nothing.",
        "awslabs/amazon-eks-ami nodeadm/internal/containerd/config2.template.toml@3477d8f1; "
        "bottlerocket-os/bottlerocket packages/containerd/containerd-config-toml_k8s_nvidia_"
        "containerd_sock@7b67f911; Azure/AgentBaker aks-node-controller/parser/templates/"
        "containerd_v2.toml.gtpl@e3422a58"),
    Topic(
        "FM12-platform-device-plugin", "a second device plugin on Bottlerocket",
        "Bottlerocket's NVIDIA variants run NVIDIA's device plugin as part of the host, "
        "configured through settings.kubelet-device-plugins.nvidia.*. The operator's device "
        "plugin, or HAMi's, would register nvidia.com/gpu a second time.",
        "cluster.platform: bottlerocket-nvidia with devicePlugin: gpu-operator (or hami).",
        "Set devicePlugin: platform (devicePlugin.enabled=false); share GPUs with "
        "Bottlerocket's device-sharing-strategy / time-slicing settings.",
        "bottlerocket-os/bottlerocket packages/containerd/containerd-config-toml_k8s_nvidia_"
        "containerd_sock@7b67f911 (the variant's own NVIDIA runtime); bottlerocket-os/"
        "bottlerocket-core-kit, the device plugin's settings template (settings.kubelet-"
        "device-plugins.nvidia.*; read as an excerpt, not at a pinned file)"),
    Topic(
        "FM11-platform-runtime", "operator.runtimeClass naming a runtime the platform lacks",
        "With the image's own toolkit, no installer adds a runtime: the operator's "
        "RuntimeClass must name the one the platform's containerd config defines (AKS: "
        "`nvidia-container-runtime`, EKS AL2023 NVIDIA and Bottlerocket: `nvidia`).",
        "cluster.platform: aks-ubuntu with runtime.name: nvidia.",
        "Set runtime.name to the platform's runtime (operator.runtimeClass follows it).",
        "NVIDIA/cloud-native-docs gpu-operator/microsoft-aks.rst@06480cb0 "
        "(operator.runtimeClass=nvidia-container-runtime)"),
    Topic(
        "FM15-cos-install-dirs", "driver and toolkit dirs outside /home/kubernetes/bin/nvidia "
        "on COS",
        "On Container-Optimized OS / is read-only and /etc is a stateless tmpfs; Google's "
        "driver installer puts the driver in /home/kubernetes/bin/nvidia, the one writable, "
        "stateful, executable place. The operator looks for the driver in "
        "hostPaths.driverInstallDir (default /run/nvidia/driver) and installs its toolkit in "
        "toolkit.installDir (default /usr/local/nvidia): both must be that directory.",
        "cluster.platform: gke-cos with gpuOperator.values: {toolkit: {installDir: "
        "/usr/local/nvidia}}.",
        "Leave both to gpuplane (it renders /home/kubernetes/bin/nvidia for gke-cos).",
        "NVIDIA/cloud-native-docs gpu-operator/google-gke.rst@3acf4fa1 (hostPaths."
        "driverInstallDir, toolkit.installDir)"),
    Topic(
        "FM15-hami-driver-root", "HAMi's or the DRA driver's driver root where the platform "
        "keeps the driver outside /",
        "HAMi's device plugin reads the NVIDIA driver under devicePlugin.nvidiaDriverRoot "
        "(unset: the host's /). GKE's Container-Optimized OS keeps the driver in "
        "/home/kubernetes/bin/nvidia, so with the default the plugin finds no NVIDIA library "
        "and registers no GPU. NVIDIA's DRA driver reads it from `nvidiaDriverRoot` "
        "(default /) the same way; gpuplane renders it with gpuplane:draDriver and judges "
        "a release of it that it did not write.",
        "cluster.platform: gke-cos, devicePlugin: hami, a HAMi release without "
        "devicePlugin.nvidiaDriverRoot.",
        "Leave HAMi's to gpuplane (it renders /home/kubernetes/bin/nvidia for gke-cos); raw "
        "Helm: --set devicePlugin.nvidiaDriverRoot=/home/kubernetes/bin/nvidia; for the DRA "
        "driver --set nvidiaDriverRoot=/home/kubernetes/bin/nvidia.",
        "Project-HAMi/HAMi charts/hami/values.yaml@v2.10.0 (devicePlugin.nvidiaDriverRoot), "
        "charts/hami/templates/device-plugin/daemonsetnvidia.yaml@v2.10.0; "
        "NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/values.yaml"
        "@v25.12.0 (nvidiaDriverRoot); "
        "NVIDIA/cloud-native-docs gpu-operator/google-gke.rst@3acf4fa1 (the driver in "
        "/home/kubernetes/bin/nvidia)"),
    Topic(
        "FM13-platform-hami", "HAMi's prerequisites on a managed platform",
        "HAMi needs the only device plugin on its nodes (so not on Bottlerocket, whose image "
        "runs one: FM12) and host paths it can write: its device plugin copies its vGPU "
        "library to devicePlugin.libPath (/usr/local/vgpu) and global.gpuHookPath "
        "(/usr/local), which sit under COS's read-only root. Elsewhere (EKS, AKS, GKE "
        "Ubuntu) the self-managed prerequisites apply (FM13).",
        "cluster.platform: gke-cos with devicePlugin: hami and the chart's default paths.",
        "On COS put both under /home/kubernetes/bin (hami.values); on Bottlerocket keep the "
        "platform's device plugin.",
        "Project-HAMi/HAMi charts/hami/values.yaml@v2.10.0 (global.gpuHookPath, "
        "devicePlugin.libPath) and templates/device-plugin/daemonsetnvidia.yaml@v2.10.0"),
    Topic(
        "FM04-platform-owned", "node files written on a platform that rewrites them",
        "nodeadm renders EKS's containerd config at every boot, Bottlerocket renders it from "
        "its settings (no shell, no SSH), GKE writes it at node start and recreates nodes on "
        "upgrade, AKS renders it at provisioning and reimage. Files gpuplane wrote over SSH "
        "are lost there, and nodes the platform adds later never get them.",
        "cluster.platform: eks-al2023-nvidia with cluster.nodeAccess: ssh.",
        "Set cluster.nodeAccess: none and change containerd through the platform's own input "
        "(EKS NodeConfig, Bottlerocket settings, node-pool flags: docs/platforms.md).",
        "awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go@ed5cea81 (writes "
        "config.toml on every init)"),
    Topic(
        "FM17-config-dump", "the toolkit's config source is `containerd config dump` where "
        "the dump rewrites the platform's paths",
        "The toolkit's default config source runs `containerd config dump` and writes what "
        "it prints back. On GKE 1.33+ (containerd 2.0) that copy replaced GKE's CNI path and "
        "broke pod networking; on AKS's containerd 2.3 it carried `version = 4` into a "
        "drop-in under the version-2 root and containerd exited. Elsewhere a source that "
        "does not read the kubelet's config is a warning (FM17); there an error.",
        "cluster.platform: gke-cos, kubernetesVersion 1.33.5, gpuOperator.values toolkit.env "
        "RUNTIME_CONFIG_SOURCE=command.",
        "Leave toolkit.env to gpuplane (RUNTIME_CONFIG_SOURCE=file=/etc/containerd/"
        "config.toml).",
        "NVIDIA/cloud-native-docs gpu-operator/google-gke.rst@3acf4fa1 (the 1.33 note); "
        "NVIDIA/nvidia-container-toolkit#1222, NVIDIA/gpu-operator#1577, NVIDIA/aicr#1688 "
        "(field reports)"),
    Topic(
        "FM03-dropin-newer", "a drop-in in a newer config version than its root",
        "containerd 2.0-2.2 accept an imported file whose `version` is above the top-level "
        "file's (measured) and refuse any version above 3; containerd 2.3 refuses an "
        "imported file newer than its root (NVIDIA/aicr#1688; not run here). A warning on "
        "2.0-2.2 (the node breaks at the containerd upgrade), an error from 2.3.",
        "A version-2 /etc/containerd/config.toml importing a version-3 99-nvidia.toml.",
        "Write every drop-in in the root's version; point the toolkit at the root "
        "(RUNTIME_CONFIG_SOURCE=file=<root>) so its drop-in copies that version.",
        "containerd/containerd cmd/containerd/server/config/config.go@v2.0.11 (imports, "
        "version limit 3; measured on 2.0-2.2 in tests/real/test_platform_rules.py)"),
    Topic(
        "FM27-merged-config", "NRI off in the node's merged containerd config",
        "The NRI plugin registers over containerd's NRI socket, which exists only where the "
        "merged config has NRI on: 1.7 ships `disable = true`, so a 1.7.30 node is still "
        "off until a file says otherwise, and on 1.x a later file's NRI table replaces an "
        "earlier one whole. Judged on the plan's final state, on `gpuplane containerd check "
        "--nri`, and on nodes where gpuplane writes no file (`cluster.nodeAccess: none`).",
        "containerd 1.7.30 with the kubeadm config.toml and gpuOperator.nri: true, "
        "`cluster.nodeAccess: none`.",
        "Let gpuplane write its NRI drop-in (`cluster.nodeAccess: ssh` or `pod`), or set "
        "`disable = false` under [plugins.\"io.containerd.nri.v1.nri\"] in the node's last "
        "file with that table and restart containerd.",
        "containerd/containerd pkg/nri/config.go@v1.7.29 (`DefaultConfig`: Disable true) and "
        "internal/nri/config.go@v2.0.11 (Disable false); measured with `config dump` on "
        "1.6-2.2 in tests/real/test_nri_dump.py"),
    Topic(
        "FM11-nri", "GPU pods without the nvidia runtime under the NRI plugin",
        "In the operator's NRI plugin mode (which needs CDI) no nvidia runtime exists in "
        "containerd and no pod needs one: containerd's CDI injects the devices the device "
        "plugin allocates. FM11's runtime-class checks stand down there; a pod naming the "
        "deleted RuntimeClasses is FM26.",
        "gpuOperator.nri: true and a Job asking for nvidia.com/gpu without "
        "runtimeClassName: fine.",
        "Nothing to change in the pods; keep `runtimeClassName` out of them.",
        "NVIDIA/gpu-operator controllers/object_controls.go@v26.3.0 (`setRuntimeClassName` "
        "skips the operand pods under NRI); NVIDIA/nvidia-container-toolkit "
        "cmd/nvidia-ctk-installer/container/runtime/runtime.go@v1.19.0"),
    Topic(
        "FM24-plain", "several shared GPUs asked of a GPU Operator the program installs itself",
        "A program that installs the operator itself (a Helm Release, a helm.v4.Chart, a "
        "ClusterPolicy) names its device plugin's profiles: the ConfigMap keys, the default "
        "key for nodes without a nvidia.com/device-plugin.config label, and with each "
        "key's sharing. A node runs the key its label names, else the default, else the "
        "plugin's defaults (no sharing). The scheduler counts replicas like GPUs, so a pod "
        "asking for 2 lands on a node whose key shares with MPS or with "
        "failRequestsGreaterThanOne and fails there. Every key the pod can reach (by its "
        "nodeSelector or required node affinity on that label) refusing: an error; only "
        "some: a warning naming them; a ConfigMap named but not in the program: not judged. "
        "The doctor judges a live cluster the same way, by each GPU node's own labels.",
        "devicePlugin.config: {create: true, name: plugin-config, default: ts, data: {ts: "
        "<timeSlicing replicas 4, failRequestsGreaterThanOne: true>}} and a Deployment "
        "asking for nvidia.com/gpu: 2.",
        "Ask for 1 shared GPU per container, or pin the pod to a key of whole GPUs "
        "(nodeSelector nvidia.com/device-plugin.config=<key>, or NotIn the refusing keys).",
        "NVIDIA/k8s-device-plugin internal/rm/rm.go@v0.18.0 (ValidateRequest: more than "
        "one replica refused under MPS always, under time-slicing with "
        "failRequestsGreaterThanOne), api/config/v1/replicas.go@v0.18.0 (renameByDefault: "
        "<name>.shared; per-resource rename and devices ignored), cmd/config-manager/"
        "main.go@v0.18.0 (label, else DEFAULT_CONFIG, else the fallbacks); NVIDIA/"
        "gpu-operator controllers/object_controls.go@v25.10.1 (FALLBACK_STRATEGIES=empty)"),
    Topic(
        "FM25-plain", "nvidia.com/gpu asked of mixed-MIG nodes a program's operator runs",
        "Under the mixed strategy a MIG-enabled GPU advertises only nvidia.com/mig-<profile>. "
        "For a program's own operator the MIG layout of a node is known only from its "
        "nvidia.com/mig.config label: MIG Manager applies the layout it names, and the "
        "operator labels an unlabelled MIG-capable node only with the all-disabled default "
        "(another migManager.config.default partitions nothing). Nodes without the label "
        "(GPUs without MIG) still advertise nvidia.com/gpu and the scheduler sends the pod "
        "there, so it is an error only when the pod selects MIG layouts (nvidia.com/"
        "mig.config, by nodeSelector or node affinity) under a mixed strategy on every key "
        "it can reach; layouts of a custom mig-parted ConfigMap are not judged.",
        "mig.strategy: mixed and a Job with nodeSelector nvidia.com/mig.config: all-balanced "
        "asking for nvidia.com/gpu: 1.",
        "Ask for the instance (nvidia.com/mig-1g.10gb: 1), select nodes with whole GPUs, or "
        "run mig.strategy: single.",
        "NVIDIA/k8s-device-plugin internal/rm/rm.go@v0.18.0 (mixed: "
        "nvidia.com/mig-<profile>); NVIDIA/gpu-operator controllers/state_manager.go"
        "@v25.10.1 (the all-disabled label on unlabelled MIG-capable nodes), "
        "deployments/gpu-operator/values.yaml@v25.10.1 (migManager.config.default)"),
]}


def topics_of(rule_id: str) -> list[Topic]:
    """The topics under one rule, in catalogue order."""
    return [t for t in TOPICS.values() if t.id.split("-", 1)[0] == rule_id]


def explain_topic(topic: Topic) -> str:
    return "\n".join([f"{topic.id}: {topic.title}", "", f"Why it breaks: {topic.why}",
                      f"Example: {topic.example}", f"Fix: {topic.fix}",
                      f"Upstream: {topic.upstream}"])


__all__ = ["TOPICS", "Topic", "explain_topic", "topics_of"]
