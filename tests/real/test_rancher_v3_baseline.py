"""RKE2/K3s fresh-node model per containerd line: on containerd 2.x they render their
built-in version-3 template, on 1.x their version-2 one, with the same values.

Planning a 2.x node from the version-2 file models a node that does not exist (the agent
would refuse the real one: its file is not the one the plan was made from). Held against
real containerd: the version-3 model loads on every 2.x line, and the CRI plugin runs it
exactly as it runs the version-2 model migrated by that same containerd.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import BUNDLES_CONTAINERD, Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

V2_LINES = tuple(line for line in oracle.LINES if line.startswith("1."))
V3_LINES = tuple(line for line in oracle.LINES if line.startswith("2."))
OPTIONS = PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version="1.18.1")


def _model_top(name: Distro, line: str) -> dict[str, Any]:
    """The top-level file a plan made without captured files starts from."""
    prof = profile(name)
    plan = plan_node(prof, ContainerdVersion.parse(line), OPTIONS)
    return tomllib.loads(plan.baseline[prof.config_path])


@pytest.mark.parametrize("line", oracle.LINES)
@pytest.mark.parametrize("name", BUNDLES_CONTAINERD)
def test_the_model_renders_the_template_of_the_containerd_line(name: Distro,
                                                               line: str) -> None:
    data = _model_top(name, line)
    assert data["version"] == (3 if line in V3_LINES else 2)
    # What gpuplane edits is the template of that same format.
    plan = plan_node(profile(name), ContainerdVersion.parse(line), OPTIONS)
    template = tomllib.loads(next(iter(plan.files.values())))
    assert template["version"] == data["version"]


@pytest.mark.parametrize("name", sorted(set(Distro) - set(BUNDLES_CONTAINERD)))
def test_other_distributions_keep_one_file_on_every_line(name: Distro) -> None:
    prof = profile(name)
    texts = {repr(prof.baseline(ContainerdVersion.parse(line))) for line in oracle.LINES}
    assert len(texts) == 1


# Set by the harness (its own root, state and socket), not by the node's files.
_HARNESS_KEYS = ("containerdRootDir", "containerdEndpoint", "rootDir", "stateDir")


def _runtime_view(daemon: oracle.Daemon) -> dict[str, Any]:
    config = dict(oracle.cri_status(daemon)["info"]["config"])
    for key in _HARNESS_KEYS:
        config.pop(key, None)
    return config


def _tables(dump: dict[str, Any]) -> dict[str, Any]:
    """The plugin tables the distribution sets that the CRI runtime status leaves out."""
    plugins = dump["plugins"]
    return {key: plugins[key] for key in ("io.containerd.cri.v1.images",
                                          "io.containerd.grpc.v1.cri",
                                          "io.containerd.internal.v1.opt")}


@pytest.mark.real
@pytest.mark.parametrize("line", V3_LINES)
@pytest.mark.parametrize("name", BUNDLES_CONTAINERD)
def test_real_containerd_runs_the_v3_model_as_the_migrated_v2_model(
        name: Distro, line: str, tmp_short: Path) -> None:
    """Same values, other format: `config dump` loads the v3 model, and the images, CRI
    server and opt tables it dumps and the CRI runtime config a real daemon runs equal
    those of the v2 model (which that containerd migrates at load).

    Only root, state and the socket differ in the dumps: the v3 template writes them,
    while with the v2 template the distribution passes them on containerd's command line
    (the same values). On 2.1/2.2 the v3 model's deprecated `cni.bin_dir` is folded into
    `bin_dirs` by the CRI plugin at start, which the daemon comparison covers."""
    oracle.require_line(line)
    prof = profile(name)
    views = []
    for label, model_line in (("v2", V2_LINES[-1]), ("v3", line)):
        files = prof.baseline(ContainerdVersion.parse(model_line))
        write_layout(files, tmp_short / label)
        top = host_path(tmp_short / label, prof.config_path)
        dumped = oracle.dump(line, top)
        assert dumped.ok, (label, dumped.error)
        # One at a time: both serve the distribution's stream port (10010).
        with oracle.Daemon(line, top, tmp_short / f"d-{label}") as daemon:
            daemon.require_started()
            views.append((_tables(dumped.config), _runtime_view(daemon)))
    v2, v3 = views
    assert v3 == v2
    assert tomllib.loads(prof.baseline(ContainerdVersion.parse(line))[prof.config_path])[
        "root"] == f"/var/lib/rancher/{name.value}/agent/containerd"
