"""The containerd model against real containerd 1.6, 1.7, 2.0, 2.1 and 2.2.

Every case is merged twice: by the model (pure Python) and by the real binary
(`containerd config dump`). The effective CRI view (default runtime, CDI, runtimes with
runtime_type and options) must be identical, and containerd must refuse exactly the
layouts the model says it refuses. Beyond the runtimes (#39): whether the CRI service
runs, `disabled_plugins`, and the CRI settings (sandbox image, registry config_path and
mirrors, CNI dirs) each layout puts in effect; layouts include no top-level file and
version-3 drop-ins over version-2 roots with or without runtimes.
Generated layouts come from hypothesis: at least 300
per version (GPUPLANE_DIFF_EXAMPLES raises it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import oracle, oracle_settings

from gpuplane.containerd import ContainerdVersion, LocalFiles, load_config
from gpuplane.containerd.effective import decode
from gpuplane.containerd.merge import merge
from gpuplane.containerd.settings import disabled_plugins

EXAMPLES = int(os.environ.get("GPUPLANE_DIFF_EXAMPLES", "300"))
KEYS = {0: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
RUNTIME_NAMES = ("runc", "nvidia", "kata")


def model_view(top: Path, line: str) -> tuple[dict[str, Any], list[str], Any]:
    """The model's effective view, the refusals containerd's loader itself reports, and
    the effective config (a missing `top` is containerd's built-in defaults)."""
    version = ContainerdVersion.parse(line)
    loaded = load_config(str(top), LocalFiles(), version, missing_ok=True)
    merged = merge(loaded)
    _, disabled_refusals, _ = disabled_plugins(loaded.files, version, merged.version)
    load_refusals = [*loaded.refusals, *merged.refusals, *disabled_refusals]
    eff = decode(loaded)
    return eff.to_dict(), load_refusals, eff


def real_dump(line: str, top: Path) -> oracle.DumpResult:
    """`config dump` of the layout; with no top-level file, 2.x dumps its defaults while
    1.x's `config dump` refuses (its daemon is taken to run on its defaults: not
    measured here), so 1.x dumps an empty file instead."""
    if top.exists() or line.startswith("2."):
        return oracle.dump(line, top)
    with tempfile.TemporaryDirectory(prefix="gp-empty-") as tmp:
        empty = Path(tmp) / "config.toml"
        empty.write_text("")
        return oracle.dump(line, empty)


def assert_same(line: str, top: Path) -> None:
    real = real_dump(line, top)
    view, refusals, eff = model_view(top, line)
    files = "\n".join(f"--- {p}\n{p.read_text()}" for p in sorted(top.parent.rglob("*.toml")))
    files = files or "(no top-level file)"
    if not real.ok:
        assert refusals, f"containerd {line} refused but the model did not:\n{real.error}\n{files}"
        return
    assert not refusals, f"model refused ({refusals}) but containerd {line} loaded:\n{files}"
    dumped = real.config or {}
    served = oracle_settings.cri_served(line, dumped)
    assert (not eff.cri_disabled) == served, files
    assert eff.disabled_plugins == dumped.get("disabled_plugins", []), files
    if served or line.startswith("2."):   # 1.x dumps no CRI table for a disabled CRI
        assert view == oracle.effective_from_dump(line, dumped), files
        assert oracle_settings.beyond_defaults(line, eff.settings) == \
            oracle_settings.beyond_defaults(
                line, oracle_settings.settings_from_dump(line, dumped)), files
    if top.exists() and served:
        assert_settings_losses(line, top, dumped, files)


def assert_settings_losses(line: str, top: Path, dumped: dict[str, Any], files: str) -> None:
    """The CRI settings other than runtimes (sandbox image, CNI dirs, registry) the model
    says a later file dropped (FM02's `setting` losses) are exactly those whose value in
    `config dump` is not the one the last file setting them wrote."""
    from gpuplane.containerd import effective_config
    from gpuplane.rules.containerd import ContainerdFacts, analyse

    eff = effective_config(str(top), LocalFiles(), ContainerdVersion.parse(line))
    analysis = analyse(ContainerdFacts(eff))
    lost = {x.option for x in analysis.losses if x.kind == "setting"}
    if line.startswith("2."):
        # 2.x (#39): what a file sets, read by its own version, that the dump lacks (a
        # version-3 drop-in over a version-2 root ignores the root's CRI tables now).
        from gpuplane.containerd.settings import file_settings
        shown = oracle_settings.settings_from_dump(line, dumped)
        last: dict[str, tuple[Any, str]] = {}
        for f in eff.files:
            for name, (value, _, path) in file_settings(f, eff.containerd_version).items():
                last[name] = (value, path)
        for name, (value, path) in last.items():
            got = shown.get(name)
            kept = all(k in (got or {}) and got[k] == v for k, v in value.items()) \
                if isinstance(value, dict) else got == value
            assert (not kept) == (path in lost), (name, value, got, lost, files)
        return
    cri = dumped.get("plugins", {}).get("io.containerd.grpc.v1.cri", {})
    for path, (value, _) in _intended_settings(eff).items():
        node: Any = cri
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        assert (node != value) == (path in lost), (path, value, node, lost, files)


def _intended_settings(eff: Any) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    for f in eff.files:
        table = f.plugins.get(eff.cri_key)
        if not isinstance(table, dict):
            continue
        for section, keys in (("", ("sandbox_image",)), ("cni", ("conf_dir", "bin_dir")),
                              ("registry", ("config_path",))):
            where = table.get(section, {}) if section else table
            for k in keys:
                if isinstance(where, dict) and k in where:
                    out[f"{section}.{k}" if section else k] = (where[k], f.path)
    return out


# ---------------------------------------------------------------------------------------
# Generated layouts


@st.composite
def runtime(draw: st.DrawFn) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if draw(st.booleans()):
        entry["runtime_type"] = "io.containerd.runc.v2"
    options = draw(st.dictionaries(
        # Kubespray <= 2.27 writes systemdCgroup / binaryName (issue #26).
        st.sampled_from(["SystemdCgroup", "BinaryName", "systemdCgroup", "binaryName"]),
        st.one_of(st.booleans(), st.sampled_from(["/usr/bin/nvidia-container-runtime", ""])),
        max_size=2,
    ))
    options = {k: v for k, v in options.items()
               if isinstance(v, bool) == (k.lower() == "systemdcgroup")}
    if options:
        entry["options"] = options
    return entry


@st.composite
def cri_table(draw: st.DrawFn, v3: bool = False) -> dict[str, Any]:
    table: dict[str, Any] = {}
    ctd: dict[str, Any] = {}
    if draw(st.booleans()):
        ctd["default_runtime_name"] = draw(st.sampled_from(RUNTIME_NAMES))
    if draw(st.integers(0, 3)):
        names = draw(st.lists(st.sampled_from(RUNTIME_NAMES), unique=True, max_size=3))
        ctd["runtimes"] = {n: draw(runtime()) for n in names}
    if ctd:
        table["containerd"] = ctd
    if draw(st.integers(0, 3)) == 0:
        table["enable_cdi"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        table["registry"] = {"config_path": "/etc/containerd/certs.d"}
    # Settings beside the runtimes a later whole table may drop (issue #26).
    if draw(st.integers(0, 4)) == 0:
        table["sandbox_image"] = draw(st.sampled_from(["example.org/pause:3.10",
                                                       "registry.k8s.io/pause:3.8"]))
    if draw(st.integers(0, 4)) == 0:
        table["cni"] = {"conf_dir": draw(st.sampled_from(["/etc/cni/net.d", "/srv/cni"]))}
    # A version-3 `cni.bin_dir` (deprecated from 2.1, kept beside `bin_dirs`) is left out.
    if not v3 and draw(st.integers(0, 5)) == 0:
        table.setdefault("cni", {})["bin_dir"] = draw(st.sampled_from(["/srv/cni/bin",
                                                                       "/opt/cni/bin"]))
    if draw(st.integers(0, 5)) == 0:
        table.setdefault("registry", {})["mirrors"] = {
            "docker.io": {"endpoint": ["https://mirror.example.org"]}}
    return table


@st.composite
def v3_settings(draw: st.DrawFn) -> dict[str, Any]:
    """Version-3 CRI settings beside the runtimes: the images plugin's own table."""
    images: dict[str, Any] = {}
    if draw(st.booleans()):
        images["pinned_images"] = {"sandbox": draw(st.sampled_from(
            ["example.org/pause:3.10", "registry.k8s.io/pause:3.10"]))}
    if draw(st.booleans()):
        images["registry"] = {"config_path": "/etc/containerd/certs.d"}
    return images


@st.composite
def config_file(draw: st.DrawFn, top: bool) -> dict[str, Any]:
    version = draw(st.sampled_from([2, 2, 2, 2, 3, 0] if top else [2, 2, 2, None, None, 3, 0]))
    if version is None:  # same version as the top-level file, filled in by the caller
        version = -1
    data: dict[str, Any] = {}
    if version > 0:
        data["version"] = version
    if draw(st.integers(0, 5)):
        key_version = version
        if draw(st.integers(0, 9)) == 0:  # a table under another version's plugin key
            key_version = draw(st.sampled_from([0, 2, 3]))
        data["plugins"] = {f"__KEY{key_version}__": draw(cri_table(
            v3=version in (3, -1) or key_version in (3, -1)))}
    if version == 3 and draw(st.integers(0, 3)) == 0:
        data.setdefault("plugins", {})["io.containerd.cri.v1.images"] = draw(v3_settings())
    if draw(st.integers(0, 5)) == 0:
        data["disabled_plugins"] = draw(st.lists(st.sampled_from(
            ["cri", "io.containerd.grpc.v1.cri", "zfs", "io.containerd.snapshotter.v1.zfs"]),
            unique=True, min_size=1, max_size=2))
    return data


@st.composite
def layout(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    """[(relative path, data)]: config.toml first, then drop-ins and an extra file."""
    top = draw(config_file(top=True))
    dropins = draw(st.lists(config_file(top=False), max_size=3))
    extra = draw(st.none() | config_file(top=False))
    imports: list[str] = []
    style = draw(st.sampled_from(["abs-glob", "rel-glob", "none"]))
    if style != "none" and dropins:
        imports.append("@ROOT@/conf.d/*.toml" if style == "abs-glob" else "conf.d/*.toml")
    if extra is not None:
        imports.insert(draw(st.integers(0, len(imports))), "extra.toml")
    if imports:
        top["imports"] = imports
    files = [("config.toml", top)]
    files += [(f"conf.d/{i * 10:02d}-{draw(st.sampled_from(['a', 'b']))}.toml", d)
              for i, d in enumerate(dropins)]
    if extra is not None:
        files.append(("extra.toml", extra))
    if draw(st.integers(0, 14)) == 0:   # no top-level file: containerd's built-in defaults
        return [(rel, data) for rel, data in files if rel != "config.toml"]
    return files


def materialise(files: list[tuple[str, dict[str, Any]]], root: Path) -> Path:
    top_version = files[0][1].get("version", 0) if files and files[0][0] == "config.toml" else 0
    for rel, data in files:
        data = dict(data)
        if data.get("version") == -1:  # "same as the top-level file"
            del data["version"]
            if top_version:
                data = {"version": top_version, **data}
        text = tomlkit.dumps(data).replace("__KEY-1__", f"__KEY{top_version}__")
        for v in (0, 2, 3):
            text = text.replace(f'"__KEY{v}__"', f'"{KEYS[v]}"')
            text = text.replace(f"__KEY{v}__", f'"{KEYS[v]}"')
        text = text.replace("@ROOT@", str(root))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "config.toml"   # may be absent: the layout has no top-level file


@pytest.mark.real
@pytest.mark.parametrize("line", oracle.LINES)
def test_generated_layouts_match_real_containerd(line: str) -> None:
    oracle.require_line(line)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(layout())
    def check(files: list[tuple[str, dict[str, Any]]]) -> None:
        with tempfile.TemporaryDirectory(prefix="gp-diff-") as tmp:
            assert_same(line, materialise(files, Path(tmp)))

    check()
