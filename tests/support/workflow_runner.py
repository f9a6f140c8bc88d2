"""Run a GitHub Actions job's steps locally: the `run:` scripts for real (bash, as the
runner runs them), the actions that only exist on GitHub as stubs.

Enough of the runner's semantics for the PR workflow: workflow/job/step `env`, `${{ }}`
expressions over `github.*`, `env.*`, `steps.<id>.outputs.*`, `secrets.*` and `vars.*`,
step `if:` conditions (`==`, `!=`, `&&`, `||`, `!`, `success()`, `failure()`,
`always()`), `$GITHUB_OUTPUT`, `$GITHUB_ENV` and `$GITHUB_STEP_SUMMARY`, and a failing step
skipping the rest unless their `if:` says otherwise. Stubs: checkout and setup-python do
nothing (the caller prepares the clone and the interpreter), the sticky comment and the
artifact upload copy their file to `outbox/`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepResult:
    name: str
    ran: bool
    code: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class JobResult:
    steps: list[StepResult]
    outbox: Path

    @property
    def failed(self) -> bool:
        return any(s.ran and s.code != 0 for s in self.steps)

    def step(self, name_or_id: str) -> StepResult:
        return next(s for s in self.steps if s.name == name_or_id)

    @property
    def log(self) -> str:
        return "\n".join(f"## {s.name} (exit {s.code})\n{s.stdout}{s.stderr}"
                         for s in self.steps if s.ran)


def _parse_kv(path: Path) -> dict[str, str]:
    """`name=value` lines (and `name<<EOF` blocks) of $GITHUB_OUTPUT / $GITHUB_ENV."""
    out: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and "=" not in line.split("<<")[0]:
            name, marker = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != marker:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


class _Context:
    def __init__(self, github: dict[str, str], secrets: dict[str, str],
                 variables: dict[str, str]) -> None:
        self.github, self.secrets, self.vars = github, secrets, variables
        self.env: dict[str, str] = {}
        self.steps: dict[str, dict[str, str]] = {}
        self.failed = False

    def value(self, expr: str) -> Any:
        """Evaluate one expression (the subset described in the module docstring)."""
        py = expr.replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        names = {"success": lambda: not self.failed, "failure": lambda: self.failed,
                 "always": lambda: True}

        def lookup(match: re.Match[str]) -> str:
            parts = match.group(0).split(".")
            root = parts[0]
            if root == "steps":
                value = self.steps.get(parts[1], {}).get(parts[3], "")
            elif root in ("github", "env", "secrets", "vars"):
                value = getattr(self, root).get(parts[1], "")
            else:
                raise ValueError(f"unsupported expression {expr!r}")
            return repr(value)

        py = re.sub(r"\b(?:steps|github|env|secrets|vars)\.[\w.-]+", lookup, py)
        return eval(py, {"__builtins__": {}}, names)   # the test's own workflow file

    def substitute(self, text: str) -> str:
        return EXPR.sub(lambda m: str(self.value(m.group(1))), text)

    def condition(self, text: str | bool | None) -> bool:
        if text is None:
            return not self.failed
        if isinstance(text, bool):
            return text
        inner = EXPR.fullmatch(text.strip())
        expr = inner.group(1) if inner else text
        status = re.search(r"\b(success|failure|always)\(\)", expr)
        result = bool(self.value(expr))
        return result if status else (result and not self.failed)


def run_job(workflow: Path, job: str, workdir: Path, *, github: dict[str, str],
            path_prefix: list[Path] | None = None, secrets: dict[str, str] | None = None,
            variables: dict[str, str] | None = None, timeout: int = 300) -> JobResult:
    """Run `job` of `workflow` with `workdir` as the checkout ($GITHUB_WORKSPACE)."""
    doc = yaml.safe_load(workflow.read_text())
    spec = doc["jobs"][job]
    ctx = _Context(github, secrets or {}, variables or {})
    outbox = workdir.parent / "outbox"
    outbox.mkdir(exist_ok=True)
    runner = workdir.parent / "runner"
    runner.mkdir(exist_ok=True)
    summary = runner / "step-summary.md"
    summary.touch()
    base_env = {"PATH": os.pathsep.join([*(str(p) for p in path_prefix or []),
                                         os.environ["PATH"]]),
                "HOME": os.environ.get("HOME", "/tmp"), "CI": "true",
                "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workdir),
                "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(runner),
                **{f"GITHUB_{k.upper()}": v for k, v in github.items()}}
    for scope in (doc.get("env") or {}, spec.get("env") or {}):
        for key, value in scope.items():
            ctx.env[key] = ctx.substitute(str(value))
    results = []
    for index, step in enumerate(spec["steps"]):
        name = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
        if not ctx.condition(step.get("if")):
            results.append(StepResult(name, ran=False))
            continue
        step_env = {k: ctx.substitute(str(v)) for k, v in (step.get("env") or {}).items()}
        if "uses" in step:
            result = _stub(step, ctx, workdir, outbox, name)
        else:
            output = runner / f"output-{index}"
            env_file = runner / f"env-{index}"
            output.touch()
            env_file.touch()
            script = ctx.substitute(step["run"])
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                cwd=workdir / step.get("working-directory", "."), capture_output=True,
                text=True, timeout=timeout, check=False,
                env={**base_env, **ctx.env, **step_env, "GITHUB_OUTPUT": str(output),
                     "GITHUB_ENV": str(env_file)})
            result = StepResult(name, True, done.returncode, done.stdout, done.stderr,
                                _parse_kv(output))
            ctx.env.update(_parse_kv(env_file))
        if step.get("id"):
            ctx.steps[step["id"]] = result.outputs
        ctx.failed = ctx.failed or result.code != 0
        results.append(result)
    return JobResult(results, outbox)


def _stub(step: dict[str, Any], ctx: _Context, workdir: Path, outbox: Path,
          name: str) -> StepResult:
    """The GitHub-only actions this workflow uses."""
    action = step["uses"].split("@")[0]
    with_ = {k: ctx.substitute(str(v)) for k, v in (step.get("with") or {}).items()}
    if action in ("actions/checkout", "actions/setup-python"):
        return StepResult(name, True)
    if action == "marocchino/sticky-pull-request-comment":
        target = outbox / f"comment-{with_.get('header', 'default')}.md"
        shutil.copyfile(workdir / with_["path"], target)
        return StepResult(name, True)
    if action == "actions/upload-artifact":
        source = workdir / with_["path"]
        if not source.exists():   # the action's default (if-no-files-found: warn)
            return StepResult(name, True, stderr=f"warning: no file {source}")
        shutil.copyfile(source, outbox / f"artifact-{with_['name']}")
        return StepResult(name, True)
    raise ValueError(f"no stub for {step['uses']}")


__all__ = ["JobResult", "StepResult", "run_job"]
