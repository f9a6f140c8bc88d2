"""EKS AL2023: the NodeConfig containerd snippet and nodeadm's render + merge (issue #29).

The model follows nodeadm@v20260724 (`internal/containerd/config.go`, `internal/util/
merge.go`) and mergo v1.0.2. The merged config it predicts is held against real
containerd (2.2, the AL2023 NVIDIA AMI's line, and 1.7 for the version-2 template):
`config dump` and the running daemon's CRI config must equal the model's effective view.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.core.findings import Severity
from gpuplane.platforms.native import PlatformInputError
from gpuplane.platforms.native.eks_nodeconfig import (
    BASE_RUNTIME_SPEC,
    CONFIG_PATH,
    NVIDIA_BINARY,
    AmiVariant,
    EksNode,
    NodeadmRefusal,
    RuntimeIntent,
    containerd_snippet,
    eks_nodeconfig,
    nodeadm_config,
    nodeadm_merge,
    template_schema,
)

TOOLKIT = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
V3 = "io.containerd.cri.v1.runtime"
V2 = "io.containerd.grpc.v1.cri"


# -- the merge: mergo v1.0.2 WithOverride over decoded maps -----------------------------

@pytest.mark.parametrize(("base", "snippet", "merged"), [
    # tables on both sides merge key by key
    ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3, "z": 4}}, {"a": {"x": 1, "y": 3, "z": 4}}),
    # an empty value of the snippet still overrides (the map case ignores emptiness)
    ({"enable_cdi": True, "s": "x"}, {"enable_cdi": False, "s": ""},
     {"enable_cdi": False, "s": ""}),
    # arrays are replaced whole, never appended
    ({"p": ["a", "b"]}, {"p": ["c"]}, {"p": ["c"]}),
    # a table over a scalar and a scalar over a table: the snippet's wins
    ({"a": 1, "b": {"x": 1}}, {"a": {"x": 2}, "b": 2}, {"a": {"x": 2}, "b": 2}),
    # an empty table in the template is replaced by the snippet's
    ({"a": {}}, {"a": {"x": 1}}, {"a": {"x": 1}}),
])
def test_the_merge_follows_mergo(base: dict, snippet: dict, merged: dict) -> None:
    before = json.dumps(base, sort_keys=True)
    assert nodeadm_merge(base, snippet) == merged
    assert json.dumps(base, sort_keys=True) == before    # inputs untouched


def test_nodeadms_own_merge_case() -> None:
    """nodeadm's containerd_config_test.go: a registry mirror in the snippet lands beside
    the version-2 template's settings, which all stay (soci snapshotter included)."""
    node = EksNode(AmiVariant.STANDARD, "1.31", containerd_version="1.7", soci=True)
    snippet = f"[plugins.'{V2}'.registry.mirrors]\n\"docker.io\" = [\"https://m.example.com\"]\n"
    _, text = nodeadm_config(node, snippet)
    cri = tomllib.loads(text)["plugins"][V2]
    assert cri["registry"]["mirrors"]["docker.io"] == ["https://m.example.com"]
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d:/etc/docker/certs.d"
    assert cri["containerd"]["snapshotter"] == "soci"


# -- which template -------------------------------------------------------------------

@pytest.mark.parametrize(("line", "snippet", "schema"), [
    ("2.2", "", 3),
    ("2.2", f"[plugins.'{V3}']\nenable_cdi = true\n", 3),
    ("2.2", "[plugins.'io.containerd.cri.v1.images']\nx = 1\n", 3),
    ("1.7", "", 2),
    ("1.7", f"[plugins.'{V2}']\nenable_cdi = true\n", 2),
])
def test_template_choice(line: str, snippet: str, schema: int) -> None:
    assert template_schema(EksNode(AmiVariant.NVIDIA, "1.33", line), snippet) == schema


@pytest.mark.parametrize(("line", "snippet", "words"), [
    ("2.2", f"[plugins.'{V2}']\nenable_cdi = true\n", "containerd config migrate"),
    ("1.7", f"[plugins.'{V3}']\nenable_cdi = true\n", "failed to get config template"),
])
def test_template_choice_refusals(line: str, snippet: str, words: str) -> None:
    with pytest.raises(NodeadmRefusal, match=words):
        template_schema(EksNode(AmiVariant.NVIDIA, "1.33", line), snippet)


