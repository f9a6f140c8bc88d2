"""`StackConfig`, every `gpuplane:*` key of a stack, and the checks that compare keys.

A combination check is a function that yields a `Problem` per thing wrong, each with the
stack key to edit; all of them run, so a stack learns every mistake at once. Each check
declares the top-level keys it reads (`needs`): when some keys fail their own validation
the others are still compared (`problems_beside`), skipping only the checks that would
read a broken key and so report a consequence instead of a cause.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from gpuplane.config.dra import DRA_POOL_NEEDS, DraDriverConfig, dra_pool_problems
from gpuplane.config.errors import Problem, StackConfigError, stack_key
from gpuplane.config.releases import GpuOperatorConfig, HamiConfig
from gpuplane.config.sections import (
    ChecksConfig,
    ClusterConfig,
    DevicePlugin,
    DockerConfig,
    NodeConfig,
    NodePodConfig,
    NodePoolConfig,
    RolloutConfig,
    RuntimeConfig,
    SshConfig,
    TimeSlicingConfig,
    _Section,
)
from gpuplane.config.sharing import SHARING_NEEDS, SharingConfig, sharing_problems
from gpuplane.config.unused import UNUSED_CHECKS
from gpuplane.config.views import StackViews
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import Distro, bundled_containerd_major, k0s_unsupported
from gpuplane.distros.rancher_mode import DetectionRefused
from gpuplane.platforms.profiles import DEVICE_PLUGIN, Platform, platform_profile


def _known_rule(rule: str) -> str:
    """A `gpuplane:rules` key: a rule id of the catalogue."""
    from gpuplane.rules.catalogue import RULES

    if rule not in RULES:
        number = re.fullmatch(r"\s*(?:fm)?\s*0*(\d{1,2})\s*", rule, re.I)
        padded = f"FM{int(number[1]):02d}" if number else ""
        close = [padded] if padded in RULES else difflib.get_close_matches(
            rule.upper(), list(RULES), n=1, cutoff=0.6)
        guess = f"did you mean {close[0]}? " if close else ""
        raise ValueError(f"no rule {rule!r}; {guess}the rules are {', '.join(RULES)} "
                         "(`gpuplane explain` describes each; docs/reference/rules/)")
    return rule


class StackConfig(_Section, StackViews):
    """All of a stack's `gpuplane:*` keys.

    Unknown keys are errors (`gpuplane:bogus: unknown key; known keys: ...`), and so are
    combinations that cannot work: the host toolkit without node access, time-slicing
    with HAMi, no `gpuOperator` unless `devicePlugin` is `hami`, `containerdBaseDir` off
    k8s-snap, `timeSlicing.replicas: 1`, a `hami` block while `devicePlugin` is not `hami`
    (or a `timeSlicing` block while it is), a `nodePod` block without `nodeAccess: pod`,
    `ssh` or `sshPrivateKey` without `nodeAccess: ssh`, `rollout` with `nodeAccess: none`,
    a `containerdVersion` other than the line RKE2 or K3s bundle with that
    `kubernetesVersion`, a `chart` that is not a chart source Helm installs from or a
    local chart that is not that chart at its `chartVersion`, an OCI `chart` tagged with
    another version, `runtime.createRuntimeClass: true` with `gpuOperator.nri`. Versions
    and tags must be YAML strings: an unquoted `containerdVersion: 1.7` is refused with the
    quoting fix. Each error names its
    key, with the allowed values, and `gpuplane plan` adds the stack file's `file:line`.
    A stack's errors are reported together, not only the first.
    """

    cluster: ClusterConfig
    """The cluster every GPU node belongs to."""
    ssh: SshConfig = SshConfig()
    """Defaults for reaching every node over SSH."""
    ssh_private_key: Annotated[str | None, Field(repr=False)] = None
    """The SSH private key, a Pulumi secret (`pulumi config set --secret
    gpuplane:sshPrivateKey < ~/.ssh/id_ed25519`); required with `cluster.nodeAccess: ssh`.
    `gpuplane plan` refuses it in plain text (not `secure:`), as any value holding a
    private key."""
    node_pod: NodePodConfig = NodePodConfig()
    """The node agent's pods, with `cluster.nodeAccess: pod`."""
    nodes: list[NodeConfig] = Field(default_factory=list)
    """The GPU nodes, one entry each."""
    device_plugin: DevicePlugin = "gpu-operator"
    """Who advertises GPUs: the operator's device plugin, HAMi (the operator then runs
    without its device plugin), or `platform`: the device plugin the node image ships
    (Bottlerocket's NVIDIA variants; the operator runs without its own)."""
    runtime: RuntimeConfig = RuntimeConfig()
    """The nvidia runtime in containerd and its RuntimeClass."""
    gpu_operator: GpuOperatorConfig | None = None
    """The NVIDIA GPU Operator's Helm release. Required, except with `devicePlugin: hami`:
    left out there, HAMi runs alone on nodes that carry the NVIDIA driver and
    nvidia-container-toolkit themselves (driver preinstalled, toolkit `host`: gpuplane
    writes the nvidia runtime into containerd, so `cluster.nodeAccess` must be `ssh` or
    `pod`) and no GPU Operator is installed."""
    time_slicing: TimeSlicingConfig = TimeSlicingConfig()
    """The operator's time-slicing for every node (older form of `sharing.default`)."""
    sharing: SharingConfig | None = None
    """How each node pool shares its GPUs: whole, time-slicing, MPS, MIG (docs/sharing.md)."""
    hami: HamiConfig = HamiConfig()
    """HAMi's Helm release, with `devicePlugin: hami`."""
    dra_driver: DraDriverConfig | None = None
    """NVIDIA's DRA driver (ResourceClaims) beside the operator (docs/dra.md)."""
    rollout: RolloutConfig = RolloutConfig()
    """The order in which nodes get their containerd change."""
    checks: ChecksConfig = ChecksConfig()
    """The post-deploy GPU checks."""
    docker: DockerConfig = DockerConfig()
    """Docker's nvidia runtime on GPU hosts that also run Docker (off by default)."""
    node_pool: NodePoolConfig | None = None
    """AKS and GKE only: the GPU node pool, so the plan and the stack output
    `platformInput` give the command and fields that create it (docs/platform-inputs.md);
    unset there: the plan says to set it."""
    rules: dict[Annotated[str, AfterValidator(_known_rule)],
                Literal["mandatory", "advisory", "disabled"]] = Field(default_factory=dict)
    """Rules this stack accepts as advice (`advisory`) or not at all (`disabled`), by id,
    e.g. `{FM18: advisory}`: the program then does not refuse on them, and the policy pack
    reports them at that level (the stack's intent carries them). `mandatory` is the
    default. A finding on a node's own containerd files stays an error: the node agent
    never applies a plan with errors. The pack's `--policy-pack-config` applies on top."""

    @model_validator(mode="after")
    def _consistent(self) -> StackConfig:
        """Every combination check, all problems at once. Raised as `StackConfigError`,
        which is no ValueError: pydantic lets it through as it is, keys and all, instead
        of wrapping a single message in a ValidationError."""
        problems = combination_problems(self)
        if problems:
            raise StackConfigError(problems)
        return self


