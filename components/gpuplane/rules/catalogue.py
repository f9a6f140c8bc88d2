"""The catalogue of failure modes (FM01 onwards; NVIDIA's DRA driver's FM30-FM37 in
`dra_catalogue`): one short doc per rule id.

Checks, policies and `gpuplane explain` all read their titles and docs from here, so a
finding's id always leads to the same explanation whichever moment produced it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplane.core.findings import Severity
from gpuplane.rules.dra_catalogue import DRA_RULES
from gpuplane.rules.sharing_registry import SHARING_RULES


@dataclass(frozen=True)
class Rule:
    """A failure mode: what users see, why it happens, an example and the way out."""

    id: str
    title: str
    severity: Severity
    symptom: str
    why: str
    example: str
    fix: str
    upstream: str = ""   # the upstream files (file@tag) the doc's facts come from


def _rule(id: str, severity: Severity, title: str, symptom: str, why: str, example: str,
          fix: str) -> Rule:
    return Rule(id, title, severity, symptom, why, example, fix)


_E, _W = Severity.ERROR, Severity.WARNING

_ALL = [
    _rule(
        "FM01", _E, "nvidia runtime defined in a file containerd never reads",
        'GPU pods stay in ContainerCreating with `no runtime for "nvidia" is configured`; '
        "operator pods wait in Init.",
        "containerd reads its top-level config and the files its `imports` globs match, "
        "nothing else. A runtime written to another distro's path, to a template instead of "
        "the generated file, or to a directory no glob covers has no effect at all.",
        "The toolkit writes /etc/containerd/conf.d/99-nvidia.toml, but the node's config "
        'only imports "/etc/containerd/config.d/*.toml".',
        "Write the drop-in where the node's containerd looks (the distro profile's drop-in "
        "directory) or add that directory's `*.toml` glob to `imports` in the top-level "
        "config; check with `gpuplane containerd check`.",
    ),
    _rule(
        "FM02", _E, "a later drop-in replaces the whole CRI table (containerd < 2.1)",
        "runc disappears and the CRI plugin fails to load (node NotReady), or the nvidia "
        "runtime or SystemdCgroup silently vanish.",
        "containerd 1.6 and 1.7 do not merge imported files key by key: for each plugin the "
        "last file that has the plugin's table wins, whole. Anything an earlier file put in "
        "the CRI table is gone, even when the later file only sets one unrelated key: "
        "runtimes (an error), and every other setting too — sandbox image, registry "
        "`config_path`, CNI dirs — which fall back to containerd's built-in defaults "
        "(an error for the CNI dirs, whose default differs between builds; else a warning).",
        "00-k8s-runc.toml defines runc (SystemdCgroup = true, default runtime) and "
        "99-nvidia.toml only adds the nvidia runtime: containerd 1.7 keeps nvidia alone and "
        'refuses `default_runtime_name = "runc"`.',
        "On containerd < 2.1 keep the whole CRI table in one drop-in: default runtime, runc "
        "and nvidia, each with its options. Or upgrade containerd to 2.1, which deep-merges.",
    ),
    _rule(
        "FM03", _E, "config version mismatch or runtime without runtime_type",
        "containerd refuses to start (`unsupported config version`), or settings in one "
        "file are silently ignored, or `container.Runtime.Name must be set`.",
        "Each config version names the CRI plugin differently (`cri`, "
        '`io.containerd.grpc.v1.cri`, `io.containerd.cri.v1.runtime`). containerd 1.7 '
        "refuses version 3, 1.6 ignores it, and 2.x settles on one version for all files, "
        "so a section written for another version is ignored or dropped while migrating. A "
        "file without `version` is version 1: the GPU Operator's toolkit (1.17.8, 1.18.1, "
        "`pkg/config/engine/containerd/config_v1.go`) then adds `plugins.cri` beside the "
        "file's version-2 tables, and containerd 2.x keeps either one at random at each "
        "start (a Go map walk; measured with 2.0.11 and 2.2.7). A runtime without "
        "`runtime_type` gives containerd no shim to start.",
        "A version-2 top-level config plus a version-3 99-nvidia.toml on containerd 2.1: the "
        "merged config ends at version 3 and the version-2 runc section is ignored.",
        "Write every file in the version the top-level uses (version 2 for containerd 1.x; "
        "version 3, or all version 2, for 2.x) and give every runtime "
        '`runtime_type = "io.containerd.runc.v2"`.',
    ),
    _rule(
        "FM04", _E, "generated config edited instead of its template (RKE2/K3s)",
        "The nvidia runtime vanishes at the next agent restart; a broken template can keep "
        "the whole node down after a reboot.",
        "RKE2 and K3s regenerate config.toml from config.toml.tmpl (or their built-in "
        "template) every time the agent starts, so edits to the generated file are "
        "overwritten.",
        "The toolkit patches /var/lib/rancher/rke2/agent/etc/containerd/config.toml "
        "directly; after a reboot the nvidia runtime is gone.",
        "Change config.toml.tmpl (based on the distro's own template) or use the distro's "
        "drop-in mechanism, and render the template before rollout.",
    ),
    _rule(
        "FM05", _W, "another installer rewrites the containerd config later",
        "GPU pods lose GPU access after a reboot or an upgrade, with no change on our side.",
        "Node bootstrap scripts, cloud agents or a second operator own the same file and "
        "write their version of it back.",
        "A cloud-init step renders /etc/containerd/config.toml at every boot, erasing the "
        "nvidia runtime the toolkit added.",
        "Put the nvidia runtime in a drop-in the other writer does not own, or make that "
        "writer the one source of the config; re-check after reboots.",
    ),
    _rule(
        "FM06", _W, "containerd restarted needlessly or everywhere at once",
        "Init containers hang, stateful pods crash-loop, or the whole fleet drops at once.",
        "Restarting containerd interrupts every container operation on the node; doing it "
        "when the config did not change, or on all nodes together, turns a no-op into an "
        "outage.",
        "A DaemonSet rewrites an identical config and restarts containerd on all 40 nodes "
        "in the same minute.",
        "Restart only when the merged config really changed, and roll nodes in small "
        "batches, waiting for each to be Ready.",
    ),
    _rule(
        "FM07", _E, "SystemdCgroup differs between runtimes or from the kubelet",
        "Pods killed at random, cgroup path errors on sandbox creation.",
        "The kubelet and every runc-based runtime must use the same cgroup driver; when "
        "one runtime uses systemd and another cgroupfs, two managers fight over the same "
        "hierarchy. The value read is the one runc gets: 1.x also takes `systemdCgroup`, "
        "`systemdcgroup` and `SYSTEMDCGROUP`, 2.x any case. A warning only when the odd "
        "runtime is neither the default nor one the plan uses (containerd 2.x's built-in "
        "runc beside a vendor's default).",
        "runc has `SystemdCgroup = true` (kubelet cgroupDriver: systemd) but the nvidia "
        "runtime was added without options, so it uses cgroupfs.",
        "Set `SystemdCgroup` in every io.containerd.runc.v2 runtime's options to match the "
        "kubelet (true for the systemd driver, false for cgroupfs); with gpuplane: "
        "`gpuplane:cluster.kubeletCgroupDriver` names the kubelet's driver and "
        "`gpuplane:runtime.systemdCgroup` sets the runtimes' to match.",
    ),
    _rule(
        "FM08", _E, "driver already on the node but the operator installs one too",
        "The driver pod and its validator loop; GPUs never become allocatable.",
        "A pre-installed NVIDIA driver (or a loaded nouveau module) holds the device, so "
        "the operator's driver container cannot load its own module.",
        "A cloud GPU image ships the driver and the chart still has `driver.enabled: true`.",
        "Set `gpuplane:gpuOperator.driver: preinstalled` (chart: `driver.enabled: false`) "
        "where the image has a driver, and keep raw values from turning it back on (the "
        "chart default is true); blacklist nouveau elsewhere.",
    ),
    _rule(
        "FM09", _E, "default runtime points at a runtime that is not there",
        "Every pod without a runtime class fails, GPU or not; containerd's CRI plugin may "
        "refuse to load.",
        "Uninstalling the toolkit removes the nvidia runtime but leaves "
        '`default_runtime_name = "nvidia"` behind, or a config names a default that no '
        "file defines.",
        'default_runtime_name = "nvidia" with no [..runtimes.nvidia] table after an '
        "operator uninstall.",
        "Set the default back to runc (or define the runtime it names) before removing the "
        "nvidia runtime.",
    ),
    _rule(
        "FM10", _E, "time-slicing config malformed",
        "Allocatable GPUs are not multiplied; nothing reports an error.",
        "The device plugin drops keys at the wrong level (`renameByDefault` or "
        "`failRequestsGreaterThanOne` under `flags`) without a word, refuses a config whose "
        "version is not v1, whose timeSlicing has no resources or whose replicas are not an "
        "integer of at least 2, and never sees a ConfigMap name, namespace or profile "
        "(`devicePlugin.config.name`/`default`) it is not told about, or a change it was "
        "not restarted for.",
        "A ConfigMap with `sharing.timeSlicing` nested under `flags`: nvidia.com/gpu stays "
        "at the physical count.",
        "Generate the config from the stack (`gpuplane:timeSlicing.replicas` >= 2, or "
        "`gpuplane:sharing`: resources under the profile's sharing.timeSlicing), point the "
        "operator's devicePlugin.config.name and .default at its ConfigMap and profile, and "
        "restart the device plugin after a change.",
    ),
    _rule(
        "FM11", _E, "GPU pod without runtimeClassName while nvidia is not the default",
        "The pod runs but sees no GPU (nvidia-smi missing, CUDA finds no device).",
        "Only the nvidia runtime injects the driver and devices; when runc is the default, "
        "a pod must ask for nvidia through its runtime class. With CDI (GPU Operator >= "
        "v25.10, `gpuplane:gpuOperator.cdi`) containerd injects the devices itself, and under "
        "HAMi its "
        "webhook adds the runtime class; a runtime class other than nvidia's still gets no "
        "GPU.",
        "A CUDA pod requesting nvidia.com/gpu without `runtimeClassName: nvidia` on an RKE2 "
        "node.",
        "Set `runtimeClassName: nvidia` on GPU pods (or have the operator create and use "
        "the RuntimeClass), or make nvidia the default runtime deliberately.",
    ),
    _rule(
        "FM12", _E, "HAMi alongside the operator's device plugin",
        "nvidia.com/gpu flips between HAMi's virtual count and the physical one; "
        "allocations conflict.",
        "Two device plugins register the same resource name on the same node and overwrite "
        "each other's capacity.",
        "HAMi installed on a cluster where the GPU operator still has "
        "`devicePlugin.enabled: true`.",
        "Disable the operator's device plugin (`devicePlugin.enabled: false`) when HAMi "
        "manages the GPUs.",
    ),
    _rule(
        "FM13", _E, "HAMi prerequisites missing",
        "HAMi's device plugin never schedules, its scheduler crash-loops, NVML is not found "
        "or pods fail with unresolvable CDI devices.",
        "HAMi expects GPU nodes labelled `gpu=on` (its device plugin's nodeSelector), a "
        "kube-scheduler image matching the cluster version, a runtime that injects the "
        "driver into its pods (nvidia as default, or devicePlugin.runtimeClassName), no CDI "
        "from the operator, and a working admission webhook: with failurePolicy Ignore an "
        "unreachable scheduler silently leaves GPU pods unshared.",
        "GPU nodes without the gpu=on label: the HAMi device plugin DaemonSet has zero pods.",
        "Label GPU nodes, pin the scheduler image to the cluster's version "
        "(`gpuplane:hami.schedulerImageTag`), make nvidia the default runtime (or set "
        "runtimeClassName), turn the operator's CDI off (`gpuplane:gpuOperator.cdi: false`) "
        "and run the webhook with failurePolicy Fail and two scheduler replicas.",
    ),
    _rule(
        "FM14", _E, "HAMi GPU request that cannot be honoured",
        "The pod stays Pending or runs with limits other than the ones requested.",
        "HAMi rejects or rewrites impossible requests: gpumem together with "
        "gpumem-percentage (gpumem wins), gpucores above 100 (capped), gpumem-percentage "
        "outside 0-100 (rejected), more GPUs than a node has (never fits), privileged pods "
        "and pods with spec.nodeName (denied); CUDA_DISABLE_CONTROL=true turns its limits "
        "off, and a device split count below 1 or a memory scaling of 0 leaves nothing to "
        "share.",
        "A pod asking for nvidia.com/gpucores: 150.",
        "Request either gpumem or gpumem-percentage, keep gpucores <= 100 and the GPU count "
        "within one node, and do not run GPU pods privileged.",
    ),
    _rule(
        "FM15", _E, "toolkit image flavour does not fit the node OS",
        "Every operator pod fails with `GLIBC_x.y not found`.",
        "The toolkit copies its binaries onto the host; built against a newer glibc than "
        "the host's they cannot run there.",
        "Chart v25.3's default toolkit image, v1.17.8-ubuntu20.04 (glibc 2.31), on Amazon "
        "Linux 2 nodes (glibc 2.26).",
        "Pick a toolkit image flavour built on a glibc no newer than the nodes' "
        "(`gpuplane:gpuOperator.toolkitImage`), or install the toolkit on the hosts "
        "(`gpuplane:gpuOperator.toolkit: host`).",
    ),
    _rule(
        "FM16", _E, "CDI requested on containerd 1.6",
        "GPUs are never allocated to pods.",
        "containerd 1.6 has no CDI support and ignores `enable_cdi` without a word, so "
        "devices announced through CDI never reach a container.",
        "gpuOperator.cdi: true on nodes running containerd 1.6.20.",
        "Upgrade containerd to 1.7 or later, or turn CDI off (remove `enable_cdi`; with "
        "gpuplane: `gpuplane:gpuOperator.cdi: false`).",
    ),
    _rule(
        "FM17", _E, "toolkit pointed at the other of two containerd daemons",
        "Same as FM01, while the other daemon looks perfectly healthy.",
        "Hosts with Docker and a distro-bundled Kubernetes run two containerd daemons with "
        "different configs and sockets; the toolkit's defaults pick the wrong one.",
        "k8s-snap with its own containerd base dir next to Docker's containerd: the toolkit "
        "edits /etc/containerd/config.toml, the kubelet's containerd reads another file.",
        "Set the toolkit's CONTAINERD_CONFIG, CONTAINERD_SOCKET, RUNTIME_DROP_IN_CONFIG and "
        "RUNTIME_CONFIG_SOURCE=file=<config> to the kubelet's containerd, from the distro "
        "profile (`gpuplane:cluster.distro`, `gpuplane:cluster.containerdBaseDir`). On "
        "RKE2/K3s in detected mode (`gpuplane:gpuOperator.runtimeSetup`) set only "
        "CONTAINERD_SOCKET: the distribution adds the runtimes itself; a CONTAINERD_CONFIG "
        "there is a warning (a file it never reads) or, pointed at its template, an error "
        "(the toolkit's template replaces the built-in one).",
    ),
    _rule(
        "FM18", _W, "chart versions unpinned or images mutable",
        "A rollout changes behaviour without any change in the stack.",
        "Floating chart versions and image tags pull whatever was published last; toolkit "
        "releases have changed where and how they write containerd config.",
        "An unpinned operator chart picks up a toolkit that writes to a drop-in directory "
        "nothing imports.",
        "Pin chart versions and image tags (digests where possible) in the stack and "
        "upgrade them deliberately.",
    ),
    _rule(
        "FM19", _E, "MIG strategy differs between the operator and the device plugin",
        "The operator's plugin validation waits for a resource the plugin does not "
        "advertise; pods asking by the operator's strategy stay Pending.",
        "The operator passes its one cluster-wide `mig.strategy` to the device plugin and "
        "to its own plugin validation (`MIG_STRATEGY`), but each key of the plugin's "
        "ConfigMap may set `flags.migStrategy`, which wins for the plugin alone. Two MIG "
        "pools with different strategies, or a raw config that says otherwise, split what "
        "the plugin advertises (nvidia.com/gpu or nvidia.com/mig-*) from what the operator "
        "and the rest of the stack expect.",
        "`mig.strategy: single` in the operator's values, a profile with `flags.migStrategy: "
        "mixed`: the plugin advertises nvidia.com/mig-1g.10gb, the validation asks for "
        "nvidia.com/gpu.",
        "Give every MIG pool the same `mig.strategy` in `gpuplane:sharing` (gpuplane writes "
        "it into the operator's values and every profile).",
    ),
    _rule(
        "FM20", _E, "MIG layout the pool's GPU cannot make",
        "MIG Manager labels the node `nvidia.com/mig.config.state=failed` (or stays "
        "pending) and the node advertises no MIG device.",
        "Each GPU model offers its own MIG profiles (an H100-80GB makes 1g.10gb, an "
        "A100-40GB 1g.5gb), at most 7 compute slices per GPU; GPUs such as the T4, L4, "
        "A10 or L40S have no MIG at all. A layout written for another model, or named from "
        "the mig-parted config without a block for this GPU, cannot be applied; HAMi's MIG "
        "mode on such a GPU finds no profile and schedules nothing there.",
        "`gpuModel: L40S` with `mig: {profile: all-1g.10gb}`, or `all-1g.5gb` on an "
        "H100-80GB.",
        "Set `gpuModel` to the pool's GPU and pick a layout made for it (the finding lists "
        "its profiles; docs/sharing.md has them per model), or share the GPU with "
        "time-slicing or MPS instead.",
    ),
    _rule(
        "FM21", _E, "single MIG strategy over a layout of unlike instances",
        "The device plugin refuses the node (`invalid MIG configuration`) and it "
        "advertises no GPU.",
        "With the single strategy every MIG instance is advertised as nvidia.com/gpu, so "
        "the plugin requires all MIG devices on the node to be alike; a layout such as "
        "`all-balanced` mixes profiles.",
        "`mig: {strategy: single, profile: all-balanced}`.",
        "Use `strategy: mixed` (nvidia.com/mig-<profile> per profile) or a one-profile "
        "layout (`all-1g.10gb`) with single.",
    ),
    _rule(
        "FM22", _E, "MPS where the device plugin cannot run it (MIG, HAMi)",
        "The device plugin exits at start, or the MPS profile is never read; the node "
        "advertises no GPU.",
        "The device plugin's MPS sharing refuses MIG devices and the mixed MIG strategy, "
        "and it exists only in the GPU Operator's plugin, which HAMi replaces.",
        "A pool with `mode: mps` and `mig: {strategy: mixed, ...}`.",
        "Share MIG instances with time-slicing, keep MPS for pools of whole GPUs, and use "
        "HAMi's own slicing under HAMi.",
    ),
    _rule(
        "FM23", _E, "a node selects a sharing profile the ConfigMap lacks",
        "The device plugin pod on the node fails in its config-manager (`specified config "
        "... does not exist`); the node advertises no GPU.",
        "The plugin reads the key its node's `nvidia.com/device-plugin.config` label names, "
        "else `devicePlugin.config.default`. A key missing from the ConfigMap is not a "
        "fallback to the default: the config-manager refuses it.",
        "Nodes labelled `nvidia.com/device-plugin.config=inference` while the ConfigMap "
        "has only `default` and `training`.",
        "Add the key (gpuplane writes one per pool of `gpuplane:sharing`) or relabel the "
        "node with an existing key.",
    ),
    _rule(
        "FM24", _E, "pods ask for several shared GPUs where sharing refuses that",
        "The pod is scheduled, then fails with UnexpectedAdmissionError (`maximum request "
        "size for shared resources is 1`).",
        "With MPS, and with time-slicing when `failRequestsGreaterThanOne` is set, the "
        "device plugin fails any allocation of more than one shared device.",
        "`resources.limits: {nvidia.com/gpu: 2}` on a pool with `mode: mps`.",
        "Ask for one shared GPU per container, or run the pod on a pool of whole GPUs.",
    ),
    _rule(
        "FM25", _E, "pods ask for nvidia.com/gpu where only MIG instances are advertised",
        "The pod stays Pending: `Insufficient nvidia.com/gpu`.",
        "Under the mixed MIG strategy a node advertises its instances as "
        "nvidia.com/mig-<profile> and no nvidia.com/gpu at all.",
        "`nvidia.com/gpu: 1` pinned (nodeSelector) to an H100 pool with `mig: {strategy: "
        "mixed, profile: all-balanced}`.",
        "Ask for the instance (`nvidia.com/mig-1g.10gb: 1`), or schedule the pod on a pool "
        "of whole GPUs.",
    ),
    _rule(
        "FM26", _E, "pods name the nvidia RuntimeClass under the NRI plugin",
        "After turning on the operator's NRI plugin, pods with `runtimeClassName: nvidia` "
        "are refused: RuntimeClass \"nvidia\" not found.",
        "In NRI plugin mode (`cdi.nriPluginEnabled`) the toolkit writes no nvidia runtime "
        "and the operator deletes its RuntimeClasses (nvidia, nvidia-cdi, nvidia-legacy); "
        "the toolkit's NRI plugin and containerd's CDI give pods their GPUs instead.",
        "gpuOperator.nri: true on chart v26.3.0, and a Deployment whose pod spec keeps "
        "`runtimeClassName: nvidia` from the runtime-class days.",
        "Remove runtimeClassName from GPU pods (under NRI the devices come through CDI "
        "whatever the runtime), or leave NRI off (`gpuplane:gpuOperator.nri: false`).",
    ),
    _rule(
        "FM27", _E, "NRI plugin mode on a containerd without NRI",
        "The toolkit pod logs `unable to start NRI plugin server`; the device plugin, GFD "
        "and DCGM get no GPU, and no nvidia runtime exists to fall back on.",
        "The NRI plugin needs containerd 1.7.30+, 2.1 or 2.2 with NRI on in its merged "
        "config. containerd 1.6 has no NRI; 1.7 ships it off (`disable = true`); 2.x has "
        "it on unless a file turns it off. A chart before v26.3.0 ignores the key.",
        "gpuOperator.nri: true on nodes running containerd 1.7.24 whose config.toml never "
        "sets [plugins.\"io.containerd.nri.v1.nri\"] disable = false.",
        "Upgrade containerd (1.7.30+, 2.1, 2.2) and set `disable = false` under "
        "[plugins.\"io.containerd.nri.v1.nri\"] (gpuplane writes that drop-in itself where "
        "it edits the node's files), or leave NRI off.",
    ),
    _rule(
        "FM28", _W, "CDI turned off on a chart that turns it on",
        "After an upgrade to chart v25.10+ GPU pods still need `runtimeClassName: nvidia`; "
        "the nvidia-cdi and nvidia-legacy RuntimeClasses are gone.",
        "From v25.10.0 the chart's `cdi.enabled` defaults to true: containerd's own CDI "
        "injects GPUs for any runtime. `cdi.enabled: false` keeps the older path: the "
        "nvidia runtime injects them, only pods using it get GPUs, the operator deletes "
        "its CDI RuntimeClasses and the NRI plugin mode cannot be used.",
        "gpuOperator.cdi: false with chartVersion v25.10.1.",
        "Leave `gpuplane:gpuOperator.cdi` unset (the chart's default) unless the legacy "
        "runtime is wanted on purpose; HAMi needs it off (FM13).",
    ),
]

# Where each rule's facts come from upstream (file@tag). The measured half of each claim is
# held against the real programs in tests/ (containerd 1.6-2.2, the toolkit installers).
_CTD17 = "containerd/containerd services/server/config/config.go@v1.7.24"
_CTD20 = "containerd/containerd cmd/containerd/server/config/config.go@v2.0.11"
_CRI17 = "containerd/containerd pkg/cri/config/config.go@v1.7.24"
_OPERATOR = "NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v25.10.1"
_OPERATOR_ENV = "NVIDIA/gpu-operator controllers/object_controls.go@v25.10.1"
_HAMI = "Project-HAMi/HAMi charts/hami/values.yaml@v2.10.0"
_PLUGIN = "NVIDIA/k8s-device-plugin"
_MIG_PARTED = "NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml"
_UPSTREAM = {
    "FM01": f"{_CTD17} and {_CTD20} (the top-level file plus what its `imports` match)",
    "FM02": f"{_CTD17} (plugin tables replaced whole per file) and {_CTD20} (deep merge); "
            f"{_CRI17} (the default runtime must be configured)",
    "FM03": f"{_CTD17}, {_CTD20} (config versions, v1 migration); containerd/containerd "
            "plugins/cri/runtime/plugin.go@v2.0.11 (v2 CRI table migrated into v3); "
            "NVIDIA/nvidia-container-toolkit pkg/config/engine/containerd/config_v1.go"
            "@v1.18.1 (a config without `version`)",
    "FM04": "k3s-io/k3s pkg/agent/containerd/config.go@v1.31.6+k3s1 (config.toml rendered "
            "from config-v3.toml.tmpl / config.toml.tmpl at every start)",
    "FM05": "NVIDIA/nvidia-container-toolkit pkg/config/engine/containerd/config_drop_in.go"
            f"@v1.18.1 (the drop-in and the rewritten top-level file); {_OPERATOR_ENV}",
    "FM06": "containerd/containerd containerd.service@v1.7.24 (KillMode=process: containers "
            "survive a restart, CRI and image pulls stop while it runs)",
    "FM07": "kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux.go@v1.31.4 (the "
            "kubelet's cgroup driver); containerd/containerd runtime/v2/runc/options/"
            "oci.proto@v1.7.24 (SystemdCgroup); pkg/cri/server/helpers.go@v1.7.24 and "
            "internal/cri/config/config.go@v2.1.4 (options decoded by go-toml v1.9.5 / "
            "v2.2.x: the key spellings each accepts)",
    "FM08": f"{_OPERATOR} (driver.enabled)",
    "FM09": f"{_CRI17} (a default runtime that is not configured is refused)",
    "FM10": f"{_OPERATOR} (devicePlugin.config.name / .default: the sharing ConfigMap)",
    "FM11": f"{_OPERATOR} (operator.runtimeClass); kubernetes/kubernetes pkg/apis/node/"
            "types.go@v1.31.4 (RuntimeClass handler)",
    "FM12": f"{_HAMI}; {_OPERATOR} (devicePlugin.enabled)",
    "FM13": f"{_HAMI} (scheduler image, admission webhook, nodeSelector gpu=on)",
    "FM14": f"{_HAMI} (the resource names gpumem, gpumem-percentage, gpucores)",
    "FM15": f"{_OPERATOR} (toolkit.repository / image / version: the image flavour)",
    "FM16": f"{_CRI17} (enable_cdi, first in the 1.7 line)",
    "FM17": f"{_OPERATOR_ENV} (CONTAINERD_SOCKET / CONTAINERD_CONFIG for the toolkit)",
    "FM18": f"{_OPERATOR} (toolkit.version, driver.version)",
    "FM19": f"{_OPERATOR} (mig.strategy); NVIDIA/gpu-operator controllers/"
            "object_controls.go@v25.10.1 (MIG_STRATEGY to the plugin and its validation); "
            f"{_PLUGIN} api/config/v1/flags.go@v0.18.0 (flags.migStrategy per config)",
    "FM20": f"{_MIG_PARTED}@v24.3.0-v26.7.0 (the named layouts, device filters and the "
            "models their comments name); Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/"
            "nvinternal/plugin/register.go@v2.10.0 (mig mode skips GPUs without MIG profiles) "
            "and pkg/device/nvidia/device.go@v2.8.3 (CustomFilterRule: no MIG template, no fit)",
    "FM21": f"{_PLUGIN} internal/rm/rm.go@v0.18.0 (single: every MIG device is "
            "nvidia.com/gpu), internal/rm/device_map.go@v0.18.0 (single requires uniform "
            "MIG devices)",
    "FM22": f"{_PLUGIN} internal/plugin/mps.go@v0.18.0 (MPS refuses MIG devices), "
            "cmd/nvidia-device-plugin/main.go@v0.18.0 (mixed strategy refused with MPS); "
            f"{_OPERATOR} (devicePlugin.enabled: false beside HAMi, FM12: no MPS there)",
    "FM23": f"{_PLUGIN} cmd/config-manager/main.go@v0.18.0 (`specified config ... does not "
            f"exist`); {_OPERATOR} (devicePlugin.config.default)",
    "FM24": f"{_PLUGIN} internal/rm/rm.go@v0.18.0 (shared requests over 1 refused: MPS "
            "always, time-slicing with failRequestsGreaterThanOne)",
    "FM25": f"{_PLUGIN} internal/rm/rm.go@v0.18.0 (mixed: nvidia.com/mig-<profile>)",
    "FM26": "NVIDIA/gpu-operator controllers/object_controls.go@v26.3.0 (`RuntimeClasses`: "
            "cleared when state `pre-requisites` is off) and controllers/state_manager.go"
            "@v26.3.0 (off under nriPluginEnabled); assets/pre-requisites/@v26.3.0 (nvidia, "
            "nvidia-legacy, nvidia-cdi); NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk-"
            "installer/container/runtime/runtime.go@v1.19.0 (no runtime written under NRI)",
    "FM27": "NVIDIA/cloud-native-docs gpu-operator/cdi.rst@5e3d218 (containerd 1.7.30, 2.1, "
            "2.2 with NRI enabled); containerd/containerd pkg/nri/config.go@v1.7.29 (off by "
            "default) and internal/nri/config.go@v2.0.11 (on by default); NVIDIA/gpu-operator "
            "deployments/gpu-operator/values.yaml@v26.3.0 (cdi.nriPluginEnabled, first there)",
    "FM28": "NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v25.10.0 (cdi.enabled: "
            "true) and controllers/object_controls.go@v26.3.0 (`RuntimeClasses`: nvidia-cdi "
            "and nvidia-legacy deleted without CDI; `transformToolkitCtrForCDI`)",
}
_ALL = [Rule(**{**r.__dict__, "upstream": _UPSTREAM[r.id]}) for r in _ALL]
_ALL += [Rule(**entry) for entry in DRA_RULES]   # FM30-FM37: NVIDIA's DRA driver
_ALL += [Rule(**entry) for entry in SHARING_RULES]   # FM29: sharing for the other plugin

RULES: dict[str, Rule] = {rule.id: rule for rule in sorted(_ALL, key=lambda r: r.id)}


def explain(rule_id: str) -> str:
    """The doc of one rule (with its topics) or of one topic (`FM06-all-at-once`) as
    plain text. Raises KeyError for an unknown id."""
    from gpuplane.rules.topics import TOPICS, explain_topic, topics_of

    wanted = rule_id.strip()
    topic = {t.lower(): t for t in TOPICS}.get(wanted.lower())
    if topic:
        return explain_topic(TOPICS[topic])
    rule = RULES[wanted.upper()]
    extra = [f"\n{explain_topic(t)}" for t in topics_of(rule.id)]
    return "\n".join([
        f"{rule.id}: {rule.title} (default severity: {rule.severity})",
        "",
        f"Symptom: {rule.symptom}",
        f"Why it breaks: {rule.why}",
        f"Example: {rule.example}",
        f"Fix: {rule.fix}",
        f"Upstream: {rule.upstream}",
        *extra,
    ])