@pytest.mark.parametrize(("kubelet", "cdi"), [
    ("1.31", False), ("1.31.9", False), ("1.32", True), ("v1.32.0", True),
    ("Kubernetes v1.32.0-eks-4096722", True), ("1.35.1", True),
])
def test_enable_cdi_follows_the_kubelet(kubelet: str, cdi: bool) -> None:
    node = EksNode(AmiVariant.NVIDIA, kubelet)
    assert node.enable_cdi is cdi
    _, text = nodeadm_config(node, "")
    assert tomllib.loads(text)["plugins"][V3]["enable_cdi"] is cdi


def test_a_bad_kubelet_version_names_the_key() -> None:
    with pytest.raises(PlatformInputError, match=r"gpuplane:platform\.kubeletVersion"):
        eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "latest"), RuntimeIntent())


# -- the snippet and what nodeadm makes of it -----------------------------------------

def test_nvidia_ami_gets_runc_beside_nodeadms_nvidia_runtime() -> None:
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.33"), RuntimeIntent())
    snippet = tomllib.loads(result.snippet)
    runtimes = snippet["plugins"][V3]["containerd"]["runtimes"]
    assert set(runtimes) == {"runc"}          # nodeadm already writes nvidia
    assert "default_runtime_name" not in snippet["plugins"][V3]["containerd"]
    eff = result.effective
    assert eff.default_runtime == "nvidia" and eff.cdi is True
    assert eff.runtimes["runc"].options == {"BinaryName": "/usr/sbin/runc",
                                            "SystemdCgroup": True}
    assert eff.runtimes["nvidia"].options["BinaryName"] == NVIDIA_BINARY
    assert result.ok and not result.findings, result.findings
    merged = tomllib.loads(result.merged_config)
    assert "imports" not in merged
    assert merged["plugins"][V3]["containerd"]["runtimes"]["runc"]["base_runtime_spec"] == \
        BASE_RUNTIME_SPEC


def test_the_nodeconfig_document_carries_the_snippet() -> None:
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.33"),
                            RuntimeIntent(default_runtime="runc"))
    doc = yaml.safe_load(result.platform_input.document or "")
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1" and doc["kind"] == "NodeConfig"
    assert doc["spec"]["containerd"]["config"] == result.snippet
    assert result.effective.default_runtime == "runc"
    assert result.platform_input.fields == {"spec.containerd.config": result.snippet}


def test_standard_ami_gets_the_operators_runtime() -> None:
    result = eks_nodeconfig(EksNode(AmiVariant.STANDARD, "1.31"),
                            RuntimeIntent(nvidia_binary=TOOLKIT, default_runtime="nvidia",
                                          enable_cdi=True))
    eff = result.effective
    assert eff.default_runtime == "nvidia" and eff.cdi is True
    assert eff.runtimes["nvidia"].options == {"BinaryName": TOOLKIT, "SystemdCgroup": True}
    assert eff.runtimes["runc"].options["BinaryName"] == "/usr/sbin/runc"
    assert result.ok, result.findings
    # the template's enable_cdi is false below 1.32, so the snippet must say so
    assert tomllib.loads(result.snippet)["plugins"][V3]["enable_cdi"] is True


def test_no_snippet_when_nodeadm_already_gives_the_intent() -> None:
    node = EksNode(AmiVariant.NVIDIA, "1.33")
    intent = RuntimeIntent(keep_runc=False)
    assert containerd_snippet(node, intent) == ""
    result = eks_nodeconfig(node, intent)
    assert result.platform_input.document is None
    assert result.platform_input.summary.startswith("no NodeConfig needed")


def test_containerd_17_gets_a_version_2_snippet() -> None:
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.30", containerd_version="1.7"),
                            RuntimeIntent(default_runtime="runc"))
    assert result.schema == 2 and V2 in result.snippet and V3 not in result.snippet
    assert result.effective.default_runtime == "runc" and result.ok, result.findings


