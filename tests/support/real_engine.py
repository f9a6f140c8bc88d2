"""`scripts/real-engine.sh`: one operation of any Python Pulumi project under the Pulumi CLI
and kubernetes provider built here, started the way the engine tests start programs
(`pulumi_engine.Engine.run_project`, one implementation for both; see
tests/support/pulumi_engine.py for how a program runs without `pulumi-language-python`).

    python -m support.real_engine OP PROJECT_DIR STACK [--policy-pack DIR]
        [--policy-config FILE] [--control-plane] [--state DIR] [--timeout SECONDS]

OP is preview, up or destroy. The stack file is the project's own
(`Pulumi.<STACK>.yaml` where `stackConfigDir` says, else in PROJECT_DIR); the CLI writes
its secrets salt into it, so its bytes are put back after the run. The backend and the
Pulumi home are `--state DIR` (default: a folder per project under
~/.cache/gpuplane/real-engine, so an `up` can be destroyed by a later run); with
`--control-plane` a throwaway API server (tests/support/control_plane.py) serves the run,
its kubeconfig in KUBECONFIG as in the engine tests, and a throwaway backend with it;
else KUBECONFIG is the caller's.

Prints the CLI's output, then, as its last line, one JSON object: `ok`, `violations`
(`policyName`, `enforcementLevel`, `message`), `diagnostics` (`severity`, `message`,
`urn`: the engine's errors and warnings) and `changes`. Exit 0 when the operation
succeeded, 1 when it failed, 2 for bad usage (or nothing built to run it with).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from support import control_plane, pulumi_engine

OPS = ("preview", "up", "destroy")
USAGE = ("real-engine.sh OP PROJECT_DIR STACK [--policy-pack DIR] [--policy-config FILE] "
         "[--control-plane] [--state DIR] [--timeout SECONDS]")


class UsageError(Exception):
    """Bad usage: the message says what and how to fix it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="real-engine.sh", usage=USAGE, description=(
        "Run one Pulumi operation of a Python project under the Pulumi CLI and kubernetes "
        "provider built by scripts/build-oracles.sh; the last line is a JSON verdict."))
    ap.add_argument("op", metavar="OP", help="preview, up or destroy")
    ap.add_argument("project", metavar="PROJECT_DIR", type=Path,
                    help="the folder of the project's Pulumi.yaml")
    ap.add_argument("stack", metavar="STACK", help="the stack (Pulumi.<STACK>.yaml)")
    ap.add_argument("--policy-pack", metavar="DIR", type=Path,
                    help="a Python policy pack, e.g. \"$(gpuplane policy-pack path)\"")
    ap.add_argument("--policy-config", metavar="FILE", type=Path,
                    help="the pack's config (gpuplane policy-pack config --output FILE)")
    ap.add_argument("--control-plane", action="store_true",
                    help="start a throwaway Kubernetes API server for the run")
    ap.add_argument("--state", metavar="DIR", type=Path,
                    help="the backend and Pulumi home (default: per project under "
                         "~/.cache/gpuplane/real-engine)")
    ap.add_argument("--timeout", metavar="SECONDS", type=float, default=1800,
                    help="stop the operation after this long (default 1800)")
    return ap


def _stack_file(project: Path, stack: str) -> Path:
    """The project's stack file, or UsageError naming what is wrong."""
    from gpuplane.cli.plan.project import ProjectError, project_at

    if not project.is_dir():
        raise UsageError(f"PROJECT_DIR {project}: no such directory")
    try:
        loaded = project_at(project)
    except ProjectError as exc:
        raise UsageError(str(exc)) from None
    stacks = loaded.stacks_dir if loaded is not None else project / "stacks"
    path = stacks / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise UsageError(f"stack {stack!r}: {path} does not exist; fix: write the stack "
                         "file, or name a stack that has one")
    return path


def check(ns: argparse.Namespace) -> Path:
    """The arguments checked; the stack file."""
    if ns.op not in OPS:
        raise UsageError(f"OP {ns.op!r}: expected one of {', '.join(OPS)}")
    for flag, path, kind in (("--policy-pack", ns.policy_pack, "dir"),
                             ("--policy-config", ns.policy_config, "file")):
        if path is not None and not (path.is_dir() if kind == "dir" else path.is_file()):
            raise UsageError(f"{flag} {path}: no such {'directory' if kind == 'dir' else 'file'}")
    if ns.policy_pack is not None and not (ns.policy_pack / "PulumiPolicy.yaml").is_file():
        raise UsageError(f"--policy-pack {ns.policy_pack}: no PulumiPolicy.yaml there")
    if ns.policy_config is not None and ns.policy_pack is None:
        raise UsageError("--policy-config needs --policy-pack")
    if ns.timeout <= 0:
        raise UsageError("--timeout: give a number of seconds above 0")
    why = pulumi_engine.missing() or (control_plane.missing() if ns.control_plane else None)
    if why:
        raise UsageError(f"cannot run: {why}")
    return _stack_file(ns.project, ns.stack)


def default_state(project: Path) -> Path:
    digest = hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:12]
    return pulumi_engine.CACHE / "real-engine" / f"{project.resolve().name}-{digest}"


def report(res: pulumi_engine.Result) -> dict[str, Any]:
    return {"ok": res.ok,
            "violations": [{k: v[k] for k in ("policyName", "enforcementLevel", "message")}
                           for v in res.violations],
            "diagnostics": res.diagnostics, "changes": res.changes}


def run(ns: argparse.Namespace, stack_file: Path) -> pulumi_engine.Result:
    """The operation, with a throwaway control plane and backend under `--control-plane`;
    the stack file's bytes put back after."""
    project = ns.project.resolve()
    saved = stack_file.read_bytes()
    scratch = Path(tempfile.mkdtemp(prefix="gp-real-engine-")) if ns.control_plane else None
    cp: control_plane.ControlPlane | None = None
    try:
        kubeconfig = None
        if scratch is not None:
            cp = control_plane.start(scratch / "cluster")
            kubeconfig = cp.kubeconfig
        root = ns.state or (scratch / "engine" if scratch else default_state(project))
        engine = pulumi_engine.Engine(root.resolve(), kubeconfig=kubeconfig)
        return engine.run_project(
            ns.op, project, ns.stack,
            policy_pack=ns.policy_pack.resolve() if ns.policy_pack else None,
            policy_config=ns.policy_config.resolve() if ns.policy_config else None,
            timeout=ns.timeout)
    finally:
        if stack_file.read_bytes() != saved:
            stack_file.write_bytes(saved)
        if cp is not None:
            cp.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    ns: argparse.Namespace | None = None
    try:
        ns = _parser().parse_args(argv)
        stack_file = check(ns)
    except UsageError as exc:
        print(f"usage: {USAGE}\nreal-engine.sh: {exc}", file=sys.stderr)
        return 2
    try:
        res = run(ns, stack_file)
    except (AssertionError, RuntimeError, OSError) as exc:
        # A time-out, a runner that gave no result, a control plane that did not start.
        print(json.dumps({"ok": False, "violations": [], "changes": {}, "diagnostics": [
            {"severity": "error", "message": str(exc)[-4000:], "urn": ""}]}))
        return 1
    if res.stdout:
        print(res.stdout.rstrip("\n"))
    if res.stderr:
        print(res.stderr.rstrip("\n"), file=sys.stderr)
    sys.stderr.flush()
    print(json.dumps(report(res), default=str), flush=True)
    return 0 if res.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
