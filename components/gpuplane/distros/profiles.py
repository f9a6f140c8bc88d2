"""Where containerd lives on each Kubernetes distribution: data, not code paths.

A profile answers, for one distribution: which file containerd reads, which file
gpuplane edits (a drop-in directory, the top-level file, or a template the distribution
renders at start), the imports glob that must cover the drop-in directory, the socket the
kubelet talks to, the containerd binary, how to restart it, and the baseline files the
distribution writes (components/gpuplane/data/baselines).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Container
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from gpuplane.containerd.versions import ContainerdVersion


class EditMode(StrEnum):
    DROP_IN = "drop-in"      # write a file into a directory the top-level config imports
    TEMPLATE = "template"    # write the template the distribution renders config.toml from


class Distro(StrEnum):
    KUBEADM = "kubeadm"
    K8S_SNAP = "k8s-snap"
    RKE2 = "rke2"
    K3S = "k3s"
    MICROK8S = "microk8s"
    K0S = "k0s"


@dataclass(frozen=True)
class DistroProfile:
    name: Distro
    title: str
    config_path: str             # the top-level file containerd reads
    edit_mode: EditMode
    socket: str
    # Where the distribution puts its containerd, in the order the agent tries them; a
    # path may run through symbolic links (RKE2's bin/ is one), which the agent follows.
    containerd_binaries: tuple[str, ...]
    # How to restart containerd: a fixed command, or (systemd distributions whose unit
    # depends on the node's role) the candidate units, of which the agent restarts the
    # one that is active on the node and refuses when none or several are.
    restart_command: str
    restart_units: tuple[str, ...] = ()
    dropin_dir: str | None = None        # drop-in distros
    template_path: str | None = None     # template distros: containerd 1.x template
    template_v3_path: str | None = None  # template distros: containerd 2.x template
    rendered_by_distro: bool = False     # config_path is regenerated at every start
    baseline_root: str = ""              # @ROOT@ in baseline files
    detects_nvidia_runtime: bool = False  # RKE2/K3s add nvidia runtimes by themselves
    # Template distros: a directory of this distribution's own that the template imports,
    # for the operator's toolkit drop-in. Left unset, the operator puts it in the host-wide
    # /etc/containerd/conf.d, shared with any other containerd on the machine.
    toolkit_dir: str | None = None
    # The distribution renders a version-3 config from its own v3 template on containerd
    # 2.x (RKE2/K3s), so its fresh-node files differ by containerd line.
    baseline_v3: bool = False
    # Template distros whose launcher substitutes placeholders while rendering: (text, value)
    # in the launcher's order. gpuplane renders with these to see what containerd reads.
    render_substitutions: tuple[tuple[str, str], ...] = ()
    # The template exists on every node (MicroK8s ships one): a plan from captured files
    # needs it, since it is the file gpuplane edits.
    template_always_present: bool = False
    # k0s rewrites its top-level config and a generated CRI file from its drop-in dir at
    # every start (gpuplane.distros.k0s_render); gpuplane writes drop-ins only.
    generates_from_dropins: bool = False
    # The folder under data/baselines with the files a fresh node has, when it is not the
    # distribution's own: a managed platform's config on the kubeadm layout
    # (gpuplane.platforms.profiles), which the platform writes and gpuplane only plans from.
    baseline_name: str = ""
    # A managed platform's image releases write different configs per containerd line:
    # ("major.minor", folder under data/baselines); a line not listed uses baseline_name.
    baseline_by_line: tuple[tuple[str, str], ...] = ()
    # The platform that writes this node's containerd config (its title), "" for
    # self-managed nodes: findings about its own runtimes are told as its, not as fixes.
    owned_by: str = ""
    # The file the operator's toolkit is told is containerd's config (CONTAINERD_CONFIG),
    # where it is not the file gpuplane edits: k0s's docs give a drop-in of k0s's own, so
    # that the toolkit never rewrites the top-level file k0s marks as its own.
    toolkit_config: str | None = None

    @property
    def containerd_binary(self) -> str:
        """The first place the distribution puts containerd (what the toolkit is told)."""
        return self.containerd_binaries[0]

    @property
    def edits_top_level_file(self) -> bool:
        """Whether the top-level config is a plain file gpuplane edits (drop-in distros),
        not one the distribution renders or generates at every start (templates, k0s):
        only then can a node without one be planned (gpuplane writes it)."""
        return self.edit_mode is EditMode.DROP_IN and not self.generates_from_dropins

    @property
    def toolkit_dropin_dir(self) -> str | None:
        """Where the operator's toolkit (1.18+) writes its drop-in on this distribution."""
        return self.dropin_dir or self.toolkit_dir

    @property
    def read_dropin_dirs(self) -> tuple[str, ...]:
        """Dirs whose `*.toml` containerd may import on this distribution, which a capture
        reads and a plan keeps: the drop-in dir; for RKE2/K3s the dirs their built-in
        templates import since k3s-io/k3s PR #13680 (gpuplane.distros.rancher_render)."""
        dirs = [self.dropin_dir] if self.dropin_dir else []
        if self.detects_nvidia_runtime and self.template_path:
            from gpuplane.distros.rancher_render import dropin_dir

            dirs += [dropin_dir(self.template_path, v) for v in (2, 3)]
        return tuple(d.rstrip("/") for d in dirs)

    @property
    def imports_glob(self) -> str | None:
        """The `imports` entry the top-level config needs for gpuplane's drop-ins."""
        return posixpath.join(self.dropin_dir, "*.toml") if self.dropin_dir else None

    @property
    def toolkit_source(self) -> str:
        """The file the operator's toolkit reads containerd's CRI config from
        (`RUNTIME_CONFIG_SOURCE=file=`): on k0s the CRI file it generates from its drop-ins
        (gpuplane.distros.k0s_render), elsewhere the top-level config."""
        from gpuplane.distros.k0s_render import CRI_FILE

        return CRI_FILE if self.generates_from_dropins else self.config_path

    def render(self, template: str) -> str:
        """The config the distribution renders from `template` (placeholders filled)."""
        for placeholder, value in self.render_substitutions:
            template = template.replace(placeholder, value)
        return template

    def learn_substitutions(self, template: str, rendered: str) -> DistroProfile:
        """This profile with the values the node's launcher put in for the placeholders,
        read from the node's rendered file where it is exactly `template` rendered (the
        launcher substitutes text, so the rest is equal byte for byte); otherwise (a file
        rendered from an older template, or edited) the model's values stay."""
        if not self.render_substitutions:
            return self
        names = {p: f"v{i}" for i, (p, _) in enumerate(self.render_substitutions)}
        tokens = re.split("(" + "|".join(re.escape(p) for p in names) + ")", template)
        pattern, seen = [], set()
        for index, token in enumerate(tokens):
            if index % 2 == 0:
                pattern.append(re.escape(token))
            elif token in seen:
                pattern.append(f"(?P={names[token]})")
            else:
                seen.add(token)
                pattern.append(f"(?P<{names[token]}>[^\n]*?)")
        match = re.fullmatch("".join(pattern), rendered, re.DOTALL)
        if match is None:
            return self
        learned = tuple((p, match.group(names[p]) if p in seen else v)
                        for p, v in self.render_substitutions)
        return replace(self, render_substitutions=learned)

    def edit_path(self, version: ContainerdVersion) -> str:
        """The file gpuplane (and the toolkit) must change for this containerd line."""
        if self.edit_mode is EditMode.TEMPLATE:
            if version.major >= 2 and self.template_v3_path:
                return self.template_v3_path
            assert self.template_path
            return self.template_path
        return self.config_path

    def read_template(self, version: ContainerdVersion,
                      present: Container[str] = ()) -> str | None:
        """The template the distribution renders on a node running containerd `version`
        whose files include `present`; None when none (MicroK8s always has one).

        RKE2/K3s on containerd 2.x try `config-v3.toml.tmpl` first, then `config.toml.tmpl`,
        which they render as version 2 in place of their built-in template when the v3 one
        is absent (`templateGenerations` and `writeContainerdConfig` in k3s-io/k3s
        pkg/agent/containerd/config.go, read at commit 06ea261c; RKE2 runs that agent code).
        On containerd 1.x they read `config.toml.tmpl` only."""
        if self.edit_mode is not EditMode.TEMPLATE:
            return None
        order = [self.template_v3_path] if version.major >= 2 else []
        order.append(self.template_path)
        for path in order:
            if path and path in present:
                return path
        return None

    def template_fallback(self, version: ContainerdVersion) -> str | None:
        """The version-2 template RKE2/K3s on containerd 2.x render in place of their
        built-in template when no version-3 template exists (`read_template`), else None."""
        if self.template_v3_path and version.major >= 2:
            return self.template_path
        return None

    def baseline(self, version: ContainerdVersion) -> dict[str, str]:
        """The files this distribution writes on a fresh node running containerd `version`,
        by node path.

        The line matters where the distribution renders a different file per containerd
        major: RKE2 and K3s render their built-in version-2 template for 1.x and their
        version-3 template (`ContainerdConfigTemplateV3`, k3s-io/k3s pkg/agent/templates)
        for 2.x, with the same values (data/baselines/<name>-containerd2: modelled, since
        the v3 template text was not read; that folder's README says what was)."""
        name = dict(self.baseline_by_line).get(str(version)) \
            or self.baseline_name or self.name.value
        if self.baseline_v3 and version.major >= 2:
            name += "-containerd2"
        root = _BASELINES / name
        files: dict[str, str] = {}
        for entry in sorted(root.rglob("*")):
            if not entry.is_file() or entry.name == ".keep":
                continue
            rel = entry.relative_to(root).as_posix()
            text = entry.read_text(encoding="utf-8").replace("@ROOT@", self.baseline_root)
            files[self.baseline_root + "/" + rel] = text
        return files


