"""What a user's own Pulumi program imports from the package root, as the docs show it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_config_from_pulumi_is_at_the_root_and_import_stays_light() -> None:
    """`from gpuplane import config_from_pulumi` works beside `parse_stack_config`, and
    `import gpuplane` alone still loads neither pydantic nor the Pulumi SDK."""
    code = ("import sys, gpuplane\n"
            "assert 'pydantic' not in sys.modules and 'pulumi' not in sys.modules\n"
            "from gpuplane import config_from_pulumi, parse_stack_config\n"
            "from gpuplane.config import config_from_pulumi as direct\n"
            "assert config_from_pulumi is direct and callable(parse_stack_config)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "components")}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
