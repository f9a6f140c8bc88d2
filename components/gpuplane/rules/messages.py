"""What the failure modes look like in the cluster: the texts containerd, the kubelet,
the scheduler and the toolkit print. One vocabulary for every place that reads events,
pod output or node errors (the doctor, the post-deploy checks, the node inspection), so
a symptom is recognised the same way wherever it shows up."""

from __future__ import annotations

import re

# containerd has no runtime for the pod's handler (FM01, FM17, FM02, ...).
NO_RUNTIME = re.compile(r'no runtime for "?(?P<handler>[\w.-]+)"? is configured'
                        r"|RuntimeHandler .* not supported", re.I)
# The pod names a RuntimeClass the cluster does not have (FM11).
NO_RUNTIMECLASS = re.compile(r'RuntimeClass "?(?P<name>[\w.-]+)"? not found', re.I)
# The scheduler found no node with enough of an NVIDIA resource (FM10, FM12, FM13, FM14).
# (The resource name ends on a word character: "... nvidia.com/gpu." ends a sentence.)
INSUFFICIENT = re.compile(r"Insufficient (?P<resource>nvidia\.com/[\w.-]*\w)", re.I)
INSUFFICIENT_SHARES = re.compile(                                          # HAMi's shares
    r"Insufficient (?P<resource>nvidia\.com/gpu(?:mem|cores)(?:[\w.-]*\w)?)", re.I)
INSUFFICIENT_GPUS = re.compile(r"Insufficient nvidia\.com/gpu\b", re.I)             # cards
# CDI devices requested that the runtime cannot resolve (FM13, FM16).
CDI_UNRESOLVABLE = re.compile(r"unresolvable CDI devices", re.I)
# The toolkit's binaries need a newer glibc than the host has (FM15).
GLIBC_MISSING = re.compile(r"GLIBC_\d+(?:\.\d+)+'? not found", re.I)
# A node is not ready or unreachable (e.g. containerd's CRI plugin failed to load).
NODE_NOT_READY = re.compile(r"node\.kubernetes\.io/(not-ready|unreachable)")

__all__ = ["CDI_UNRESOLVABLE", "GLIBC_MISSING", "INSUFFICIENT", "INSUFFICIENT_GPUS",
           "INSUFFICIENT_SHARES", "NODE_NOT_READY", "NO_RUNTIME", "NO_RUNTIMECLASS"]