_BASELINES = Path(__file__).parent.parent / "data" / "baselines"


def _units_command(units: tuple[str, ...]) -> str:
    """The restart command as a plan shows it when the agent picks the unit on the node."""
    return f"systemctl restart <the active one of {', '.join(units)}>"


# k0s: the service is named "k0s" + role: `k0s install worker` makes k0sworker, `k0s
# install controller` (also with --enable-worker, which then runs the node's containerd)
# k0scontroller (k0sproject/k0s pkg/install/service.go `GetServiceConfig`, read at commit
# 008c5a48).
_K0S_UNITS = ("k0sworker", "k0scontroller")
# Units: a GPU worker runs the agent unit, a server that also schedules pods the server
# unit (rancher/rke2 bundle/lib/systemd/system/rke2-agent.service and rke2-server.service
# @v1.31.6+rke2r1; k3s install.sh @v1.31.6+k3s1 names the unit `k3s-agent` for agents and
# `k3s` for servers). The agent restarts whichever is active on the node.
# Binaries: RKE2 extracts its runtime image into data/<digest>/bin and points the
# symbolic link bin/ at it (rancher/rke2 pkg/bootstrap/bootstrap.go, `Stage` and
# `symlinkBinDir`, read at commit 03106fb2); K3s extracts into data/<asset hash>/bin and
# links data/current to that directory (k3s-io/k3s cmd/k3s/main.go, `extract`, read at
# commit 0208f16b).
_RANCHER = {
    Distro.RKE2: ("RKE2", "/var/lib/rancher/rke2", ("rke2-agent", "rke2-server"),
                  ("bin/containerd",)),
    Distro.K3S: ("K3s", "/var/lib/rancher/k3s", ("k3s-agent", "k3s"),
                 ("data/current/bin/containerd",)),
}


