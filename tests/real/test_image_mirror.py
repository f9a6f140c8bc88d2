"""`imageMirror`: every image the GPU Operator and HAMi charts deploy comes from the mirror,
with its repository path and tag kept. Held against the upstream charts themselves
(../shared/charts, every version there): the image references their values.yaml (and their
bundled subcharts') set, and the manifests Helm's engine renders from gpuplane's values."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from support import charts

from gpuplane.config import StackConfig, parse_stack_config
from gpuplane.config.helm_values import deep_merge, hami_values, operator_values

MIRROR = "mirror.airgap.internal:5000/gpu"
_ENV = [{"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"}]


def _stack(**extra: Any) -> StackConfig:
    return parse_stack_config({
        "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                    "nodeAccess": "none"},
        **extra,
    })


def _operator(chart: str, mirror: str | None = MIRROR, **keys: Any) -> dict[str, Any]:
    mirror_key = {"imageMirror": mirror} if mirror else {}
    cfg = _stack(gpuOperator={"chartVersion": chart, **mirror_key, **keys})
    return operator_values(cfg, _ENV)


def _hami(chart: str, mirror: str | None = MIRROR, **keys: Any) -> dict[str, Any]:
    mirror_key = {"imageMirror": mirror} if mirror else {}
    cfg = _stack(gpuOperator={"chartVersion": "v25.10.1"}, devicePlugin="hami",
                 hami={"chartVersion": chart, **mirror_key, **keys})
    return hami_values(cfg)


def _split(ref: str) -> tuple[str, str]:
    """`registry`, `path` of an image reference (Docker's rule: the first component is a
    registry when it has a '.' or ':' or is localhost; else Docker Hub)."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", ref


def _moved(ref: str) -> str:
    return f"{MIRROR}/{_split(ref)[1]}"


def _defaults(folder: Any) -> dict[str, Any]:
    """The chart's values as Helm sees them: the subcharts' own values under their names,
    the parent's values.yaml over them."""
    return deep_merge(charts.subchart_values(folder), charts.values(folder))


def _image_refs(defaults: dict[str, Any]) -> dict[str, str]:
    """{values path: what it holds} for every image reference in a chart's values: a
    non-empty `registry` (HAMi's `image.registry`), else a non-empty `repository` that
    names registry and path (`nvcr.io/nvidia/k8s`, `registry.k8s.io/nfd/...`)."""
    out = {}
    for path, value in charts.walk(defaults):
        if not isinstance(value, dict):
            continue
        if isinstance(value.get("registry"), str) and value["registry"]:
            out[f"{path}.registry"] = value["registry"]
        elif isinstance(value.get("repository"), str) and value["repository"]:
            out[f"{path}.repository"] = value["repository"]
    return out


def _expected(path: str, default: str) -> str:
    return MIRROR if path.endswith(".registry") else _moved(default)


def _unmirrored(values: dict[str, Any], refs: dict[str, str]) -> dict[str, tuple[str, Any]]:
    return {path: (default, charts.lookup(values, path, "<unset>"))
            for path, default in refs.items()
            if charts.lookup(values, path, "<unset>") != _expected(path, default)}


# ------------------------------------------------------------------ values.yaml

def test_every_operator_image_reference_moves_to_the_mirror() -> None:
    """Each chart version's own image references (its values.yaml and NFD's), rewritten to
    the mirror with the path kept; no chart version is left out."""
    missed = {}
    counts = {}
    for tag, folder in charts.chart_dirs("gpu-operator").items():
        refs = _image_refs(_defaults(folder))
        counts[tag] = len(refs)
        missed[tag] = _unmirrored(_operator(tag), refs)
    assert missed == {key: {} for key in missed}
    assert min(counts.values()) >= 15   # the walk finds the chart's images at all


def test_every_hami_image_reference_moves_to_the_mirror() -> None:
    missed = {}
    for version, folder in charts.chart_dirs("hami").items():
        refs = _image_refs(_defaults(folder))
        assert any(p.endswith("kubeScheduler.image.registry") for p in refs), version
        missed[version] = _unmirrored(_hami(version), refs)
    assert missed == {key: {} for key in missed}


def test_without_a_mirror_the_values_are_todays() -> None:
    """No `imageMirror`: gpuplane sets no image value it did not set before."""
    tag = next(iter(charts.chart_dirs("gpu-operator")))
    refs = _image_refs(_defaults(charts.chart_dirs("gpu-operator")[tag]))
    plain = _operator(tag, mirror=None)
    assert [p for p in refs if charts.has(plain, p)] == []


# ------------------------------------------------------------------ rendered manifests

_WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod", "ReplicaSet"}


