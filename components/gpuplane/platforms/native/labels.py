"""Kubernetes label syntax, checked before a label reaches a node-pool command: the
cloud APIs refuse a bad one only when the pool is created."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuplane.platforms.native.result import PlatformInputError

_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")


def check_labels(labels: Mapping[str, str], key: str) -> dict[str, str]:
    """`labels` as a plain dict; PlatformInputError (naming `key`) for a bad one."""
    for name, value in labels.items():
        if not _KEY.match(name):
            raise PlatformInputError(key, f"label key {name!r} is not a Kubernetes label key.",
                                     "Use [prefix/]name, name up to 63 of [A-Za-z0-9_.-].")
        if not isinstance(value, str) or not _VALUE.match(value):
            raise PlatformInputError(key, f"label {name}={value!r}: not a Kubernetes label "
                                     "value.", "Use up to 63 of [A-Za-z0-9_.-], quoted in YAML.")
    return dict(labels)
