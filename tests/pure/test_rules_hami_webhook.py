"""HAMi safe defaults: the webhook exempts kube-system, HAMi's and the operator's
namespaces (chart value `scheduler.admissionWebhook.whitelistNamespaces`), a fail-closed
webhook without exemptions is an FM13 error, and kube-scheduler comes from
registry.k8s.io (`scheduler.kubeScheduler.image.registry`/`.repository`) unless the
stack names a mirror."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.main import main
from gpuplane.config import parse_stack_config
from gpuplane.config.helm_values import hami_values
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.hami import check_hami_values

STACKS = Path(__file__).resolve().parents[2] / "stacks"
INTENT = ClusterIntent(device_plugin="hami", hami_namespace="hami-system",
                       operator_namespace="gpu-operator", kubernetes_version="1.30.8")


def _cfg(**hami: Any):
    return parse_stack_config({
        "cluster": {"kubernetesVersion": "1.30.8", "containerdVersion": "1.7",
                    "nodeAccess": "none"},
        "gpuOperator": {"chartVersion": "v25.10.1"}, "devicePlugin": "hami",
        "hami": {"namespace": "hami-system", **hami}})


def test_values_exempt_the_system_namespaces_and_pull_from_registry_k8s_io() -> None:
    values = hami_values(_cfg(webhookExemptNamespaces=["istio-system", "kube-system"]))
    assert values["scheduler"]["admissionWebhook"]["whitelistNamespaces"] == [
        "kube-system", "hami-system", "gpu-operator", "istio-system"]
    assert values["scheduler"]["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io", "repository": "kube-scheduler", "tag": "v1.30.8"}


def test_a_mirror_is_one_key() -> None:
    image = hami_values(_cfg(schedulerImageRegistry="mirror.corp:5000",
                             schedulerImageRepository="k8s/kube-scheduler"))[
        "scheduler"]["kubeScheduler"]["image"]
    assert (image["registry"], image["repository"]) == ("mirror.corp:5000", "k8s/kube-scheduler")


def _fm13(webhook: dict[str, Any]) -> list:
    values = {"scheduler": {"kubeScheduler": {"image": {"tag": "v1.30.8"}},
                            "admissionWebhook": webhook, "replicas": 2},
              "devicePlugin": {"runtimeClassName": "nvidia"}}
    return [f for f in check_hami_values(values, INTENT, chart_version="2.10.0",
                                         where="Release hami")
            if f.id == "FM13" and "exempt" in f.message]


@pytest.mark.parametrize(("webhook", "expected"), [
    ({"failurePolicy": "Fail"}, [Severity.ERROR]),
    ({"failurePolicy": "Fail", "whitelistNamespaces": []}, [Severity.ERROR]),
    ({"failurePolicy": "Fail", "whitelistNamespaces": ["kube-system"]}, [Severity.WARNING]),
    ({"failurePolicy": "Fail",
      "whitelistNamespaces": ["kube-system", "hami-system", "gpu-operator"]}, []),
    ({"failurePolicy": "Ignore"}, []),    # fails open: nothing is blocked (its own warning)
])
def test_fail_closed_webhook_without_exemptions(webhook: dict[str, Any],
                                                expected: list[Severity]) -> None:
    found = _fm13(webhook)
    assert [f.severity for f in found] == expected
    if found:
        assert "gpuplane:hami.webhookExemptNamespaces" in found[0].where


def test_plan_fails_when_raw_values_drop_the_exemptions(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    path = stacks / "Pulumi.hami-shared.yaml"
    path.write_text(path.read_text().replace(
        "    webhookFailurePolicy: Fail\n", "    webhookFailurePolicy: Fail\n"
        "    values: {scheduler: {admissionWebhook: {whitelistNamespaces: []}}}\n"))
    args = ["plan", "--stack", "hami-shared", "--stacks-dir", str(stacks), "--format", "json"]
    assert main(args) == 1
    errors = [f for f in json.loads(capsys.readouterr().out)["findings"]
              if f["severity"] == "error"]
    assert [f["id"] for f in errors] == ["FM13"] and "kube-system" in errors[0]["message"]
