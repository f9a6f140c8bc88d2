"""FM17 on a host that runs Docker beside Kubernetes: which containerd each one uses.

Field incident 1 was a host with two containerd daemons, Docker's and Kubernetes', and a
toolkit that configured the wrong one. When gpuplane gives Docker the nvidia runtime too,
the plan says plainly which daemon is whose, so nobody has to work it out on the node:

- Docker's daemon.json runtimes are Docker's own; Docker runs its containers through the
  containerd of the containerd.io / docker.io service at /run/containerd/containerd.sock
  (config /etc/containerd/config.toml), or, where no such service runs, one dockerd
  starts itself at /var/run/docker/containerd/containerd.sock.
- Kubernetes' containerd is the distribution's (the profile's socket and config). Where
  it is a daemon of its own (k8s-snap with a containerd base dir, RKE2, K3s, MicroK8s,
  k0s) the two never see each other's runtimes: information. Where it has Docker's
  socket (kubeadm, k8s-snap without a base dir) they are one daemon, or two fighting
  over one socket: a warning, since restarting it for Kubernetes also cuts Docker off
  for that moment, and a toolkit aimed at "the" containerd may find either.

Pure: the distribution profile in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuplane.core.findings import Finding, Severity
from gpuplane.distros.profiles import DistroProfile
from gpuplane.rules._shared import finding

DOCKER_CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
DOCKER_CONTAINERD_CONFIG = "/etc/containerd/config.toml"
DOCKERD_OWN_SOCKET = "/var/run/docker/containerd/containerd.sock"
WHERE = "gpuplane:docker.nvidiaRuntime"


def check_docker_daemons(profile: DistroProfile,
                         toolkit_env: Mapping[str, str] | None = None) -> list[Finding]:
    """One FM17 finding naming Kubernetes' containerd and Docker's, for a plan that
    configures Docker's nvidia runtime on nodes of `profile`; with `toolkit_env` (the
    operator's toolkit runs), an error where that env leaves the toolkit's config or
    config source on Docker's containerd (`_toolkit_on_docker`)."""
    kube = f"{profile.socket} (config {profile.config_path})"
    if profile.socket != DOCKER_CONTAINERD_SOCKET and toolkit_env is not None:
        wrong = _toolkit_on_docker(toolkit_env)
        if wrong:
            return [finding(
                "FM17",
                f"two containerd daemons on each node, Kubernetes' ({profile.title}, {kube}) "
                f"and Docker's ({DOCKER_CONTAINERD_SOCKET}, config {DOCKER_CONTAINERD_CONFIG})"
                f", and the operator's toolkit is left on Docker's: {'; '.join(wrong)}. The "
                "toolkit rewrites Docker's containerd config (its `imports`, and a drop-in "
                "in /etc/containerd/conf.d copied from Docker's daemon), which Docker's "
                "containerd reads at its next restart, and undoes it on uninstall.",
                WHERE,
                f"Set `gpuplane:gpuOperator.runtimeSetup: template` (with node access): "
                f"gpuplane then points the toolkit's CONTAINERD_CONFIG, config source and "
                f"drop-in at {profile.title}'s own files. Raw Helm: toolkit.env "
                "CONTAINERD_CONFIG, RUNTIME_CONFIG_SOURCE=file=<the config> and "
                f"RUNTIME_DROP_IN_CONFIG under {profile.title}'s own dirs.",
                severity=Severity.ERROR,
                changes=(("gpuplane:gpuOperator.runtimeSetup", "template"),))]
    docker = (f"{DOCKER_CONTAINERD_SOCKET} (config {DOCKER_CONTAINERD_CONFIG}) of the "
              f"containerd.io / docker.io service, or {DOCKERD_OWN_SOCKET} where dockerd "
              "runs its own")
    if profile.socket == DOCKER_CONTAINERD_SOCKET:
        return [finding(
            "FM17",
            f"Kubernetes ({profile.title}) and Docker share one containerd socket: the "
            f"kubelet uses {kube}, Docker {docker}. It is one daemon (or two fighting over "
            "that socket): each containerd restart for Kubernetes also stops Docker's "
            "runtime for that moment, and Docker's nvidia runtime lives in "
            "/etc/docker/daemon.json, not in that containerd's config.",
            WHERE,
            "Check on a node that one containerd serves the socket (`systemctl status "
            "containerd`, `ls -l /run/containerd`). To keep Docker out of Kubernetes' "
            "restarts, run Kubernetes on its own containerd (k8s-snap: "
            "`gpuplane:cluster.containerdBaseDir`).",
            severity=Severity.WARNING)]
    return [finding(
        "FM17",
        f"two containerd daemons on each node: Kubernetes ({profile.title}) uses {kube}; "
        f"Docker uses {docker}. each nvidia runtime lives in its own daemon's config (Docker's in "
        "/etc/docker/daemon.json); the toolkit env names Kubernetes' containerd.",
        WHERE,
        "Nothing to do; when debugging a GPU pod, ask the kubelet's containerd "
        f"(`crictl --runtime-endpoint unix://{profile.socket} info`), not Docker's.",
        severity=Severity.INFO)]


def _toolkit_on_docker(env: Mapping[str, str]) -> list[str]:
    """What in the toolkit's env belongs to Docker's containerd: its default config path
    (CONTAINERD_CONFIG unset is /etc/containerd/config.toml) and its default config source
    (`command` dumps the containerd on the host's PATH: Docker's)."""
    wrong = []
    config = env.get("CONTAINERD_CONFIG") or DOCKER_CONTAINERD_CONFIG
    if config == DOCKER_CONTAINERD_CONFIG:
        shown = "is" if env.get("CONTAINERD_CONFIG") else "is not set, so it is"
        wrong.append(f"CONTAINERD_CONFIG {shown} {DOCKER_CONTAINERD_CONFIG}")
    source = env.get("RUNTIME_CONFIG_SOURCE") or "command,file"
    if source.split(",")[0].strip() == "command":
        wrong.append(f"RUNTIME_CONFIG_SOURCE {source} runs `containerd config dump` of "
                     "Docker's containerd")
    return wrong


__all__ = ["check_docker_daemons"]
