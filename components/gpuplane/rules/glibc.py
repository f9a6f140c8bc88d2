"""glibc of node OSes and container-toolkit image flavours (FM15).

The operator's toolkit copies its binaries onto the host; they run against the host's
glibc, so a flavour built on a newer glibc than the node's fails with `GLIBC_x.y not
found` (incident 2: an ubuntu-flavoured toolkit on Amazon Linux 2). The table holds the
glibc each release ships (from the distributions' package lists); unknown names are not
judged. NodeIntent.os and the toolkit tag suffix use the same spelling, e.g. `ubuntu20.04`,
`rhel8`, `ubi8`, `centos7`, `amzn2`.
"""

from __future__ import annotations

import re

GLIBC: dict[str, tuple[int, int]] = {
    "ubuntu18.04": (2, 27),
    "ubuntu20.04": (2, 31),
    "ubuntu22.04": (2, 35),
    "ubuntu24.04": (2, 39),
    "debian10": (2, 28),
    "debian11": (2, 31),
    "debian12": (2, 36),
    "centos7": (2, 17),
    "rhel7": (2, 17),
    "rhel8": (2, 28),    # also CentOS 8, Rocky 8, AlmaLinux 8 and the ubi8 images
    "rhel9": (2, 34),    # also Rocky 9, AlmaLinux 9 and the ubi9 images
    "amzn2": (2, 26),
    "amzn2023": (2, 34),
}

# Flavour suffixes NVIDIA publishes toolkit images with, and the OS each is built on.
FLAVOURS: dict[str, str] = {
    "ubuntu18.04": "ubuntu18.04",
    "ubuntu20.04": "ubuntu20.04",
    "ubuntu22.04": "ubuntu22.04",
    "ubi8": "rhel8",
    "ubi9": "rhel9",
    "centos7": "centos7",
}

_RHEL_LIKE = re.compile(r"^(?:rhel|centos|rocky|almalinux|alma|ol|ubi)(\d+)(?:\.\d+)*$")
_UBUNTU = re.compile(r"^ubuntu(\d+\.\d+)(?:\.\d+)?$")
_DEBIAN = re.compile(r"^debian(\d+)(?:\.\d+)*$")
_SUFFIX = re.compile(r"-(ubuntu\d+\.\d+|ubi\d+|centos\d+)$")


def os_key(os: str) -> str | None:
    """The table key of a node OS or flavour name ("rocky8.9" -> "rhel8"), or None."""
    text = os.strip().lower()
    if text in GLIBC:
        return text
    if text in FLAVOURS:
        return FLAVOURS[text]
    if match := _UBUNTU.match(text):
        return f"ubuntu{match.group(1)}"
    if match := _DEBIAN.match(text):
        return f"debian{match.group(1)}"
    if match := _RHEL_LIKE.match(text):
        major = match.group(1)
        return "centos7" if major == "7" else f"rhel{major}"
    return None


def glibc_of(os: str) -> tuple[int, int] | None:
    key = os_key(os)
    return GLIBC.get(key) if key else None


def flavour_of(tag: str) -> str | None:
    """The OS flavour suffix of a toolkit tag ("v1.17.8-ubuntu20.04" -> "ubuntu20.04")."""
    match = _SUFFIX.search(tag.strip())
    return match.group(1) if match else None


def flavours_for(node_glibc: tuple[int, int]) -> list[str]:
    """Flavours whose binaries run on a host with `node_glibc`."""
    return sorted(f for f, os in FLAVOURS.items() if GLIBC[os] <= node_glibc)


def fmt(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"