def _rancher(name: Distro) -> DistroProfile:
    title, data, units, binaries = _RANCHER[name]
    etc = f"{data}/agent/etc/containerd"
    return DistroProfile(
        name=name,
        title=title,
        config_path=f"{etc}/config.toml",
        edit_mode=EditMode.TEMPLATE,
        socket="/run/k3s/containerd/containerd.sock",
        containerd_binaries=tuple(f"{data}/{b}" for b in binaries),
        restart_command=_units_command(units),
        restart_units=units,
        template_path=f"{etc}/config.toml.tmpl",
        template_v3_path=f"{etc}/config-v3.toml.tmpl",
        rendered_by_distro=True,
        detects_nvidia_runtime=True,
        toolkit_dir=f"{etc}/conf.d",
        # K3s's agent renders the config for both (RKE2 v1.31.6+rke2r1 go.mod requires
        # k3s-io/k3s at a7455eb9effc); data/baselines/README.md says what was read.
        baseline_v3=True,
    )


# What MicroK8s's launcher substitutes in containerd-template.toml at every start
# (canonical/microk8s `microk8s-resources/wrappers/run-containerd-with-args`@v1.35, the same
# @v1.36: `sed` of ${SNAP}, ${SNAP_DATA}, ${SNAPSHOTTER} and ${RUNTIME}, then
# ${RUNTIME_TYPE}). These are the model's values; each is a fact of the node, which a plan
# from the node's captured template and rendered file learns from the pair
# (`DistroProfile.learn_substitutions`):
# - ${SNAP} and ${SNAP_DATA} are the snap's revision dirs (/snap/microk8s/<revision>,
#   /var/snap/microk8s/<revision>); the model writes `current`, the link to them;
# - ${RUNTIME} is always runc;
# - ${RUNTIME_TYPE} is io.containerd.runc.v1 unless `mount -t cgroup2` lists a cgroup2
#   mount (then runc.v2: every cgroup-v2 host, and hybrid hosts);
# - ${SNAPSHOTTER} is `native` where ${SNAP_COMMON} is on zfs, else overlayfs
#   (`snapshotter` in microk8s-resources/actions/common/utils.sh@v1.35).
_MICROK8S_SUBSTITUTIONS = (
    ("${SNAP}", "/snap/microk8s/current"),
    ("${SNAP_DATA}", "/var/snap/microk8s/current"),
    ("${SNAPSHOTTER}", "overlayfs"),
    ("${RUNTIME}", "runc"),
    ("${RUNTIME_TYPE}", "io.containerd.runc.v2"),
)

