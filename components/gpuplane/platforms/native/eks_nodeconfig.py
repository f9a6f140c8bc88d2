"""EKS AL2023: the NodeConfig `spec.containerd.config` snippet, and the containerd config
nodeadm writes from it, modelled from nodeadm's code.

Why: nodeadm rewrites `/etc/containerd/config.toml` at every boot, so a node file gpuplane
wrote is gone after the next reboot; the supported change is a TOML snippet in the
NodeConfig, which nodeadm merges into its own template. Facts, all from
awslabs/amazon-eks-ami@v20260724 (commit 81fec2e):

- `nodeadm/internal/containerd/config.go` (`writeContainerdConfig`): render the template,
  merge `spec.containerd.config` over it (`combineContainerdConfigs`), write the result to
  `/etc/containerd/config.toml`. No `imports` line.
- Template choice (`getConfigTemplateVersion`, `Version3configInNodeConfig`): on
  containerd 2.x the version-3 template (`config2.template.toml`) unless the snippet is
  non-empty and names neither `io.containerd.cri.v1.images` nor
  `io.containerd.cri.v1.runtime`; then the version-2 template and, after writing,
  `containerd config migrate` (not modelled here: gpuplane never emits such a snippet).
  On containerd 1.x the version-2 template (`config.template.toml`), and a snippet that
  names a version-3 plugin is refused ("failed to get config template version").
- Template values (`generateContainerdConfig`): `enable_cdi` is kubelet >= v1.32.0
  (`semver.Compare`, on the `vX.Y.Z` that `internal/kubelet/version.go` parses out of
  `kubelet --version`); one runtime, runc v2, `base_runtime_spec =
  /etc/containerd/base-runtime-spec.json`, `SystemdCgroup = true`, default runtime the same.
- Runtime (`runtime_config.go`, `runtime_config_nvidia.go`): `runc` with
  `/usr/sbin/runc`, unless `/usr/bin/nvidia-container-runtime` exists (the NVIDIA AMI):
  then `nvidia` with that binary.
- Sandbox image `localhost/kubernetes/pause:latest` (`cmd/nodeadm/init/init.go`).
- Merge (`internal/util/merge.go` `Merge`): both sides decoded by go-toml v2 into
  `map[string]interface{}`, merged with dario.cat/mergo v1.0.2 `WithOverride`
  (darccio/mergo@v1.0.2 `merge.go` `deepMerge`, map case): tables present on both sides
  merge key by key; every other value of the snippet (scalars, arrays, a table over a
  scalar) replaces the template's, empty values (`false`, `""`, `0`) included.
- Delivery: a MIME part `Content-Type: application/node.eks.aws` of the user data
  (`nodeadm/doc/examples.md`); later parts and `/etc/eks/nodeadm.d/` drop-ins win.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import tomlkit
import yaml

from gpuplane.containerd import ContainerdVersion, EffectiveConfig, MemoryFiles
from gpuplane.containerd.versions import CRI_V2, CRI_V3_RUNTIME, RUNC_V2
from gpuplane.core.findings import Finding, Severity
from gpuplane.platforms.native.result import PlatformInput, PlatformInputError
from gpuplane.rules.nodecheck import check_node_config

REF = "awslabs/amazon-eks-ami@v20260724"
SOURCES = (
    f"{REF} nodeadm/internal/containerd/config.go",
    f"{REF} nodeadm/internal/containerd/config2.template.toml",
    f"{REF} nodeadm/internal/containerd/config.template.toml",
    f"{REF} nodeadm/internal/containerd/runtime_config.go",
    f"{REF} nodeadm/internal/containerd/runtime_config_nvidia.go",
    f"{REF} nodeadm/internal/util/merge.go",
    "darccio/mergo@v1.0.2 merge.go",
    f"{REF} nodeadm/doc/examples.md",
)
CONFIG_PATH = "/etc/containerd/config.toml"
BASE_RUNTIME_SPEC = "/etc/containerd/base-runtime-spec.json"
NVIDIA_BINARY = "/usr/bin/nvidia-container-runtime"
RUNC_BINARY = "/usr/sbin/runc"
SANDBOX_IMAGE = "localhost/kubernetes/pause:latest"
CRI_V3_IMAGES = "io.containerd.cri.v1.images"
_CDI_FROM = (1, 32, 0)
_SEMVER = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


class AmiVariant(StrEnum):
    """NVIDIA: the accelerated AL2023 AMI (nvidia-container-runtime preinstalled);
    STANDARD: the plain AL2023 AMI."""

    NVIDIA = "nvidia"
    STANDARD = "standard"


class NodeadmRefusal(ValueError):
    """nodeadm itself fails on this input, or takes a path gpuplane does not model."""


@dataclass(frozen=True)
class EksNode:
    """What nodeadm's render depends on. `soci`: the FastImagePull feature gate on an
    instance with >= 4 vCPU and >= 7 GiB (`UseSOCISnapshotter`)."""

    ami: AmiVariant
    kubelet_version: str
    containerd_version: str = "2.2"
    soci: bool = False

    @property
    def kubelet(self) -> tuple[int, int, int]:
        match = _SEMVER.search(self.kubelet_version)
        if not match:
            raise PlatformInputError(
                "gpuplane:platform.kubeletVersion",
                f"kubelet version {self.kubelet_version!r} is not X.Y or vX.Y.Z.",
                "Set it to the node group's Kubernetes version, e.g. 1.33.")
        return (int(match[1]), int(match[2]), int(match[3] or 0))

    @property
    def enable_cdi(self) -> bool:
        """What nodeadm's template writes for `enable_cdi`."""
        return self.kubelet >= _CDI_FROM

    @property
    def containerd(self) -> ContainerdVersion:
        try:
            return ContainerdVersion.parse(self.containerd_version)
        except ValueError as exc:
            raise PlatformInputError("gpuplane:platform.containerdVersion", f"{exc}.",
                                     "Set the AMI's containerd line, e.g. 2.2.") from None

    @property
    def runtime(self) -> tuple[str, str]:
        """nodeadm's runtime name and binary on this AMI."""
        if self.ami is AmiVariant.NVIDIA:
            return "nvidia", NVIDIA_BINARY
        return "runc", RUNC_BINARY


