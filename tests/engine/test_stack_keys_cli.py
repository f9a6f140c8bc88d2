"""gpuplane's stack-file reader against the real Pulumi CLI (#50 major 3): each key of a
stack file, with or without a namespace, is read under the name `pulumi config` gives it
(a bare key is the project's: `<Pulumi.yaml name>:<key>`), with the same value; so the
offline plan and `pulumi up` read one config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import oracle, pulumi_engine

from gpuplane.config.stackfile import load_stack_file

pytestmark = [pytest.mark.real, pytest.mark.engine]
STACK = """\
config:
  rollout:
    canary: false
    maxUnavailable: 3
  replicas: 3
  gpuplane:nodes:
    - {name: a, gpus: 8}
  kubernetes:context: lab
"""


def cli_config(project: Path, root: Path) -> dict[str, Any]:
    """`pulumi config --json` of the stack `dev`, on a local backend of its own."""
    cli = pulumi_engine.CLI_BUILD / "bin" / "pulumi"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update(PULUMI_HOME=str(root / "home"), PULUMI_BACKEND_URL=f"file://{root / 'state'}",
               PULUMI_CONFIG_PASSPHRASE="gpuplane-test", PULUMI_SKIP_UPDATE_CHECK="true",
               PULUMI_DIY_BACKEND_NO_LEGACY_WARNING="true")
    (root / "state").mkdir(exist_ok=True)
    for argv in (["stack", "init", "dev", "--non-interactive"], ["config", "--json"]):
        done = subprocess.run([str(cli), *argv], cwd=project, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {key: entry.get("objectValue", entry["value"]) for key, entry in data.items()}


def _as_cli(value: Any) -> Any:
    """A scalar as the CLI shows it: text (`3` is "3", `true` is "true")."""
    if isinstance(value, dict | list | str):
        return value
    return json.dumps(value)


@pytest.mark.parametrize("name", ["gpuplane", "infra"])
def test_every_key_reads_as_the_cli_reads_it(tmp_path: Path, name: str) -> None:
    why = pulumi_engine.missing()
    if why:
        oracle.unavailable(f"the real Pulumi CLI: {why}", "make engine")
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n")
    (project / "Pulumi.dev.yaml").write_text(STACK)
    shutil.copy(project / "Pulumi.dev.yaml", tmp_path / "as-written.yaml")
    stack = load_stack_file("dev", project)   # before the CLI rewrites the file
    ours = {key: _as_cli(value) for key, value in
            {**{f"gpuplane:{k}": v for k, v in stack.values.items()}, **stack.other}.items()}
    theirs = cli_config(project, tmp_path)
    assert ours == theirs
    if name == "infra":
        assert [w.split(": ", 1)[0] for w in stack.warnings] == [f"{project}/Pulumi.dev.yaml:2"]