PROFILES: dict[Distro, DistroProfile] = {
    Distro.KUBEADM: DistroProfile(
        name=Distro.KUBEADM,
        title="kubeadm / vanilla Kubernetes",
        config_path="/etc/containerd/config.toml",
        edit_mode=EditMode.DROP_IN,
        socket="/run/containerd/containerd.sock",
        containerd_binaries=("/usr/bin/containerd",),
        restart_command="systemctl restart containerd",
        dropin_dir="/etc/containerd/conf.d",
    ),
    Distro.K8S_SNAP: DistroProfile(
        name=Distro.K8S_SNAP,
        title="Canonical Kubernetes (k8s-snap)",
        config_path="/etc/containerd/config.toml",
        edit_mode=EditMode.DROP_IN,
        socket="/run/containerd/containerd.sock",
        containerd_binaries=("/snap/k8s/current/bin/containerd",),
        restart_command="snap restart k8s.containerd",
        dropin_dir="/etc/containerd/conf.d",
    ),
    Distro.RKE2: _rancher(Distro.RKE2),
    Distro.K3S: _rancher(Distro.K3S),
    Distro.MICROK8S: DistroProfile(
        name=Distro.MICROK8S,
        title="MicroK8s",
        config_path="/var/snap/microk8s/current/args/containerd.toml",
        edit_mode=EditMode.TEMPLATE,
        socket="/var/snap/microk8s/common/run/containerd.sock",
        containerd_binaries=("/snap/microk8s/current/bin/containerd",),
        restart_command="snap restart microk8s",
        template_path="/var/snap/microk8s/current/args/containerd-template.toml",
        rendered_by_distro=True,
        toolkit_dir="/var/snap/microk8s/current/args/conf.d",
        render_substitutions=_MICROK8S_SUBSTITUTIONS,
        template_always_present=True,
    ),
    Distro.K0S: DistroProfile(
        name=Distro.K0S,
        title="k0s",
        config_path="/etc/k0s/containerd.toml",
        edit_mode=EditMode.DROP_IN,
        socket="/run/k0s/containerd.sock",
        containerd_binaries=("/var/lib/k0s/bin/containerd",),
        restart_command=_units_command(_K0S_UNITS),
        restart_units=_K0S_UNITS,
        dropin_dir="/etc/k0s/containerd.d",
        generates_from_dropins=True,
        toolkit_config="/etc/k0s/containerd.d/nvidia.toml",
    ),
}

# RKE2 and K3s bundle containerd: 2.0 from these Kubernetes patch releases of a minor
# (rancher/rke2 v1.31.6+rke2r1 and v1.32.2+rke2r1 build `hardened-containerd:v2.0.x`,
# Dockerfile at those tags; K3s v1.31.6+k3s1 / v1.32.2+k3s1 ship its 2.0 fork), 1.7 before.
_CONTAINERD_2_FROM: dict[tuple[int, int], int] = {(1, 31): 6, (1, 32): 2}
BUNDLES_CONTAINERD = (Distro.RKE2, Distro.K3S)


