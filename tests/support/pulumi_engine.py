"""The real Pulumi engine for the tests: the CLI and the kubernetes provider built from
their Go modules (tests/builds/pulumi-3.260.0, tests/builds/pulumi-kubernetes-4.25.0),
a local file backend and a passphrase secrets provider in a temp dir.

How a program runs without `pulumi-language-python`: the module proxy does not serve the
Python language host's module (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
is refused at every version), so the program runs the way the Automation API runs an inline
program: the SDK's own language server (`pulumi.automation`, in a child process of the
test) and the CLI's `--client` (pkg/cmd/pulumi/operations/io.go@v3.260.0
`readProjectForUpdate`). The policy pack runs the way the CLI runs a pack when no language
plugin is installed: `pulumi-analyzer-policy-python ENGINE . -OPTION=VALUE...` in the pack's
directory (pkg/resource/plugin/analyzer_plugin.go@v3.260.0); tests/pulumi_bin holds that
launcher, which starts the pack's `__main__.py` with the virtualenv PulumiPolicy.yaml names,
as the language host does, and the launcher of Python dynamic providers
(`pulumi-resource-pulumi-python`, which the CLI's release archive ships). The analyzer
protocol, the engine and the provider are the real ones; only the process that starts the
Python program differs from a user's machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplane.policy.location import PACK_DIR

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("GPUPLANE_CACHE", Path.home() / ".cache" / "gpuplane"))
CLI_BUILD = CACHE / "builds" / "pulumi-3.260.0"
PROVIDER_BUILD = CACHE / "builds" / "pulumi-kubernetes-4.25.0"
LAUNCHERS = REPO / "tests" / "pulumi_bin"
RUNNER = REPO / "tests" / "support" / "pulumi_run.py"


def missing() -> str | None:
    """Why the engine cannot run here, or None."""
    for path in (CLI_BUILD / "bin" / "pulumi",
                 PROVIDER_BUILD / "bin" / "pulumi-resource-kubernetes"):
        if not path.exists():
            return f"{path} is not built: run `make containerd` (scripts/build-oracles.sh)"
    return None


@dataclass
class Engine:
    """One local backend and Pulumi home; projects are copied under `root`."""

    root: Path
    kubeconfig: Path | None = None

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(CLI_BUILD / "bin"), str(PROVIDER_BUILD / "bin"),
                                str(LAUNCHERS), os.environ.get("PATH", "")])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
        env.update({
            "PATH": path,
            "PULUMI_HOME": str(self.root / "home"),
            "PULUMI_BACKEND_URL": f"file://{self.root / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": "gpuplane-test",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "PULUMI_PYTHON_CMD": sys.executable,   # tests/pulumi_bin/pulumi-resource-pulumi-python
        })
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def project(self, stack: str, stack_file: Path | None = None) -> Path:
        """A copy of the project with `stacks/Pulumi.<stack>.yaml` (from `stack_file`, else
        the bundled one); the CLI writes the secrets salt into it, never into the repo."""
        project = self.root / f"project-{stack}"
        if not project.exists():
            (project / "stacks").mkdir(parents=True)
            shutil.copy(REPO / "Pulumi.yaml", project / "Pulumi.yaml")
        source = stack_file or REPO / "stacks" / f"Pulumi.{stack}.yaml"
        shutil.copy(source, project / "stacks" / f"Pulumi.{stack}.yaml")
        (self.root / "state").mkdir(exist_ok=True)
        return project

    def run(self, op: str, stack: str, *, stack_file: Path | None = None,
            policy_pack: bool = False, policy_config: Path | None = None,
            timeout: float = 600, refresh: bool = False) -> Result:
        """`op` (preview, up, refresh, destroy) of gpuplane's bundled program on `stack`
        under the real CLI, with the pack installed with gpuplane (`gpuplane policy-pack
        path`) when `policy_pack`; `refresh`: `preview --refresh --diff`, `up --refresh
        --diff`."""
        return self.run_project(op, self.project(stack, stack_file), stack,
                                policy_pack=PACK_DIR if policy_pack else None,
                                policy_config=policy_config, timeout=timeout,
                                refresh=refresh)

    def run_project(self, op: str, project: Path, stack: str, *,
                    policy_pack: Path | None = None, policy_config: Path | None = None,
                    timeout: float = 600, refresh: bool = False) -> Result:
        """`op` of any Python Pulumi project's `stack` under the real CLI: its own program
        (tests/support/pulumi_run.py) and its own stack file, this engine's backend."""
        (self.root / "state").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, str(RUNNER), op, str(project), stack, str(CLI_BUILD)]
        if policy_pack is not None:
            argv += ["--policy-pack", str(policy_pack)]
        if policy_config is not None:
            argv += ["--policy-config", str(policy_config)]
        if refresh:
            argv.append("--refresh")
        # Its own session: on a time-out the runner, the CLI and the providers it started
        # are stopped together, never left behind.
        with subprocess.Popen(argv, env=self.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=project,
                              stdin=subprocess.DEVNULL, start_new_session=True) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                raise AssertionError(f"`pulumi {op}` of {stack} took over {timeout:.0f} s:\n"
                                     f"{stdout[-3000:]}\n{stderr[-3000:]}") from None
        try:
            data = json.loads(stdout.splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise AssertionError(
                f"runner gave no result (exit {proc.returncode}):\n{stdout[-3000:]}\n"
                f"{stderr[-3000:]}") from None
        return Result(ok=data["ok"], changes=data["changes"], violations=data["violations"],
                      diagnostics=data["diagnostics"], steps=data["steps"],
                      outputs=data["outputs"], stdout=data["stdout"],
                      stderr=data["stderr"], seconds=data["seconds"],
                      cli_peak_mb=data["cliPeakMb"], host_peak_mb=data["hostPeakMb"])


@dataclass
class Result:
    """What one CLI operation did."""

    ok: bool
    changes: dict[str, int]
    violations: list[dict[str, Any]]   # policyName, enforcementLevel, message, urn
    diagnostics: list[dict[str, Any]]  # severity, message, urn: errors and warnings
    steps: list[dict[str, Any]]        # op, type, name, diffs, inputs: one per resource step
    outputs: dict[str, Any]
    stdout: str
    stderr: str
    seconds: float
    cli_peak_mb: float
    host_peak_mb: float

    def touched(self) -> dict[str, str]:
        """`type::name` -> op for every step that changes something."""
        return {f"{s['type']}::{s['name']}": s["op"] for s in self.steps
                if s["op"] not in ("same", "read")}

    def program_errors(self) -> set[str]:
        """The rule ids of the findings the program itself logged as errors: gpuplane's
        program refuses a plan the rulebook rejects (`GpuCluster`), and a failed program
        leaves the engine no stack to hand the policy pack."""
        return self._logged("error")

    def program_warnings(self) -> set[str]:
        """The rule ids the program logged as warnings with its refusal."""
        return self._logged("warning")

    def _logged(self, severity: str) -> set[str]:
        return {m.group(1) for d in self.diagnostics if d["severity"] == severity
                for m in [re.match(r"(FM\d\d) ", d["message"])] if m}

    def mandatory(self) -> set[str]:
        return {v["policyName"] for v in self.violations
                if v["enforcementLevel"] == "mandatory"}

    def advisory(self) -> set[str]:
        return {v["policyName"] for v in self.violations
                if v["enforcementLevel"] == "advisory"}
