"""Helm 3 release records: decode the release Secrets helm keeps in the cluster.

Helm stores each revision of a release in a Secret `sh.helm.release.v1.<name>.v<N>`
(labels owner=helm, name, status, version) whose `release` key is base64 (the API's own
encoding) of base64 of gzip of the release JSON. The doctor needs the deployed revision's
chart, version and values, nothing else: the rendered manifest and chart files are dropped
and values keys that look like credentials are redacted before anything is saved.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from typing import Any

from gpuplane.config.helm_values import deep_merge

CHARTS = ("gpu-operator", "hami")     # the only releases the doctor reads
SECRET_TYPE = "helm.sh/release.v1"
LABEL_SELECTOR = "owner=helm,status=deployed"
_GZIP = b"\x1f\x8b\x08"
_SECRET_KEY = re.compile(r"(password|passwd|token|secret|apikey|api_key|credential)",
                         re.IGNORECASE)
REDACTED = "<redacted by gpuplane>"


class ReleaseDecodeError(ValueError):
    """A helm release Secret whose payload is not what helm writes."""


def decode_release(secret: dict[str, Any]) -> dict[str, Any]:
    """The release JSON inside a helm release Secret (as the API returns the Secret)."""
    name = secret.get("metadata", {}).get("name", "?")
    payload = (secret.get("data") or {}).get("release")
    if not isinstance(payload, str):
        raise ReleaseDecodeError(f"Secret {name}: no `release` key")
    try:
        inner = base64.b64decode(payload, validate=True)
        raw = base64.b64decode(inner, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ReleaseDecodeError(f"Secret {name}: `release` is not base64 ({exc})") from None
    if raw[:3] == _GZIP:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ReleaseDecodeError(f"Secret {name}: bad gzip data ({exc})") from None
    try:
        release = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReleaseDecodeError(f"Secret {name}: release is not JSON ({exc})") from None
    if not isinstance(release, dict):
        raise ReleaseDecodeError(f"Secret {name}: release is not a JSON object")
    return release


def encode_release(release: dict[str, Any]) -> str:
    """The inverse of `decode_release` for the Secret's `data.release` (tests, fixtures)."""
    inner = base64.b64encode(gzip.compress(json.dumps(release).encode(), mtime=0))
    return base64.b64encode(inner).decode()


def release_record(release: dict[str, Any]) -> dict[str, Any] | None:
    """The snapshot's record of a gpu-operator or HAMi release; None for other charts."""
    chart = release.get("chart") or {}
    meta = chart.get("metadata") or {}
    if meta.get("name") not in CHARTS:
        return None
    return {
        "name": release.get("name"),
        "namespace": release.get("namespace"),
        "revision": release.get("version"),
        "status": (release.get("info") or {}).get("status"),
        "chart": {"name": meta.get("name"), "version": meta.get("version"),
                  "appVersion": meta.get("appVersion")},
        "values": redact(release.get("config") or {}),
        "chartValues": redact(chart.get("values") or {}),
    }


def effective_values(record: dict[str, Any]) -> dict[str, Any]:
    """What the release was rendered with: the chart's defaults, then the user's values."""
    return deep_merge(record.get("chartValues") or {}, record.get("values") or {})


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) and isinstance(v, str) and v
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


__all__ = ["CHARTS", "LABEL_SELECTOR", "ReleaseDecodeError", "decode_release",
           "effective_values", "encode_release", "release_record"]