# The stack keys, `gpuplane:<key>`, in the order the config reference documents them.
KEYS: tuple[str, ...] = tuple(
    field.alias or name for name, field in StackConfig.model_fields.items())
SECRET_KEYS = ("sshPrivateKey",)


# -- the combination checks -------------------------------------------------------------

CheckFn = Callable[[StackConfig], Iterator[Problem]]


@dataclass(frozen=True)
class Check:
    """A combination check and the StackConfig fields it reads (derived views included:
    `cfg.profile` reads `cluster`)."""

    needs: frozenset[str]
    run: CheckFn


# Checks of the cluster section's own keys run first: the others read views (the
# distribution's profile, its containerd) that assume the cluster keys agree.
CLUSTER_CHECKS: list[Check] = []
STACK_CHECKS: list[Check] = []


def _check(tier: list[Check], *needs: str) -> Callable[[CheckFn], CheckFn]:
    def register(run: CheckFn) -> CheckFn:
        tier.append(Check(frozenset(needs), run))
        return run
    return register


def _at(path: str, message: str) -> Problem:
    return Problem(stack_key(path), message)


def combination_problems(cfg: StackConfig, broken: frozenset[str] = frozenset()) -> list[Problem]:
    """Every combination problem of `cfg`, skipping the checks that read a `broken` field
    (one that failed its own validation, so `cfg` holds a stand-in for it)."""
    problems = [p for check in CLUSTER_CHECKS if not check.needs & broken
                for p in check.run(cfg)]
    if problems:
        broken |= {"cluster"}
    problems += [p for check in STACK_CHECKS if not check.needs & broken
                 for p in check.run(cfg)]
    return problems