def _rendered_images(docs: Iterable[dict[str, Any]]) -> set[str]:
    """Every image the manifests run or hand the operator to run: containers and init
    containers, `*_IMAGE` env values (the operator's driver-manager and validator), and the
    `repository`/`image`/`version` triples of a custom resource (the ClusterPolicy)."""
    out: set[str] = set()
    for doc in docs:
        workload = doc.get("kind") in _WORKLOADS
        for path, value in charts.walk(doc):
            key = path.rsplit(".", 1)[-1]
            if key in ("containers", "initContainers") and isinstance(value, list):
                out |= {c["image"] for c in value if isinstance(c, dict) and c.get("image")}
            elif isinstance(value, dict) and str(value.get("name", "")).endswith("_IMAGE") \
                    and isinstance(value.get("value"), str) and "/" in value["value"]:
                out.add(value["value"])
            elif not workload and isinstance(value, dict) \
                    and isinstance(value.get("repository"), str) and value["repository"] \
                    and isinstance(value.get("image"), str):
                out.add(f"{value['repository']}/{value['image']}:{value.get('version', '')}")
    return out


def _check_rendered(folder: Any, plain: dict[str, Any],
                    mirrored: dict[str, Any]) -> dict[str, Any]:
    before = _rendered_images(charts.render(folder, plain))
    after = _rendered_images(charts.render(folder, mirrored))
    return {"elsewhere": sorted(i for i in after if not i.startswith(MIRROR + "/")),
            "paths or tags changed": sorted(after ^ {_moved(i) for i in before}),
            "images": len(before) >= 3}


# The operator's optional NVIDIADriver resource (the driver managed by CRD). v26.7's
# GPUCluster (its DRA driver) renders only against a cluster serving the DRA API, which
# the engine's offline render cannot claim: its `draDriver.repository` is held to the
# mirror by the values.yaml test above.
_ALL_CRS = {"driver": {"enabled": True, "nvidiaDriverCRD": {"enabled": True}}}


def test_rendered_operator_images_all_point_at_the_mirror() -> None:
    """The operator as gpuplane installs it, and with every optional custom resource."""
    got = {}
    for tag, folder in charts.chart_dirs("gpu-operator").items():
        got[tag] = _check_rendered(folder, _operator(tag, mirror=None), _operator(tag))
        got[f"{tag} CRs"] = _check_rendered(
            folder, deep_merge(_operator(tag, mirror=None), _ALL_CRS),
            deep_merge(_operator(tag), _ALL_CRS))
    ok = {"elsewhere": [], "paths or tags changed": [], "images": True}
    assert got == dict.fromkeys(got, ok)


def test_rendered_hami_images_all_point_at_the_mirror() -> None:
    """HAMi as gpuplane installs it, and with its DRA subchart switched on where the chart
    bundles it (`dra.enabled`: other images)."""
    got = {}
    for version, folder in charts.chart_dirs("hami").items():
        got[version] = _check_rendered(folder, _hami(version, mirror=None), _hami(version))
        if "hami-dra" in charts.subchart_values(folder):
            dra = {"dra": {"enabled": True}}
            got[f"{version} dra"] = _check_rendered(
                folder, deep_merge(_hami(version, mirror=None), dra),
                deep_merge(_hami(version), dra))
    ok = {"elsewhere": [], "paths or tags changed": [], "images": True}
    assert any(key.endswith(" dra") for key in got)
    assert got == dict.fromkeys(got, ok)


def test_the_rendered_check_can_fail() -> None:
    """An image left at its registry is reported (the checks above are not vacuous)."""
    version, folder = next(iter(charts.chart_dirs("hami").items()))
    leaky = deep_merge(_hami(version), {"devicePlugin": {"image": {"registry": "docker.io"}}})
    got = _check_rendered(folder, _hami(version, mirror=None), leaky)
    assert got["elsewhere"] and all(i.startswith("docker.io/") for i in got["elsewhere"])


# ------------------------------------------------------------------ the user's values win

def test_values_the_user_set_win_over_the_mirror() -> None:
    tag = "v25.10.1"
    mine = "registry.example/team/dcgm"
    values = _operator(tag, values={"dcgm": {"repository": mine}},
                       toolkitImage={"repository": "registry.example/tk/container-toolkit",
                                     "tag": "v1.18.1"})
    assert values["dcgm"]["repository"] == mine
    assert values["toolkit"]["repository"] == "registry.example/tk"
    assert values["driver"]["repository"] == f"{MIRROR}/nvidia"
    hami = _hami("2.10.0", schedulerImageRegistry="registry.example",
                 values={"devicePlugin": {"image": {"registry": "other.example"}}})
    assert hami["scheduler"]["kubeScheduler"]["image"]["registry"] == "registry.example"
    assert hami["devicePlugin"]["image"]["registry"] == "other.example"
    assert hami["scheduler"]["extender"]["image"]["registry"] == MIRROR
