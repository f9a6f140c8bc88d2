"""Where a Helm chart comes from: the upstream repository, a local chart, an HTTP(S) mirror
repository or an OCI reference (`gpuOperator.chart`, `hami.chart`).

Pure apart from `local_chart_problem`, which reads the chart a local path names. The
stack config parses the key (`parse_chart_source`), the program checks a local chart
against the project root (`chart_problems`), and the components hand `release_chart` to
`helm.v3.Release` as Helm takes it: a name and a repository URL, a path, or `oci://...`.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

ChartKind = Literal["upstream", "path", "http", "oci"]

# What each kind is called in messages and in the plan's text.
KIND_TEXT: dict[str, str] = {"upstream": "upstream repository", "path": "local chart",
                             "http": "mirror repository", "oci": "OCI registry"}
FORMS = ("a local chart (a directory with Chart.yaml, or a .tgz; relative paths are from "
         "the project root), an http(s):// chart repository, or an oci:// reference "
         "ending with the chart's name; leave it unset for the upstream repository")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
_HOST = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])"
                   r"(:\d{1,5})?$")
_EXACT = re.compile(r"^v?\d+\.\d+\.\d+([-+].*)?$")


@dataclass(frozen=True)
class ChartSource:
    """A parsed chart source. `location`: the path as written, the repository URL, or the
    OCI reference without its tag (`tag`: the tag it carried, checked against the
    chart version)."""

    kind: ChartKind
    location: str = ""
    tag: str | None = None

    def release_chart(self, chart: str, upstream: str) -> tuple[str, str | None]:
        """`(chart, repo)` for `helm.v3.Release`: `chart` is the chart's name (with the
        repository URL as `repo`), a local path, or the `oci://` reference."""
        if self.kind == "upstream":
            return chart, upstream
        if self.kind == "http":
            return chart, self.location
        return self.location, None

    @property
    def text(self) -> str:
        return KIND_TEXT[self.kind]


UPSTREAM = ChartSource("upstream")


def parse_chart_source(value: str, chart: str) -> ChartSource:
    """The source `value` names for chart `chart`; ValueError with the fix otherwise."""
    value = value.strip()
    if not value:
        raise ValueError(f"empty; fix: give {FORMS}")
    match = _SCHEME.match(value)
    if not match:
        return ChartSource("path", value)
    scheme, rest = match[1].lower(), match[2]
    if scheme in ("http", "https"):
        host = rest.split("/", 1)[0]
        if not host or not _HOST.match(host):
            raise ValueError(f"{value} has no host; fix: give the chart repository's URL, "
                             f"the folder with index.yaml (e.g. https://charts.example.internal"
                             f"/nvidia)")
        return ChartSource("http", value.rstrip("/"))
    if scheme == "oci":
        return _oci(value, rest, chart)
    raise ValueError(f"{scheme}:// is not a chart source Helm installs from; fix: give "
                     f"{FORMS}")


def _oci(value: str, rest: str, chart: str) -> ChartSource:
    host, _, path = rest.partition("/")
    if not host or not _HOST.match(host):
        raise ValueError(f"{value} has no registry host; fix: write "
                         f"oci://<registry>/<path>/{chart}")
    if "@" in path:
        raise ValueError(f"{value}: a digest is not a chart version Helm installs by; fix: "
                         f"drop it (chartVersion pins the version)")
    last = path.rsplit("/", 1)[-1]
    name, _, tag = last.partition(":")
    if name != chart:
        base = f"oci://{host}/{path}".rstrip("/")
        raise ValueError(f"{value} must end with the chart's name: {base}/{chart}; fix: "
                         f"use that reference (Helm pulls <registry>/<path>/<chart>)")
    location = f"oci://{host}/{path[:len(path) - len(last)]}{name}"
    return ChartSource("oci", location, tag or None)


def oci_tag_problem(source: ChartSource, chart_version: str) -> str | None:
    """An OCI tag that disagrees with the pinned chart version, with the fix."""
    if source.kind != "oci" or not source.tag:
        return None
    if source.tag.lstrip("v") == chart_version.strip().lstrip("v"):
        return None
    return (f"{source.location}:{source.tag} is tagged {source.tag} but chartVersion is "
            f"{chart_version}; fix: drop the tag ({source.location}), chartVersion pins "
            "the version")


# ------------------------------------------------------------------ local charts

def read_chart_meta(path: Path) -> dict[str, Any]:
    """Chart.yaml of a chart directory or `.tgz`. OSError / ValueError say what is wrong."""
    if path.is_dir():
        meta = path / "Chart.yaml"
        if not meta.is_file():
            raise ValueError("no Chart.yaml: not a Helm chart")
        text = meta.read_text(encoding="utf-8")
    elif path.is_file():
        try:
            with tarfile.open(path, "r:*") as tar:
                names = [n for n in tar.getnames()
                         if len(PurePosixPath(n).parts) == 2 and n.endswith("/Chart.yaml")]
                handle = tar.extractfile(names[0]) if names else None
                if handle is None:
                    raise ValueError("no <chart>/Chart.yaml in the archive: not a Helm chart")
                text = handle.read().decode("utf-8")
        except (tarfile.TarError, EOFError):
            raise ValueError("not a chart archive (a .tgz `helm package` writes)") from None
    else:
        raise FileNotFoundError(2, "no such file or directory")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError("Chart.yaml is not valid YAML") from None
    if not isinstance(data, dict):
        raise ValueError("Chart.yaml is not a mapping")
    return data


def local_chart_problem(source: ChartSource, root: Path, chart: str, chart_version: str,
                        version_key: str) -> str | None:
    """Why the local chart `source` names is not chart `chart` at `chart_version` (a path
    relative to the project root `root`), with the fix; None when it is."""
    if source.kind != "path":
        return None
    where = f"{source.location}" + ("" if Path(source.location).is_absolute()
                                     else f" (relative to the project root {root})")
    try:
        meta = read_chart_meta(root / source.location)
    except OSError as exc:
        return (f"{where}: {exc.strerror or exc}; fix: lay the {chart} chart there (a "
                f"directory with Chart.yaml, or the .tgz `helm pull` / `helm package` "
                "writes), or correct the path")
    except (ValueError, UnicodeDecodeError) as exc:
        return (f"{where}: {exc}; fix: point at the {chart} chart's own directory (the one "
                "with Chart.yaml) or its .tgz")
    name = str(meta.get("name", ""))
    if name != chart:
        return (f"{where} is the chart {name or '(unnamed)'}, not {chart}; fix: point at "
                f"the {chart} chart")
    have = str(meta.get("version", ""))
    want = chart_version.strip()
    if _EXACT.match(want) and have.lstrip("v") != want.lstrip("v"):
        return (f"{where} is version {have or '(none)'} but {version_key} is {want}; fix: "
                f"use the chart of that release, or package this one as that version "
                f"(`helm package --version {want} --app-version {want} "
                f"{source.location}`) and point at the .tgz")
    return None


def local_chart_path(chart: str, repo: str | None = None) -> Path | None:
    """The local chart a Release's or Chart's `chart` names, as the Kubernetes provider
    finds it (pulumi/pulumi-kubernetes provider/pkg/provider/helm_release.go@v4.25.0,
    `locateChart` / `localChart`): with no repository, a path that exists (a directory
    with Chart.yaml, or a file: a `.tgz`) relative to the working directory, which Pulumi
    sets to the program's directory for the provider (pulumi/pulumi
    sdk/go/common/resource/plugin/plugin.go@v3.260.0, `cmd.Dir = pwd`). Anything else,
    e.g. `nvidia/gpu-operator` with no such folder, is a chart a repository resolves:
    None."""
    if repo or not chart or "://" in chart:
        return None
    path = Path(chart)
    if path.is_dir():
        return path if (path / "Chart.yaml").is_file() else None
    return path if path.is_file() else None


def chart_version_of(chart: Any, version: Any, repo: Any = None) -> str | None:
    """The chart version a Release or Chart installs. A local chart is installed as it is,
    whatever `version` says, and the provider's Check records its Chart.yaml version as
    the release's (helm_release.go@v4.25.0, `new.Version = chart.Metadata.Version`): it
    is pinned by its content, never resolved to "whatever was published last". Anything
    else: `version` as written. None: not set, and not a readable local chart."""
    local = local_chart_path(chart, repo if isinstance(repo, str) else None) \
        if isinstance(chart, str) else None
    if local is not None:
        try:
            found = read_chart_meta(local).get("version")
        except (OSError, ValueError, UnicodeDecodeError):
            found = None
        if found:
            return str(found)
    if isinstance(version, str) and version.strip():
        return version
    return None


def release_version(props: Mapping[str, Any]) -> str | None:
    """The chart version a `helm.v3.Release` or `helm.v4.Chart` (its inputs: `chart`,
    `version`, `repositoryOpts.repo`) installs, by chart_version_of."""
    repo = props.get("repositoryOpts")
    return chart_version_of(props.get("chart"), props.get("version"),
                            repo.get("repo") if isinstance(repo, Mapping) else None)


def chart_name_of(chart: str, fallback: str | None = None) -> str | None:
    """The chart a `helm.v3.Release`'s `chart` input installs: a name as is, the last
    component of an `oci://` reference, Chart.yaml's name for a local path, the chart of
    a `<repo>/<chart>` reference to a repository added by `helm repo add` (a path that
    cannot be read otherwise: `fallback`)."""
    if "://" in chart:
        return chart.rsplit("/", 1)[-1].partition(":")[0] or fallback
    if "/" not in chart and not chart.endswith(".tgz") and chart not in (".", ".."):
        return chart
    try:
        return str(read_chart_meta(Path(chart)).get("name") or fallback)
    except (OSError, ValueError, UnicodeDecodeError):
        repo, _, name = chart.partition("/")
        if (repo and name and "/" not in name and not repo.startswith(".")
                and not chart.endswith(".tgz") and not Path(chart).exists()):
            return name
        return fallback


__all__ = ["KIND_TEXT", "UPSTREAM", "ChartSource", "chart_name_of", "chart_version_of",
           "local_chart_path", "local_chart_problem", "oci_tag_problem", "parse_chart_source",
           "read_chart_meta", "release_version"]