def problems_beside(values: Mapping[str, Any], broken_keys: set[str]) -> list[Problem]:
    """The combination problems of a stack some of whose top-level keys (`broken_keys`, as
    the stack file spells them) failed their own validation: the other keys are validated
    again one by one and compared, so a stack with a mistyped value and a contradiction
    elsewhere hears of both in one run."""
    by_alias = {field.alias or name: name for name, field in StackConfig.model_fields.items()}
    broken = {by_alias.get(key, key) for key in broken_keys}
    valid: dict[str, Any] = {}
    for key, value in values.items():
        name = by_alias.get(key)
        if name is None or name in broken:
            continue
        try:
            valid[name] = _adapter(name).validate_python(value)
        except ValidationError:   # cannot happen once the whole stack was validated
            broken.add(name)
    return combination_problems(StackConfig.model_construct(**valid), frozenset(broken))


@cache
def _adapter(name: str) -> TypeAdapter[Any]:
    """A validator for one top-level key's value. Its type alone: a constraint on the
    field itself would have failed the whole stack's validation already."""
    annotation = StackConfig.model_fields[name].annotation
    assert annotation is not None
    return TypeAdapter(annotation)


@_check(CLUSTER_CHECKS, "cluster")
def _base_dir_distro(cfg: StackConfig) -> Iterator[Problem]:
    if cfg.cluster.containerd_base_dir and cfg.cluster.distro is not Distro.K8S_SNAP:
        yield _at("cluster", "containerdBaseDir applies to distro k8s-snap only")


@_check(CLUSTER_CHECKS, "cluster")
def _versions_agree(cfg: StackConfig) -> Iterator[Problem]:
    """The containerd line against the platform's, k0s's or the bundled one: one
    disagreement, so at most one problem (the most specific)."""
    cluster = cfg.cluster
    problem = _platform_problem(cluster) if cluster.platform is not None else None
    if problem is None and cluster.distro is Distro.K0S:
        problem = k0s_unsupported(cluster.kubernetes_version, cluster.containerd_version)
    if problem is None:
        bundled = bundled_containerd_major(cluster.distro, cluster.kubernetes_version)
        line = ContainerdVersion.parse(cluster.containerd_version)
        if bundled is not None and bundled != line.major:
            ships = "2.0" if bundled == 2 else "1.7"
            problem = (
                f"containerdVersion {cluster.containerd_version} contradicts kubernetesVersion "
                f"{cluster.kubernetes_version}: {cluster.distro.value} "
                f"{cluster.kubernetes_version} ships containerd {ships}; set "
                f"containerdVersion: \"{ships}\" (check with `containerd --version` on a node)")
    if problem:
        yield _at("cluster", problem)


