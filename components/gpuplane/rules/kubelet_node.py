"""What a node's own files and units say about its kubelet: the cgroup driver it states,
and the node's role. Pure functions over text the capture read; no I/O.

The cgroup driver has to agree with containerd's runc `SystemdCgroup` (FM-class mismatch:
pods fail to start), so capture compares it with the stack. Only a driver a file *states*
is compared: where a distribution leaves it to the kubelet's or its own default, the
answer is "not stated", never a guess.

Where each distribution states it (facts read upstream):

- kubeadm: `/var/lib/kubelet/config.yaml`, a KubeletConfiguration with `cgroupDriver`
  (kubernetes/website content/en/docs/tasks/administer-cluster/kubeadm/
  configure-cgroup-driver.md: kubeadm writes the field, `systemd` by default since 1.22).
- k8s-snap: `/var/snap/k8s/common/args/kubelet`, one `--flag=value` per line, rendered
  by k8sd (canonical/k8s-snap src/k8s/pkg/k8sd/setup/kubelet.go @04ea9072: its defaults
  set no `--cgroup-driver`, so a fresh node says nothing; an operator may add one).
- MicroK8s: `/var/snap/microk8s/current/args/kubelet`, the same one-flag-a-line form
  (canonical/microk8s microk8s-resources/default-args/kubelet @0b9e05c1: no
  `--cgroup-driver` by default).
- k0s: `/var/lib/k0s/kubelet-config.yaml`, the KubeletConfiguration k0s writes before it
  starts the kubelet (k0sproject/k0s pkg/component/worker/kubelet.go @7e42dba8, `Start`:
  `<DataDir>/kubelet-config.yaml`); `cgroupDriver` appears only when configured.
- RKE2 / K3s: `kubelet-arg` entries (`cgroup-driver=...`) in `/etc/rancher/rke2/config.yaml`
  or `/etc/rancher/k3s/config.yaml`. Without one, the distribution decides at start (K3s
  sets `cgroupDriver: systemd` when it runs under systemd: k3s-io/k3s
  pkg/daemons/agent/agent_linux.go @00014d28, `kubeletArgsAndConfig`): not stated.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import yaml

from gpuplane.distros.profiles import Distro

Driver = Literal["systemd", "cgroupfs"]
DRIVERS: tuple[str, ...] = ("systemd", "cgroupfs")
SourceKind = Literal["kubelet-config", "args", "rancher-config"]


@dataclass(frozen=True)
class DriverSource:
    """A file that may state the kubelet's cgroup driver, and how it is written."""

    path: str
    kind: SourceKind


DRIVER_SOURCES: dict[Distro, tuple[DriverSource, ...]] = {
    Distro.KUBEADM: (DriverSource("/var/lib/kubelet/config.yaml", "kubelet-config"),),
    Distro.K8S_SNAP: (DriverSource("/var/snap/k8s/common/args/kubelet", "args"),),
    Distro.MICROK8S: (DriverSource("/var/snap/microk8s/current/args/kubelet", "args"),),
    Distro.K0S: (DriverSource("/var/lib/k0s/kubelet-config.yaml", "kubelet-config"),),
    Distro.RKE2: (DriverSource("/etc/rancher/rke2/config.yaml", "rancher-config"),),
    Distro.K3S: (DriverSource("/etc/rancher/k3s/config.yaml", "rancher-config"),),
}

# Why a distribution may say nothing: shown instead of a driver.
NOT_STATED: dict[Distro, str] = {
    Distro.RKE2: "RKE2 chooses it at start (systemd under systemd)",
    Distro.K3S: "K3s chooses it at start (systemd under systemd)",
}


@dataclass(frozen=True)
class StatedDriver:
    """The driver a file states (`driver` empty: not stated), the file, or why unknown."""

    driver: str = ""
    source: str = ""
    why: str = ""        # "not stated ..." or a file that could not be read

    def describe(self) -> str:
        if self.driver:
            return f"{self.driver} ({self.source})"
        return self.why or "not stated"


def driver_source_paths(distro: Distro) -> tuple[str, ...]:
    """The node paths capture reads for `distro`'s kubelet cgroup driver."""
    return tuple(s.path for s in DRIVER_SOURCES[distro])


def stated_driver(distro: Distro, files: Mapping[str, str],
                  unreadable: Mapping[str, str] | None = None) -> StatedDriver:
    """The cgroup driver `distro`'s kubelet files state, from `files` (node path -> text,
    absent paths left out); `unreadable` maps a path to why it could not be read."""
    unreadable = unreadable or {}
    for source in DRIVER_SOURCES[distro]:
        if source.path in unreadable:
            return StatedDriver(why=f"unknown: {source.path}: {unreadable[source.path]}")
        text = files.get(source.path)
        if text is None:
            continue
        driver = _PARSERS[source.kind](text)
        if driver:
            return StatedDriver(driver, source.path)
    paths = ", ".join(driver_source_paths(distro))
    reason = NOT_STATED.get(distro, "the kubelet's default applies")
    return StatedDriver(why=f"not stated in {paths}; {reason}")


def _from_kubelet_config(text: str) -> str:
    data = _yaml(text)
    value = data.get("cgroupDriver") if isinstance(data, dict) else None
    return value if value in DRIVERS else ""


