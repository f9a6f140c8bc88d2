"""The model of containerd 2.x's `config dump` (gpuplane.toolkit.output `_dump_v3`), which a
toolkit 1.17.4-1.17.8 writes back whole as the node's config, held against the real
`config dump` of containerd 2.0, 2.1 and 2.2 (issue #46 item 8): the same config once
containerd's defaults are filled in, the built-in runc table exactly as printed (the
toolkit copies it, options and all, for its nvidia runtimes), and the same `imports`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.toolkit.output import _dump_v3

TOP = "/etc/containerd/config.toml"
RUNTIME = "io.containerd.cri.v1.runtime"
V2_FULL = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "example.com/pause:1"
max_concurrent_downloads = 7
stats_collect_period = 11
disable_tcp_service = false
enable_selinux = true
image_pull_progress_timeout = "3m"
[plugins."io.containerd.grpc.v1.cri".cni]
conf_dir = "/x/net.d"
bin_dir = "/x/bin"
[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.grpc.v1.cri".containerd]
snapshotter = "native"
default_runtime_name = "crun"
discard_unpacked_layers = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]
runtime_type = "io.containerd.runc.v2"
snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]
BinaryName = "/usr/bin/crun"
"""
V2_RUNC = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = true
"""
LAYOUTS: dict[str, dict[str, str]] = {
    "no-file": {},
    "only-version-3": {TOP: "version = 3\n"},
    "version-2-every-cri-key": {TOP: V2_FULL},
    "version-2-runc-options": {TOP: V2_RUNC},
    "v3-importing-v2-and-v3": {
        TOP: 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\nroot = "/data/ctd"\n',
        "/etc/containerd/conf.d/10-registry.toml":
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n'
            'config_path = "/etc/containerd/certs.d"\n',
        "/etc/containerd/conf.d/20-runc.toml":
            f'version = 3\n[plugins."{RUNTIME}".containerd.runtimes.runc.options]\n'
            'SystemdCgroup = true\n'},
    "v3-with-conf-d-not-imported": {
        TOP: "version = 3\n",
        "/etc/containerd/conf.d/99-other.toml":
            f'version = 3\n[plugins."{RUNTIME}"]\nenable_cdi = false\n'},
}


def _alone(line: str, data: dict[str, Any], root: Path) -> dict[str, Any]:
    """`config dump` of `data` as a file on its own (no imports), without `imports`."""
    path = root / "config.toml"
    root.mkdir(parents=True)
    path.write_text(tomlkit.dumps({k: v for k, v in data.items() if k != "imports"}))
    dumped = oracle.dump(line, path)
    assert dumped.ok, dumped.error
    assert dumped.config is not None
    return {k: v for k, v in dumped.config.items() if k != "imports"}


@pytest.mark.real
@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("line", ["2.0", "2.1", "2.2"])
def test_the_v3_dump_model_is_what_containerd_2_prints(line: str, name: str,
                                                      tmp_path: Path) -> None:
    oracle.require_line(line)
    layout = LAYOUTS[name]
    node = tmp_path / "node"
    write_layout(layout or {"/etc/containerd/.keep": ""}, node)
    real = oracle.dump(line, host_path(node, TOP))
    assert real.ok, real.error
    assert real.config is not None
    model = _dump_v3(layout, ContainerdVersion.parse(line))
    # What the toolkit copies for its runtimes: runc's table as printed, key for key.
    runtimes = real.config["plugins"][RUNTIME]["containerd"]["runtimes"]
    assert model["plugins"][RUNTIME]["containerd"]["runtimes"]["runc"] == runtimes["runc"]
    # The imports the dump lists (2.2 adds its default conf.d import, once: measured, an
    # equal string in the file is not listed twice), as node paths.
    listed = [p.replace(str(node), "") for p in real.config["imports"]]
    assert model["imports"] == list(dict.fromkeys(listed))
    # The same config to containerd, once its defaults are filled in.
    assert _alone(line, model, tmp_path / "model") == _alone(line, real.config,
                                                             tmp_path / "real")
    # The model prints version 3 whatever the files said, as 2.x does.
    assert model["version"] == real.config["version"] == 3
    assert tomllib.loads(tomlkit.dumps(model)) == model