def _platform_problem(cluster: ClusterConfig) -> str | None:
    """Why `cluster.platform` contradicts the other cluster keys, or None."""
    assert cluster.platform is not None
    plat = platform_profile(cluster.platform)
    if cluster.distro is not Distro.KUBEADM:
        return (f"distro: {cluster.distro.value} contradicts platform {plat.name.value}: "
                f"{plat.title} nodes use the kubeadm containerd layout; remove "
                "cluster.distro (or set it to kubeadm)")
    line = ContainerdVersion.parse(cluster.containerd_version)
    if plat.release_for(line) is None:
        ships = ", ".join(plat.containerd_lines)
        return (f"containerdVersion: {cluster.containerd_version} is not a line any listed "
                f"{plat.title} release ships: {plat.releases_text()}; set containerdVersion "
                f"to the nodes' line ({ships}; `kubectl get nodes -o wide` shows it)")
    if plat.dump_rewrites_from_kubernetes is not None:
        minor = tuple(int(x) for x in cluster.kubernetes_version.split(".")[:2])
        want = 2 if minor >= plat.dump_rewrites_from_kubernetes else 1
        if want != line.major:
            ships = "2.0" if want == 2 else "1.7"
            return (f"containerdVersion: {cluster.containerd_version} contradicts "
                    f"kubernetesVersion {cluster.kubernetes_version}: {plat.title} "
                    f"{cluster.kubernetes_version} runs containerd {ships} ({plat.containerd}); "
                    f"set containerdVersion: \"{ships}\"")
    return None


@_check(STACK_CHECKS, "nodes")
def _unique_nodes(cfg: StackConfig) -> Iterator[Problem]:
    dupes = sorted(n for n, k in Counter(n.name for n in cfg.nodes).items() if k > 1)
    if dupes:
        yield _at("nodes", f"duplicate node names {dupes}")


@_check(STACK_CHECKS, "cluster", "nodes")
def _nodes_to_reach(cfg: StackConfig) -> Iterator[Problem]:
    """With node access, the nodes to change must be listed (and, over SSH, reachable)."""
    access = cfg.cluster.node_access
    if access == "ssh" and not cfg.nodes:
        yield _at("nodes", "cluster.nodeAccess is ssh but no nodes are listed; list the GPU "
                           "nodes or set cluster.nodeAccess: none")
    elif access == "pod" and not cfg.nodes:
        yield _at("nodes", "cluster.nodeAccess is pod but no nodes are listed; list the GPU "
                           "nodes (their Kubernetes names) or set cluster.nodeAccess: none")
    missing = [n.name for n in cfg.nodes if not n.host]
    if access == "ssh" and missing:
        yield _at("nodes", f"host missing for {missing} (nodeAccess is ssh)")


@_check(STACK_CHECKS, "cluster", "ssh_private_key")
def _ssh_key(cfg: StackConfig) -> Iterator[Problem]:
    if cfg.cluster.node_access == "ssh" and not cfg.ssh_private_key:
        yield _at("sshPrivateKey", "required when cluster.nodeAccess is ssh; set it with "
                                   "`pulumi config set --secret gpuplane:sshPrivateKey "
                                   "< ~/.ssh/id_ed25519`")


@_check(STACK_CHECKS, "cluster", "node_pod", "gpu_operator")
def _node_pod_admitted(cfg: StackConfig) -> Iterator[Problem]:
    """The agent's pods are privileged: their namespace's Pod Security must admit them."""
    if cfg.cluster.node_access != "pod":
        return
    from gpuplane.core.psa import psa_problem

    problem = psa_problem(cfg.node_pod.namespace_labels, cfg.node_pod_namespace)
    if problem:
        yield _at("nodePod.namespaceLabels", problem)