@dataclass(frozen=True)
class RuntimeIntent:
    """The containerd runtimes gpuplane wants on the node.

    `nvidia_binary`: where nvidia-container-runtime is (the AMI's, or the operator's
    toolkit dir on a standard AMI). `keep_runc`: a configured runc beside it, with
    SystemdCgroup and nodeadm's base spec like nodeadm's own runtime. `default_runtime`:
    None keeps nodeadm's choice. `enable_cdi`: None keeps nodeadm's choice.
    """

    runtime_name: str = "nvidia"
    nvidia_binary: str = NVIDIA_BINARY
    keep_runc: bool = True
    default_runtime: str | None = None
    enable_cdi: bool | None = None


def template_schema(node: EksNode, snippet: str) -> int:
    """The config version of the template nodeadm renders for this snippet."""
    v3_names = CRI_V3_IMAGES in snippet or CRI_V3_RUNTIME in snippet
    if node.containerd.major >= 2:
        if snippet and not v3_names:
            raise NodeadmRefusal(
                "on containerd 2.x a snippet without version-3 plugin names makes nodeadm "
                "render its version-2 template and run `containerd config migrate`, which "
                "gpuplane does not model; write the snippet with version-3 names")
        return 3
    if snippet and v3_names:
        raise NodeadmRefusal(
            "containerd 1.x: nodeadm refuses a snippet with version-3 plugin names "
            "(\"failed to get config template version\")")
    return 2


def nodeadm_template(node: EksNode, schema: int) -> dict[str, Any]:
    """nodeadm's rendered template as data (the values of its template, not its text)."""
    name, binary = node.runtime
    runtimes = {name: {"runtime_type": RUNC_V2, "base_runtime_spec": BASE_RUNTIME_SPEC,
                       "options": {"BinaryName": binary, "SystemdCgroup": True}}}
    cni = {"bin_dir": "/opt/cni/bin", "conf_dir": "/etc/cni/net.d"}
    registry = {"config_path": "/etc/containerd/certs.d:/etc/docker/certs.d"}
    soci = {"snapshotter": "soci", "disable_snapshot_annotations": False} if node.soci else {}
    top: dict[str, Any] = {"version": schema, "root": "/var/lib/containerd",
                           "state": "/run/containerd",
                           "grpc": {"address": "/run/containerd/containerd.sock"}}
    if schema == 3:
        top["plugins"] = {
            CRI_V3_IMAGES: {"discard_unpacked_layers": True, **soci,
                            "pinned_images": {"sandbox": SANDBOX_IMAGE}, "registry": registry},
            CRI_V3_RUNTIME: {"enable_cdi": node.enable_cdi,
                             "containerd": {"default_runtime_name": name, "runtimes": runtimes},
                             "cni": cni},
        }
    else:
        top["plugins"] = {CRI_V2: {
            "sandbox_image": SANDBOX_IMAGE, "enable_cdi": node.enable_cdi,
            "containerd": {"default_runtime_name": name, "discard_unpacked_layers": True,
                           **soci, "runtimes": runtimes},
            "registry": registry, "cni": cni}}
    if node.soci:
        top["proxy_plugins"] = {"soci": {
            "type": "snapshot", "address": "/run/soci-snapshotter-grpc/soci-snapshotter-grpc.sock",
            "exports": {"root": "/var/lib/soci-snapshotter-grpc"}}}
    return top


