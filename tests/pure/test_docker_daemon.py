"""Docker's daemon.json planning (gpuplane.distros.docker_daemon): the nvidia runtime merged into
what the node has, every other key and the indentation kept, idempotent, and a file
dockerd would refuse named with its line."""

from __future__ import annotations

import json

import pytest

from gpuplane.distros.docker_daemon import (
    RUNTIME_PATH,
    DaemonJsonError,
    DockerSettings,
    parse_daemon_json,
    plan_daemon_json,
)

PLAIN = DockerSettings()
DEFAULT = DockerSettings(set_as_default=True)

# A DGX host's daemon.json as seed 002 leaves it: registry mirror, log options, data root.
SEED = """{
  "data-root": "/raid/docker",
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m"},
  "registry-mirrors": ["https://mirror.example:5000"]
}
"""


def test_absent_file_gets_the_entry_nvidia_ctk_writes() -> None:
    text = plan_daemon_json(None, PLAIN)
    assert json.loads(text) == {"runtimes": {"nvidia": {"args": [], "path": RUNTIME_PATH}}}
    assert text.endswith("}\n") and '\n    "runtimes"' in text


def test_other_keys_their_order_and_indentation_are_kept() -> None:
    text = plan_daemon_json(SEED, PLAIN)
    data = json.loads(text)
    assert list(data) == ["data-root", "log-driver", "log-opts", "registry-mirrors",
                          "runtimes"]
    assert data["log-opts"] == {"max-size": "10m"}
    assert '\n  "data-root": "/raid/docker",\n' in text        # two spaces, as found
    assert "default-runtime" not in data


def test_default_runtime_only_when_asked() -> None:
    assert json.loads(plan_daemon_json(SEED, DEFAULT))["default-runtime"] == "nvidia"
    runc = '{"default-runtime": "runc"}\n'
    assert json.loads(plan_daemon_json(runc, PLAIN))["default-runtime"] == "runc"


@pytest.mark.parametrize("current", [None, "", SEED, '{"a":1}', '{\n\t"x": true\n}'])
@pytest.mark.parametrize("settings", [PLAIN, DEFAULT])
def test_a_second_plan_changes_nothing(current: str | None, settings: DockerSettings) -> None:
    once = plan_daemon_json(current, settings)
    assert plan_daemon_json(once, settings) == once


def test_existing_nvidia_entry_with_the_path_is_left_byte_for_byte() -> None:
    entry = json.dumps({"path": RUNTIME_PATH, "runtimeArgs": ["--debug"]})
    mine = '{"runtimes": {"nvidia": ' + entry + "}}"
    assert plan_daemon_json(mine, PLAIN) == mine
    other = ('{"runtimes": {"nvidia": {"path": "/opt/old/nvidia-runtime"}, '
             '"crun": {"path": "crun"}}}')
    data = json.loads(plan_daemon_json(other, PLAIN))
    assert data["runtimes"] == {"nvidia": {"args": [], "path": RUNTIME_PATH},
                                "crun": {"path": "crun"}}


def test_byte_order_mark_and_crlf_survive() -> None:
    text = plan_daemon_json('\ufeff{\r\n  "debug": true\r\n}\r\n', PLAIN)
    assert text.startswith('\ufeff{\r\n  "debug": true,\r\n') and text.endswith("}\r\n")


@pytest.mark.parametrize(("text", "where"), [
    ('{\n  "debug": true,\n}\n', "daemon.json:3:1"),
    ('[\n  "debug"\n]\n', "daemon.json:1:1"),
    ('\n\n  "nvidia"\n', "daemon.json:3:3"),
    ('{\n  "runtimes": ["nvidia"]\n}\n', "daemon.json:2:3"),
])
def test_a_file_dockerd_refuses_is_an_error_naming_file_and_line(text: str, where: str) -> None:
    with pytest.raises(DaemonJsonError) as exc:
        plan_daemon_json(text, PLAIN, source="daemon.json")
    assert str(exc.value).startswith(where + ":")


def test_empty_file_is_no_settings() -> None:
    assert parse_daemon_json(" \n") == {}