@_check(STACK_CHECKS, "device_plugin", "gpu_operator")
def _operator_or_hami(cfg: StackConfig) -> Iterator[Problem]:
    """Without the operator block only HAMi advertises GPUs (on the host's toolkit)."""
    if cfg.gpu_operator is None and cfg.device_plugin != "hami":
        yield _at("gpuOperator", f"required with devicePlugin: {cfg.device_plugin} (the GPU "
                                 "Operator provides the toolkit and the device plugin); add "
                                 "gpuplane:gpuOperator with its chartVersion (e.g. v25.10.1), "
                                 "or set devicePlugin: hami to run HAMi alone on nodes with "
                                 "the host's driver and nvidia-container-toolkit")


@_check(STACK_CHECKS, "cluster", "device_plugin", "gpu_operator")
def _host_toolkit_access(cfg: StackConfig) -> Iterator[Problem]:
    if cfg.cluster.node_access != "none" or cfg.toolkit != "host" or (
            cfg.platform and cfg.platform.configures_runtime):
        return
    if cfg.gpu_operator is not None:
        yield _at("gpuOperator.toolkit", "host needs node access to write containerd "
                                         "config; set cluster.nodeAccess: ssh (or pod) or "
                                         "gpuOperator.toolkit: operator")
    elif cfg.device_plugin == "hami":
        yield _at("cluster.nodeAccess", "none, but HAMi without gpuplane:gpuOperator runs on "
                                        "the host's toolkit and gpuplane writes the nvidia "
                                        "runtime into containerd; set cluster.nodeAccess: "
                                        "ssh (or pod), or add gpuplane:gpuOperator (its "
                                        "toolkit then writes it)")


@_check(STACK_CHECKS, "device_plugin", "gpu_operator", "runtime")
def _hami_alone_runtime_class(cfg: StackConfig) -> Iterator[Problem]:
    """Without the operator nothing else creates the RuntimeClass HAMi's pods ask for."""
    if cfg.gpu_operator is None and cfg.device_plugin == "hami" \
            and cfg.runtime.create_runtime_class is False and not cfg.runtime.nvidia_default:
        yield _at("runtime.createRuntimeClass",
                  f"false, but without gpuplane:gpuOperator nothing else creates the "
                  f"RuntimeClass {cfg.runtime.name!r} that HAMi's device plugin and the GPU "
                  "pods its webhook admits ask for (nvidia is not the default runtime); "
                  "remove createRuntimeClass (auto: gpuplane creates it) or set "
                  "runtime.nvidiaDefault: true")


@_check(STACK_CHECKS, "gpu_operator", "runtime")
def _nri_runtime_class(cfg: StackConfig) -> Iterator[Problem]:
    """Under the operator's NRI plugin the toolkit writes no nvidia runtime handler and the
    operator deletes its RuntimeClasses (FM26): a RuntimeClass gpuplane made would name a
    handler containerd lacks, and every pod using it would fail."""
    if cfg.gpu_operator is not None and cfg.gpu_operator.nri \
            and cfg.runtime.create_runtime_class is True:
        yield _at("runtime.createRuntimeClass",
                  f"true, but gpuOperator.nri is true: in NRI plugin mode the toolkit writes "
                  f"no {cfg.runtime.name!r} runtime into containerd and the operator deletes "
                  f"its RuntimeClasses, so RuntimeClass {cfg.runtime.name!r} would name a "
                  "handler the nodes lack and every pod using it fails (FM26); remove "
                  "createRuntimeClass (GPU pods need no runtimeClassName under NRI: CDI "
                  "gives them their GPUs) or set gpuOperator.nri: false")


@_check(STACK_CHECKS, "cluster", "device_plugin")
def _platform_plugin(cfg: StackConfig) -> Iterator[Problem]:
    # With the image's plugin, timeSlicing becomes that plugin's own settings (the
    # stack output platformInput, docs/platform-inputs.md), not an operator ConfigMap.
    if cfg.device_plugin == "platform" and (
            cfg.platform is None or DEVICE_PLUGIN not in cfg.platform.preinstalled):
        where = cfg.platform.title if cfg.platform else "self-managed nodes"
        yield _at("devicePlugin", f"platform means the node image's own device plugin, "
                                  f"which {where} do not ship; set devicePlugin: "
                                  "gpu-operator or hami")


