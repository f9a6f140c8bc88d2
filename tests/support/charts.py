"""The upstream Helm charts as test data: ../shared/charts (outside the repository).

`gpu-operator/<tag>/` is NVIDIA/gpu-operator `deployments/gpu-operator` at each release
tag, `hami/<version>/` is Project-HAMi/HAMi `charts/hami` (../shared/charts/README.md
names the commits). The product never reads them; tests do, only through this module,
which skips with the reason when the folder is absent and fails under
`GPUPLANE_REQUIRE_REAL=1` (`oracle.unavailable`, the one place that policy lives).
"""

from __future__ import annotations

import os
import re
import tarfile
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from support import oracle

ROOT = Path(__file__).resolve().parents[2]
_MISSING = object()
# `.Values.a.b.c` in a template; `toYaml .Values.a` hands the whole map `a` on.
_VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_WHOLE_REF = re.compile(r"toYaml\s+\(?\s*\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


_CHARTS_REMEDY = ("lay the shared test data beside the checkout (../shared/charts with "
                  "gpu-operator/<tag> and hami/<version>) or set GPUPLANE_CHARTS")


def charts_dir() -> Path:
    """`$GPUPLANE_CHARTS` or `../shared/charts` from the repository root."""
    env = os.environ.get("GPUPLANE_CHARTS")
    path = Path(env) if env else ROOT.parent / "shared" / "charts"
    if not (path / "gpu-operator").is_dir() or not (path / "hami").is_dir():
        oracle.unavailable(f"upstream charts: {path} is missing", _CHARTS_REMEDY)
    return path


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", name))


def chart_dirs(chart: str) -> dict[str, Path]:
    """{version: folder} of every copy of `chart` ("gpu-operator" or "hami"), oldest first."""
    base = charts_dir() / chart
    found = [p for p in base.iterdir() if (p / "values.yaml").is_file()]
    if not found:
        oracle.unavailable(f"upstream charts: no {chart} chart under {base}", _CHARTS_REMEDY)
    return {p.name: p for p in sorted(found, key=lambda p: _version_key(p.name))}


@cache
def values(folder: Path) -> dict[str, Any]:
    """The chart's values.yaml."""
    data = yaml.safe_load((folder / "values.yaml").read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def lookup(data: Mapping[str, Any], path: str, default: Any = _MISSING) -> Any:
    """`data` at dotted `path`; `default` (or KeyError) when a key is absent."""
    cur: Any = data
    for key in path.split("."):
        if not isinstance(cur, Mapping) or key not in cur:
            if default is _MISSING:
                raise KeyError(path)
            return default
        cur = cur[key]
    return cur


def has(data: Mapping[str, Any], path: str) -> bool:
    """Whether `path` is set in `data` (to anything, null included)."""
    absent = object()
    return lookup(data, path, absent) is not absent


def _templates(folder: Path) -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace")
            for p in sorted((folder / "templates").rglob("*")) if p.is_file()]


@cache
def template_refs(folder: Path) -> frozenset[str]:
    """Every `.Values.<path>` the chart's templates (subcharts left out) read."""
    return frozenset(m.group(1)[1:] for text in _templates(folder)
                     for m in _VALUES_REF.finditer(text))


@cache
def whole_maps(folder: Path) -> frozenset[str]:
    """The `.Values.<path>` maps the templates hand on whole (`toYaml .Values.<path>`)."""
    return frozenset(m.group(1)[1:] for text in _templates(folder)
                     for m in _WHOLE_REF.finditer(text))


def leaf_paths(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every leaf of `data`; a list or an empty map is a leaf."""
    out: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out += leaf_paths(value, f"{path}.")
        else:
            out.append(path)
    return out


def consumed(folder: Path, path: str) -> bool:
    """Whether the chart knows value `path`: it is in values.yaml, a template reads it, or
    a template hands a map above it on whole (`toYaml .Values.<map>`)."""
    if has(values(folder), path) or path in template_refs(folder):
        return True
    parts = path.split(".")
    return any(".".join(parts[:i]) in whole_maps(folder) for i in range(len(parts) - 1, 0, -1))


# ------------------------------------------------------------------ Helm's engine

_HELM_REMEDY = "install the test extra (`pip install -e '.[test]'`: helm-python-sdk)"


def helm() -> Any:
    """Helm's own engine (helm-python-sdk: Helm's Go SDK through ctypes), or skip/fail."""
    try:
        import helm_python
    except ImportError:
        oracle.unavailable("Helm's engine: helm-python-sdk is not installed", _HELM_REMEDY)
    return helm_python


def render(folder: Path, values: Mapping[str, Any], *, name: str = "gpuplane",
           namespace: str = "gpuplane") -> list[dict[str, Any]]:
    """The chart's manifests as `helm template` renders them with `values` (subcharts
    included; NOTES.txt left out), one dict per YAML document."""
    with helm().Chart.load(str(folder)) as chart:
        rendered = chart.render(dict(values), name=name, namespace=namespace, is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith((".yaml", ".yml")):
            docs += [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    return docs


def subchart_values(folder: Path) -> dict[str, dict[str, Any]]:
    """{subchart name: its values.yaml} of the subcharts bundled under charts/ (folders
    or .tgz), as the parent's values see them (under the subchart's name)."""
    out: dict[str, dict[str, Any]] = {}
    for sub in sorted((folder / "charts").glob("*")) if (folder / "charts").is_dir() else []:
        if sub.is_dir() and (sub / "values.yaml").is_file():
            meta = yaml.safe_load((sub / "Chart.yaml").read_text(encoding="utf-8"))
            data = yaml.safe_load((sub / "values.yaml").read_text(encoding="utf-8"))
        elif sub.name.endswith(".tgz"):
            with tarfile.open(sub) as tar:
                top = tar.getnames()[0].split("/")[0]
                meta = yaml.safe_load(_member(tar, f"{top}/Chart.yaml"))
                data = yaml.safe_load(_member(tar, f"{top}/values.yaml"))
        else:
            continue
        out[meta["name"]] = data if isinstance(data, dict) else {}
    return out


def _member(tar: tarfile.TarFile, name: str) -> str:
    handle = tar.extractfile(name)
    return handle.read().decode("utf-8") if handle else ""


def walk(data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted path, value) below `data`, maps first-to-last, lists by index."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            here = f"{path}.{key}" if path else str(key)
            yield here, value
            yield from walk(value, here)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield f"{path}[{i}]", value
            yield from walk(value, f"{path}[{i}]")


__all__ = ["chart_dirs", "charts_dir", "consumed", "has", "helm", "leaf_paths", "lookup",
           "render", "subchart_values", "template_refs", "values", "walk", "whole_maps"]