def bundled_containerd_major(distro: Distro, kubernetes_version: str) -> int | None:
    """The containerd major (1 or 2) RKE2/K3s ship with `kubernetes_version` ("1.31.6");
    None for distributions that use the node's own containerd."""
    if distro not in BUNDLES_CONTAINERD:
        return None
    major, minor, patch = (int(x) for x in kubernetes_version.split(".")[:3])
    if (major, minor) < (1, 31):
        return 1
    first = _CONTAINERD_2_FROM.get((major, minor))
    return 2 if first is None or patch >= first else 1


# k0s bundles containerd (`containerd_version` in embedded-bins/Makefile.variables at each
# release tag): 1.6 up to v1.26, 1.7 from v1.27.16+k0s.0 to v1.35.7+k0s.0 (1.7.8 ... 1.7.34),
# and 2.3 from v1.36.1+k0s.0 (2.3.1; v1.36.3+k0s.0: 2.3.3). From 1.36 k0s writes a
# version-3 config that imports /etc/k0s/containerd.d/*.toml itself and generates no CRI
# file (pkg/component/worker/containerd/configurer.go@v1.36.3+k0s.0): a layout, and a
# containerd line, that gpuplane does not model (gpuplane.distros.k0s_render models 1.27-1.35).
_K0S_MODELLED = ((1, 27), (1, 35))


def k0s_unsupported(kubernetes_version: str, containerd_version: str) -> str | None:
    """Why gpuplane cannot plan k0s at these versions, or None (k0s 1.27-1.35, which ship
    containerd 1.7)."""
    minor = tuple(int(x) for x in kubernetes_version.split(".")[:2])
    if minor > _K0S_MODELLED[1]:
        return (f"k0s {kubernetes_version} runs containerd 2.3 with a version-3 config that "
                "imports /etc/k0s/containerd.d/*.toml itself; gpuplane models k0s 1.27 to "
                "1.35 only and cannot plan this cluster yet")
    if minor < _K0S_MODELLED[0]:
        return (f"k0s {kubernetes_version} runs containerd 1.6 with a layout gpuplane does "
                "not model (it models k0s 1.27 to 1.35); upgrade k0s first")
    if not containerd_version.startswith("1.7"):
        return (f"containerdVersion {containerd_version} contradicts kubernetesVersion "
                f"{kubernetes_version}: k0s {kubernetes_version} ships containerd 1.7; set "
                'containerdVersion: "1.7" (check with `k0s version --all` on a node)')
    return None


K8S_SNAP_BASE_DIR_LOCK = "/var/snap/k8s/common/lock/.containerd-base-dir"
K8S_SNAP_LEGACY_ROOT = "/var/snap/k8s/common"


def profile(name: Distro | str, containerd_base_dir: str | None = None,
            legacy: bool = False) -> DistroProfile:
    """The profile of `name`; k8s-snap takes its containerd base dir or the legacy paths.

    A custom base dir B puts everything under B/k8s-containerd (what k8sd does with
    `containerd-base-dir`); the legacy snap layout lives under /var/snap/k8s/common.
    """
    base = PROFILES[Distro(name)]
    if base.name is not Distro.K8S_SNAP:
        if containerd_base_dir or legacy:
            raise ValueError("containerd base dir and legacy paths apply to k8s-snap only")
        return base
    if legacy:
        root = K8S_SNAP_LEGACY_ROOT
        socket = f"{root}/run/containerd.sock"
    elif containerd_base_dir and containerd_base_dir.rstrip("/"):
        if not containerd_base_dir.startswith("/"):
            raise ValueError(f"containerd base dir must be absolute, got {containerd_base_dir!r}")
        root = posixpath.normpath(containerd_base_dir) + "/k8s-containerd"
        socket = f"{root}/run/containerd/containerd.sock"
    else:
        return base
    return replace(
        base,
        config_path=f"{root}/etc/containerd/config.toml",
        dropin_dir=f"{root}/etc/containerd/conf.d",
        socket=socket,
        baseline_root=root,
    )
