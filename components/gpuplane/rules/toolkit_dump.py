"""FM03 (error): an operator toolkit that reads containerd's config only through `containerd
config dump`, on a distribution whose containerd is not on the toolkit container's PATH.

Toolkit 1.17.0 (the pin of GPU Operator v24.9.0, or an image override) runs
`chroot /host containerd config dump` and fails when that fails, with no fall-back to the
file (`getRuntimeConfig`, tools/container/runtime/containerd/containerd.go@v1.17.0;
1.17.3 falls back, @v1.17.3). The chrooted `containerd` is looked up on the container's
PATH (deployments/container/Dockerfile.ubuntu@v1.17.8), which holds /usr/bin and
/usr/local/bin but not where K3s, RKE2, k0s, k8s-snap or MicroK8s keep their containerd
(gpuplane.distros.profiles `containerd_binaries`). The toolkit DaemonSet then fails on
every GPU node. The plan of gpuplane's own nodes says the same through
`gpuplane.toolkit.output.toolkit_blocker`; this rule judges a release's values without
nodes (a foreign release, or a stack before its nodes are captured).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import profile
from gpuplane.rules._shared import at, flag
from gpuplane.rules.toolkit_source import check_toolkit_run
from gpuplane.rules.toolkit_version import toolkit_version
from gpuplane.toolkit.installer import Installer
from gpuplane.toolkit.output import Node, toolkit_blocker


def check_toolkit_dump(values: Mapping[str, Any], intent: ClusterIntent, *,
                       chart_version: str | None, where: str) -> list[Finding]:
    """FM03 when the deployed toolkit needs a `containerd` on PATH the distribution lacks."""
    if not flag(values, "toolkit.enabled", True):
        return []
    found = toolkit_version(values, chart_version)
    try:
        version = ContainerdVersion.parse(intent.containerd_version)
        prof = profile(intent.distro, intent.containerd_base_dir)
    except ValueError:
        return []
    if found is None:
        return []
    installer = Installer(found[0])
    if not installer.dump_only:
        return []   # 1.17.1+ fall back to the file; a dump of another daemon is FM17's
    blocker = toolkit_blocker({}, {"CONTAINERD_CONFIG": prof.config_path}, installer,
                              Node(version, prof.containerd_binaries))
    if blocker is None:
        return []
    blocker = blocker.replace("on this node", f"on {prof.title} (its containerd is "
                              f"{prof.containerd_binary})")
    return check_toolkit_run(blocker, at(where, "toolkit.version", found[1]))


__all__ = ["check_toolkit_dump"]