def _from_args(text: str) -> str:
    """`--cgroup-driver=X` or `--cgroup-driver X` in a one-flag-a-line args file (the
    last one wins, as for the kubelet's own flag parsing)."""
    found = ""
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            value = ""
            if word.startswith("--cgroup-driver="):
                value = word.partition("=")[2]
            elif word == "--cgroup-driver" and i + 1 < len(words):
                value = words[i + 1]
            if value.strip("\"'") in DRIVERS:
                found = value.strip("\"'")
    return found


def _from_rancher_config(text: str) -> str:
    """RKE2/K3s `kubelet-arg`: a list (or one string) of `name=value`, `--` optional."""
    data = _yaml(text)
    if not isinstance(data, dict):
        return ""
    args = data.get("kubelet-arg", data.get("kubelet_arg", []))
    if isinstance(args, str):
        args = [args]
    found = ""
    for arg in args if isinstance(args, list) else []:
        name, _, value = str(arg).lstrip("-").partition("=")
        if name == "cgroup-driver" and value in DRIVERS:
            found = value
    return found


def _yaml(text: str) -> object:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


_PARSERS = {"kubelet-config": _from_kubelet_config, "args": _from_args,
            "rancher-config": _from_rancher_config}


# --- The node's role, from which of the distribution's units is active ---------------

Role = Literal["server", "agent", ""]

# Units whose state tells what the node runs, and the role each means ("" = every node
# runs it, no role). Systemd units of snaps are `snap.<snap>.<app>.service` (snapd).
ROLE_UNITS: dict[Distro, tuple[tuple[str, Role], ...]] = {
    Distro.KUBEADM: (("kubelet", ""), ("containerd", "")),
    # k8s-snap: workers reach the API through k8s-apiserver-proxy, control-plane nodes
    # run kube-apiserver (canonical/k8s-snap src/k8s/pkg/k8sd/setup/k8s_apiserver_proxy.go
    # and kube_apiserver.go @04ea9072; the worker join hook starts the snap services
    # `k8s.containerd`, `k8s.k8s-apiserver-proxy`, `k8s.kubelet`, `k8s.kube-proxy`, read in
    # k8sd's worker-join hook at a stored commit).
    Distro.K8S_SNAP: (("snap.k8s.kube-apiserver", "server"),
                      ("snap.k8s.k8s-apiserver-proxy", "agent"),
                      ("snap.k8s.containerd", ""), ("snap.k8s.kubelet", "")),
    # MicroK8s: worker-only nodes run the apiserver proxy (default-args/apiserver-proxy);
    # kubelite runs on every node. The services `microk8s.daemon-kubelite`,
    # `microk8s.daemon-containerd` and `microk8s.daemon-apiserver-proxy` (inactive on a
    # control-plane node) as `snap info microk8s` lists them (canonical/microk8s
    # snap/snapcraft.yaml at 506c16cb has kubelite and containerd; the proxy came later).
    Distro.MICROK8S: (("snap.microk8s.daemon-apiserver-proxy", "agent"),
                      ("snap.microk8s.daemon-kubelite", ""),
                      ("snap.microk8s.daemon-containerd", "")),
    Distro.RKE2: (("rke2-server", "server"), ("rke2-agent", "agent")),
    Distro.K3S: (("k3s", "server"), ("k3s-agent", "agent")),
    Distro.K0S: (("k0scontroller", "server"), ("k0sworker", "agent")),
}


def role_units(distro: Distro) -> tuple[str, ...]:
    """The units capture asks about on a `distro` node."""
    return tuple(u for u, _ in ROLE_UNITS[distro])


@dataclass(frozen=True)
class NodeRole:
    """The node's role as its active units tell it."""

    role: str = ""                 # "server", "agent", "server+agent", "" (not told)
    active: tuple[str, ...] = ()
    known: bool = True             # False: neither systemctl nor /sys/fs/cgroup answered

    def describe(self) -> str:
        if not self.known:
            return "unknown (no systemctl answer and no /sys/fs/cgroup on the node)"
        units = ", ".join(self.active) or "none of the distribution's units"
        return f"{self.role or 'not told by its units'} (active: {units})"


def node_role(distro: Distro, states: Mapping[str, str]) -> NodeRole:
    """The role from `states` (unit -> `systemctl is-active`-style word, or "unknown")."""
    units = ROLE_UNITS[distro]
    if not states or all(states.get(u, "unknown") == "unknown" for u, _ in units):
        return NodeRole(known=False)
    active = tuple(u for u, _ in units if states.get(u) == "active")
    roles = [r for u, r in units if u in active and r]
    role = "+".join(sorted(set(roles), key=("server", "agent").index))
    return NodeRole(role, active)


def restart_unit_note(restart_units: tuple[str, ...], role: NodeRole) -> str | None:
    """Where the agent's "restart the active one of these units" will not find exactly one:
    said at capture time rather than at the first `pulumi up`."""
    if not restart_units or not role.known:
        return None
    active = [u for u in restart_units if u in role.active]
    if len(active) == 1:
        return None
    what = "none" if not active else f"several ({', '.join(active)})"
    return (f"{what} of {', '.join(restart_units)} active: the agent restarts containerd "
            "through the one active unit and will refuse on this node")


__all__ = ["DRIVER_SOURCES", "ROLE_UNITS", "DriverSource", "NodeRole", "StatedDriver",
           "driver_source_paths", "node_role", "restart_unit_note", "role_units",
           "stated_driver"]