_NODE_POOL_KEYS = {
    Platform.AKS_UBUNTU: ("resource_group", "vm_size"),
    Platform.GKE_COS: ("accelerator_type",),
    Platform.GKE_UBUNTU: ("accelerator_type",),
}


@_check(STACK_CHECKS, "cluster", "node_pool")
def _node_pool_fits(cfg: StackConfig) -> Iterator[Problem]:
    """`nodePool` describes an AKS or GKE pool, with the fields that platform needs."""
    pool, plat = cfg.node_pool, cfg.cluster.platform
    if pool is None:
        return
    if plat not in _NODE_POOL_KEYS:
        yield _at("nodePool", f"describes an AKS or GKE node pool, but cluster.platform is "
                              f"{plat.value if plat else 'unset'}; remove nodePool (EKS and "
                              "Bottlerocket get their node input from the other keys)")
        return
    missing = [to_camel(k) for k in _NODE_POOL_KEYS[plat] if getattr(pool, k) is None]
    if missing:
        yield _at(f"nodePool.{missing[0]}", f"required on {plat.value}; add "
                                            f"{', '.join(missing)} under gpuplane:nodePool")


@_check(STACK_CHECKS, "cluster", "gpu_operator", "runtime")
def _runtime_setup(cfg: StackConfig) -> Iterator[Problem]:
    """`gpuOperator.runtimeSetup` only where there is a choice, and `detected` only where
    the distribution's detection gives what the stack asks (gpuplane.distros.rancher_mode)."""
    try:
        choice = cfg.runtime_setup
    except DetectionRefused as exc:
        yield Problem(exc.key, str(exc))
        return
    op = cfg.gpu_operator
    if op is not None and op.runtime_setup != "auto" and choice is None:
        yield _at("gpuOperator.runtimeSetup",
                  f"{op.runtime_setup} applies to distro rke2 or k3s with "
                  "gpuOperator.toolkit: operator only; remove it")


@_check(STACK_CHECKS, "docker")
def _docker_default(cfg: StackConfig) -> Iterator[Problem]:
    if cfg.docker.set_as_default and not cfg.docker.nvidia_runtime:
        yield _at("docker.setAsDefault", "makes Docker's nvidia runtime its default, but "
                                         "docker.nvidiaRuntime is false; set "
                                         "docker.nvidiaRuntime: true or remove setAsDefault")


@_check(STACK_CHECKS, "cluster", "docker")
def _docker_access(cfg: StackConfig) -> Iterator[Problem]:
    if cfg.docker.nvidia_runtime and not cfg.node_access:
        yield _at("docker.nvidiaRuntime", "writing /etc/docker/daemon.json needs node access, "
                                          "but cluster.nodeAccess is none; set "
                                          "cluster.nodeAccess: ssh (or pod) or "
                                          "docker.nvidiaRuntime: false")


STACK_CHECKS.extend(Check(frozenset(needs), run) for needs, run in UNUSED_CHECKS)
STACK_CHECKS.append(Check(SHARING_NEEDS, sharing_problems))
STACK_CHECKS.append(Check(DRA_POOL_NEEDS, dra_pool_problems))


@_check(STACK_CHECKS, "device_plugin", "time_slicing")
def _hami_time_slicing(cfg: StackConfig) -> Iterator[Problem]:
    sharing = cfg.time_slicing.replicas > 1 or \
        bool(cfg.time_slicing.model_fields_set - {"replicas"})
    if cfg.device_plugin == "hami" and sharing:
        yield _at("timeSlicing", "the operator's time-slicing needs its device plugin, which "
                                 "HAMi replaces; use hami.deviceSplitCount instead (and "
                                 "remove gpuplane:timeSlicing)")
