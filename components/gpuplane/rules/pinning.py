"""FM18: chart versions and image tags that can change under a stack that did not.

Shared by the GPU Operator and HAMi rules. A chart version is pinned when it is one exact
semantic version (Helm reads "25.10", "~25.10" or "^2" as ranges); an image is pinned by
a version-looking tag (at least X.Y) or a digest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules._shared import at, finding

_EXACT_CHART = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_VERSION_TAG = re.compile(r"^v?\d+\.\d+")


def chart_pinned(version: str | None) -> bool:
    return isinstance(version, str) and bool(_EXACT_CHART.match(version.strip()))


def check_chart_version(version: str | None, *, chart: str, where: str,
                        stack_key: str, example: str,
                        severity: Severity | None = None) -> list[Finding]:
    """FM18: the chart version is missing, a range or not a version. `severity`: ERROR
    where the chart decides what is written into containerd on every node (the GPU
    Operator's toolkit); the policy config can lower it."""
    if chart_pinned(version):
        return []
    shown = "not set" if not version or not str(version).strip() else f"{version!r}"
    return [finding(
        "FM18",
        f"the {chart} chart version is {shown}: Helm resolves it to whatever was published "
        "last, so a later `pulumi up` can change the toolkit or scheduler without any change "
        "in the stack.",
        at(where, "chart version", stack_key),
        f"Set `{stack_key}: {example}` (one exact version); without gpuplane pass "
        f"`--version {example}` to helm.", severity=severity,
    )]


def tag_problem(tag: Any) -> str | None:
    """Why an image tag is mutable, or None when it is a version or a digest."""
    if not isinstance(tag, str | int | float) or isinstance(tag, bool):
        return f"{tag!r} is not a tag"
    text = str(tag).strip()
    if not text:
        return "empty"
    if _DIGEST.match(text) or "@sha256:" in text:
        return None
    if text == "latest":
        return "`latest`, which moves with every release"
    if _VERSION_TAG.match(text):
        return None
    return f"{text!r}, which is not a version or a digest"


def split_ref(ref: str) -> tuple[str, str | None]:
    """("repo/name", tag or digest or None) of a full image reference."""
    if "@" in ref:
        name, digest = ref.split("@", 1)
        return name, digest
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
        return name, tag
    return ref, None


def image_specs(values: Any, prefix: str = "values",
                sections: frozenset[str] = frozenset()) -> Iterator[tuple[str, Any]]:
    """(path, tag) for every image the values set: `{repository, image, version}` sections
    (GPU Operator; `sections` names those whose `version` alone is a tag, e.g.
    "values.toolkit"), `image: {repository, tag}` (HAMi, NFD) and full references in
    `image`. A section without a tag of its own keeps the chart's pinned default and is
    skipped, except a full reference without a tag, which pulls `latest`."""
    if not isinstance(values, Mapping):
        return
    image = values.get("image")
    if "version" in values and ("image" in values or "repository" in values
                                or prefix in sections):
        yield f"{prefix}.version", values["version"]
    elif isinstance(image, Mapping) and "tag" in image:
        yield f"{prefix}.image.tag", image["tag"]
    elif isinstance(image, str) and "/" in image and not values.get("repository"):
        _, tag = split_ref(image)
        yield f"{prefix}.image", tag if tag is not None else ""
    for key, child in values.items():
        if isinstance(child, Mapping):
            yield from image_specs(child, f"{prefix}.{key}", sections)


def check_image_tags(values: Any, *, where: str, stack_key: Callable[[str], str],
                     skip: Callable[[str, Any], bool] = lambda path, tag: False,
                     sections: frozenset[str] = frozenset(),
                     blocking: Callable[[str], bool] = lambda path: False) -> list[Finding]:
    """FM18: every image tag the values set that is not a version or digest; an error
    for the images `blocking` names (those that write node config or load the driver)."""
    out = []
    for path, tag in image_specs(values, sections=sections):
        if skip(path, tag):
            continue
        problem = tag_problem(tag)
        if problem is None:
            continue
        key = stack_key(path)
        out.append(finding(
            "FM18",
            f"{path} is {problem}: the image can change under an unchanged stack.",
            at(where, path, key),
            f"Set `{key}` to a release tag (or a sha256 digest), e.g. the chart's own default "
            f"for that image; without gpuplane set {path.removeprefix('values.')} in the Helm "
            "values.", severity=Severity.ERROR if blocking(path) else None,
        ))
    return out