def test_the_rulebook_judges_the_merged_config() -> None:
    """A default runtime nothing defines: containerd's CRI plugin would not load. The
    rules find it in the merged config, not in the snippet alone."""
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.33"),
                            RuntimeIntent(default_runtime="kata"))
    errors = [f for f in result.findings if f.severity is Severity.ERROR]
    assert not result.ok and errors
    assert any("kata" in f.message for f in errors), errors
    # containerd 1.7 has no built-in runc once a file lists runtimes: runc as default
    # without keeping runc is refused too
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.30", containerd_version="1.7"),
                            RuntimeIntent(default_runtime="runc", keep_runc=False))
    assert not result.ok


def test_platform_input_for_the_plan_and_the_stack_outputs() -> None:
    result = eks_nodeconfig(EksNode(AmiVariant.NVIDIA, "1.33"), RuntimeIntent())
    out = result.platform_input.to_output()
    assert json.loads(json.dumps(out)) == out
    assert out["kind"] == "eks-nodeconfig" and out["documentFormat"] == "yaml"
    lines = result.platform_input.plan_lines()
    assert any(line.startswith(f"  gpuplane will not touch {CONFIG_PATH}") for line in lines)
    assert any("nodeadm/internal/containerd/config.go" in s for s in out["sources"])


# -- against real containerd ----------------------------------------------------------

CASES = [
    pytest.param(ami, kubelet, line, default, id=f"{ami.value}-{kubelet}-{line}-{default}")
    for ami in AmiVariant
    for kubelet, line in (("1.33", "2.2"), ("1.31", "2.2"), ("1.30", "1.7"))
    for default in (None, "runc", "nvidia")
]


def _intent(ami: AmiVariant, default: str | None) -> RuntimeIntent:
    binary = NVIDIA_BINARY if ami is AmiVariant.NVIDIA else TOOLKIT
    return RuntimeIntent(nvidia_binary=binary, default_runtime=default)


@pytest.mark.real
@pytest.mark.parametrize(("ami", "kubelet", "line", "default"), CASES)
def test_real_containerd_reads_the_merged_config_as_the_model(
        ami: AmiVariant, kubelet: str, line: str, default: str | None, tmp_path: Path) -> None:
    """`containerd config dump` loads what nodeadm would write, with the model's view."""
    oracle.require_line(line)
    result = eks_nodeconfig(EksNode(ami, kubelet, containerd_version=line),
                            _intent(ami, default))
    write_layout({CONFIG_PATH: result.merged_config}, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", CONFIG_PATH))
    assert dumped.ok, dumped.error
    assert oracle.effective_from_dump(line, dumped.config or {}) == \
        result.effective.to_dict()
    assert result.effective.starts and result.ok, result.findings


@pytest.mark.real
@pytest.mark.parametrize("ami", list(AmiVariant))
def test_real_containerd_22_runs_the_merged_config(ami: AmiVariant, start_daemon,
                                                    tmp_path: Path) -> None:
    """The daemon starts with the merged config and its CRI plugin serves the runtimes
    the model predicts. nodeadm's base spec path is pointed at a spec `ctr oci spec`
    writes, the only edit (the node has the file; this machine does not)."""
    line = "2.2"
    oracle.require_daemon_support(line)
    result = eks_nodeconfig(EksNode(ami, "1.33", containerd_version=line),
                            _intent(ami, "runc"))
    spec = tmp_path / "base-runtime-spec.json"
    spec.write_text(subprocess.run([str(oracle.binary(line, "ctr")), "oci", "spec"],
                                   capture_output=True, text=True, check=True).stdout)
    config = tmp_path / "config.toml"
    config.write_text(result.merged_config.replace(BASE_RUNTIME_SPEC, str(spec)))
    daemon = start_daemon(line, config)
    daemon.require_started()
    for plugin in ("io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images",
                   "io.containerd.grpc.v1.cri"):
        assert daemon.plugin_status(plugin) == "ok", daemon.plugin_error(plugin)
    live = oracle.effective_from_status(oracle.cri_status(daemon))
    assert live == result.effective.to_dict()