def nodeadm_merge(base: dict[str, Any], snippet: dict[str, Any]) -> dict[str, Any]:
    """mergo v1.0.2 `Merge(&dst, &src, WithOverride)` over decoded TOML maps.

    A table on both sides merges key by key; anything else in `snippet` replaces what
    `base` has (arrays whole, empty values too). Returns a new dict.
    """
    out = copy.deepcopy(base)
    for key, value in snippet.items():
        mine = out.get(key)
        if isinstance(value, dict) and isinstance(mine, dict) and mine:
            out[key] = nodeadm_merge(mine, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def nodeadm_config(node: EksNode, snippet: str) -> tuple[int, str]:
    """The config version and the `/etc/containerd/config.toml` nodeadm writes."""
    schema = template_schema(node, snippet)
    base = nodeadm_template(node, schema)
    try:
        extra = tomllib.loads(snippet) if snippet else {}
    except tomllib.TOMLDecodeError as exc:
        raise NodeadmRefusal(f"spec.containerd.config is not TOML: {exc}") from None
    return schema, tomlkit.dumps(nodeadm_merge(base, extra))


def containerd_snippet(node: EksNode, intent: RuntimeIntent) -> str:
    """The smallest `spec.containerd.config` that turns nodeadm's config into `intent`
    ("" when nodeadm's own config already is)."""
    schema = 3 if node.containerd.major >= 2 else 2
    name, binary = node.runtime
    runtimes: dict[str, Any] = {}
    if intent.runtime_name != name or intent.nvidia_binary != binary:
        runtimes[intent.runtime_name] = _runtime(intent.nvidia_binary)
    if intent.keep_runc and "runc" not in (name, intent.runtime_name):
        runtimes["runc"] = _runtime(RUNC_BINARY)
    ctd: dict[str, Any] = {}
    if intent.default_runtime and intent.default_runtime != name:
        ctd["default_runtime_name"] = intent.default_runtime
    if runtimes:
        ctd["runtimes"] = runtimes
    cri: dict[str, Any] = {}
    if intent.enable_cdi is not None and intent.enable_cdi != node.enable_cdi:
        cri["enable_cdi"] = intent.enable_cdi
    if ctd:
        cri["containerd"] = ctd
    if not cri:
        return ""
    return tomlkit.dumps({"plugins": {CRI_V3_RUNTIME if schema == 3 else CRI_V2: cri}})


def _runtime(binary: str) -> dict[str, Any]:
    return {"runtime_type": RUNC_V2, "base_runtime_spec": BASE_RUNTIME_SPEC,
            "options": {"BinaryName": binary, "SystemdCgroup": True}}


class _Literal(str):
    """A string PyYAML writes as a `|` block, so the TOML stays readable."""


def _literal(dumper: yaml.SafeDumper, text: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Literal, _literal)


def nodeconfig_document(snippet: str) -> str:
    """The NodeConfig YAML that carries `snippet` (one MIME part of the user data)."""
    doc = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
           "spec": {"containerd": {"config": _Literal(snippet)}}}
    return "---\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


@dataclass(frozen=True)
class EksNodeConfigResult:
    """The input to feed, what nodeadm makes of it, and the rulebook's verdict on that."""

    platform_input: PlatformInput
    snippet: str
    merged_config: str
    schema: int
    effective: EffectiveConfig
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)


def eks_nodeconfig(node: EksNode, intent: RuntimeIntent) -> EksNodeConfigResult:
    """Snippet, NodeConfig and merged config for `intent`, judged by the containerd rules
    (the kubelet's cgroup driver is systemd: nodeadm `internal/kubelet/config.go`)."""
    snippet = containerd_snippet(node, intent)
    try:
        schema, merged = nodeadm_config(node, snippet)
    except NodeadmRefusal as exc:
        raise PlatformInputError("gpuplane:platform", f"{exc}.",
                                 "Use the containerd line the AMI ships.") from None
    expected = {intent.runtime_name, *(["runc"] if intent.keep_runc else [])}
    checked = check_node_config(
        MemoryFiles({CONFIG_PATH: merged}), CONFIG_PATH, node.containerd,
        {"expected_runtimes": frozenset(expected), "kubelet_cgroup_driver": "systemd",
         "cdi_requested": intent.enable_cdi, "config_key_prefix": "gpuplane:platform"})
    eff = checked.effective
    summary = (f"nodeadm's config gives default runtime {eff.default_runtime!r}, runtimes "
               f"{', '.join(sorted(eff.runtimes))}, CDI {'on' if eff.cdi else 'off'}")
    if snippet:
        summary = "add this NodeConfig to the node group's user data: " + summary
    else:
        summary = "no NodeConfig needed: " + summary
    doc = nodeconfig_document(snippet) if snippet else None
    platform_input = PlatformInput(
        kind="eks-nodeconfig", platform=f"EKS AL2023 ({node.ami.value} AMI)",
        summary=summary, document=doc, document_format="yaml" if doc else None,
        fields={"spec.containerd.config": snippet} if snippet else {},
        will_not_touch=(
            f"{CONFIG_PATH} (nodeadm rewrites it at every boot)",
            f"{BASE_RUNTIME_SPEC} (nodeadm's; set spec.containerd.baseRuntimeSpec instead)",
            *(["the preinstalled NVIDIA driver and container toolkit (the AMI's)"]
              if node.ami is AmiVariant.NVIDIA else []),
        ),
        sources=SOURCES,
        notes=("the NodeConfig goes in a MIME part with Content-Type: "
               "application/node.eks.aws; a managed node group adds the cluster details",)
        if snippet else ())
    return EksNodeConfigResult(platform_input, snippet, merged, schema, eff,
                               tuple(checked.findings))
