"""Node names are Kubernetes node names, DNS subdomains (EKS: ip-10-0-1-23.ec2.internal);
every Pulumi resource and Kubernetes object name gpuplane derives from them stays valid."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuplane.checks.provider import check_manifests
from gpuplane.cli.plan.engine import run_program
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.config.stackfile import load_stack_file

STACKS = Path(__file__).resolve().parents[2] / "stacks"
EKS = ["ip-10-0-1-23.ec2.internal", "ip-10-0-1-24.us-west-2.compute.internal",
       "gpu.node-3.example"]
# apimachinery's validation regexes (k8s.io/apimachinery/pkg/util/validation).
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
KINDS = {"kubernetes:core/v1:Namespace": ("v1", "Namespace"),
         "kubernetes:core/v1:ConfigMap": ("v1", "ConfigMap")}
JOB_CHECK = "pulumi-python:dynamic/gpuplane:GpuJobCheck"


def _stack(name: str, tmp_path: Path) -> Path:
    """The bundled stack with its node names replaced by DNS subdomains."""
    data = yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text())
    for i, node in enumerate(data["config"]["gpuplane:nodes"]):
        node["name"] = EKS[0] if i == 0 else f"n{i}.{EKS[i % len(EKS)]}"
    names = [n["name"] for n in data["config"]["gpuplane:nodes"]]
    assert len(set(names)) == len(names)
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


def _valid_label_values(labels: dict[str, Any], where: str) -> None:
    for key, value in labels.items():
        assert len(value) <= 63 and LABEL_VALUE.match(value), f"{where}: label {key}={value!r}"


def _check_jobs(r: Any) -> None:
    """The Jobs a GpuJobCheck creates (their manifests, pure: checks.provider)."""
    for _, job in check_manifests(r.inputs, 1):
        name = job["metadata"]["name"]
        assert len(name) <= 63 and LABEL.match(name), name   # the job-name label on its pods
        _valid_label_values(job["metadata"].get("labels") or {}, name)
        template = job["spec"]["template"]
        _valid_label_values(template["metadata"].get("labels") or {}, name)
        _valid_label_values(template["spec"].get("nodeSelector") or {}, name)
        for c in template["spec"]["containers"]:
            assert LABEL.match(c["name"]), c["name"]
        kubernetes_validate.validate(job, "1.31", strict=True)


def _check_object(r: Any) -> None:
    meta = r.inputs.get("metadata") or {}
    name = meta.get("name") or f"{r.name}-abcd1234"   # the provider's auto-name
    rule = LABEL if r.type == "kubernetes:core/v1:Namespace" else SUBDOMAIN
    assert name and len(name) <= 253 and rule.match(name), f"{r.type} {r.name}: {name!r}"
    _valid_label_values(meta.get("labels") or {}, r.name)
    if r.type in KINDS:
        api_version, kind = KINDS[r.type]
        kubernetes_validate.validate({**r.inputs, "apiVersion": api_version, "kind": kind},
                                     "1.31", strict=True)


@pytest.mark.parametrize("stack", ["kubeadm-prod", "hami-shared"])
def test_dns_subdomain_node_names_give_valid_names(stack: str, tmp_path: Path) -> None:
    from gpuplane.stack import program

    sf = load_stack_file(stack, _stack(stack, tmp_path))
    cfg = sf.config()
    assert cfg.nodes[0].name == EKS[0]
    _, resources = run_program(program.run, project="gpuplane", stack=stack,
                               config=sf.pulumi_config(), secret_keys=sf.secret_keys)
    names = {n.name for n in cfg.nodes}
    derived = 0
    for r in resources:
        assert "::" not in r.name and r.name.strip() == r.name and "/" not in r.name, r.name
        if r.type.startswith("kubernetes:") and isinstance(r.inputs.get("metadata"), dict):
            _check_object(r)
        if r.type == JOB_CHECK:
            _check_jobs(r)
            derived += len(r.inputs["checks"])
        derived += any(n in r.name for n in names)
    assert derived >= len(names)   # one node command or check Job per node


@pytest.mark.parametrize(("name", "message"), [
    ("IP-10-0-1-23.ec2.internal", "DNS subdomain"),
    ("ip-10-0-1-23..internal", "DNS subdomain"),
    ("-a.b", "DNS subdomain"),
    ("a" * 40 + "." + "b" * 30, "at most 63"),
])
def test_invalid_node_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(StackConfigError) as err:
        parse_stack_config({"cluster": {"kubernetesVersion": "1.31.4",
                                        "containerdVersion": "1.7", "nodeAccess": "none"},
                            "gpuOperator": {"chartVersion": "v25.10.1"},
                            "nodes": [{"name": name}]})
    assert "gpuplane:nodes[0].name" in str(err.value) and message in str(err.value)
