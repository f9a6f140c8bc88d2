"""All errors at once (#39 item 6): a stack with several problems reports each of them;
no rule stops at the first class it finds."""

from __future__ import annotations

from typing import Any

import pytest
from support.rulecheck import ids
from test_rules_cluster import good_values, intent, op, with_env

from gpuplane.core.findings import Severity


def _dict_env(values: dict[str, Any], **env: str) -> dict[str, Any]:
    values["toolkit"]["env"] = env   # a mapping, not the list the ClusterPolicy takes
    return values


@pytest.mark.parametrize("distro", ["kubeadm", "k0s", "rke2"])
def test_fm17_malformed_env_with_a_socket_problem_still_reports_an_invalid_default(
        distro: str) -> None:
    i = intent(distro=distro, containerd_version="2.1")
    values = _dict_env(good_values(i), CONTAINERD_SOCKET="/run/x.sock",
                       CONTAINERD_SET_AS_DEFAULT="maybe")
    got = op(values, i)
    assert "FM17" in ids(got) and "FM01" in ids(got), got
    fm17 = [f for f in got if f.id == "FM17" and "not a list" in f.message]
    assert len(fm17) == 1
    assert "/run/x.sock" in fm17[0].message   # the socket read as meant, in the same FM17


def test_malformed_entry_does_not_hide_the_default_runtime_change() -> None:
    i = intent(containerd_version="2.1")
    values = with_env(good_values(i), CONTAINERD_SOCKET="/run/x.sock",
                      CONTAINERD_SET_AS_DEFAULT="true")
    values["toolkit"]["env"].append({"value": "no name"})
    got = op(values, i)
    assert "FM17" in ids(got), got
    fm09 = [f for f in got if f.id == "FM09"]
    assert fm09 and fm09[0].severity is Severity.WARNING, got


@pytest.mark.parametrize("distro", ["rke2", "k3s"])
def test_fm01_detected_mode_still_reports_an_invalid_set_as_default(distro: str) -> None:
    # The toolkit parses its flags first: an invalid boolean stops it in every mode.
    i = intent(distro=distro, containerd_version="2.1", runtime_setup="detected")
    values = with_env(good_values(i), CONTAINERD_SET_AS_DEFAULT="maybe")
    got = op(values, i)
    assert any(f.id == "FM01" and "maybe" in f.message for f in got), got

