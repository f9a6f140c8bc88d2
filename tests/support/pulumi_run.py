"""Child process of tests/support/pulumi_engine.py: one operation of the real Pulumi CLI on one
stack of a Python project, its program served by the SDK's own language server (see
tests/support/pulumi_engine.py for why). The program is the project's own, as the
language host runs it (`Pulumi.yaml`'s `main`, else the project directory's
`__main__.py`: `gpuplane.cli.plan.project`, what `gpuplane plan` runs); a project named
`gpuplane` without a program of its own (the tests' copies of the bundled stacks) runs
gpuplane's bundled program. Prints one JSON line: ok, the change summary, the policy
violations and the error and warning diagnostics the engine reported, each resource step
(op, type, name, changed properties, the engine's inputs), the stack outputs, the CLI's
output, the seconds taken and the peak RSS of the CLI and of this Python host (the
program's process).

    python tests/support/pulumi_run.py OP PROJECT_DIR STACK CLI_ROOT \
        [--policy-pack DIR] [--policy-config FILE]

A separate process because the SDK's runtime settings are process-global and the rest of
the suite runs programs under mocks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto


def _program(project_dir: Path) -> tuple[str, Callable[[], None]]:
    """The project's name and its program."""
    from gpuplane.cli.plan.project import BUNDLED, project_at, run_main

    project = project_at(project_dir)
    if project is None:
        def bundled() -> None:
            from gpuplane.stack.program import main

            main()
        return BUNDLED, bundled
    return project.name, lambda: run_main(project.program)


def _cli_peak(cli: Path, stop: threading.Event, peak: list[int]) -> None:
    """Sample the peak resident size (VmHWM, kB) of the CLI's processes until `stop`."""
    while not stop.wait(0.2):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/exe") != str(cli):
                    continue
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=["preview", "up", "refresh", "destroy"])
    ap.add_argument("project")
    ap.add_argument("stack")
    ap.add_argument("cli_root")
    ap.add_argument("--policy-pack")
    ap.add_argument("--policy-config")
    ap.add_argument("--refresh", action="store_true", help="preview/up --refresh --diff")
    a = ap.parse_args()

    violations: list[dict[str, Any]] = []
    out: list[str] = []
    err: list[str] = []

    steps: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []

    def on_event(e: auto.events.EngineEvent) -> None:
        pre = e.resource_pre_event
        if pre is not None:
            m = pre.metadata
            steps.append({"op": str(m.op.value), "type": m.type,
                          "name": m.urn.rsplit("::", 1)[-1], "diffs": list(m.diffs or []),
                          "inputs": m.new.inputs if m.new is not None else None})
        d = e.diagnostic_event
        if d is not None and d.severity in ("error", "warning"):
            diagnostics.append({"severity": d.severity, "message": d.message,
                                "urn": d.urn or ""})
        p = e.policy_event
        if p is not None:
            violations.append({"policyName": p.policy_name,
                               "enforcementLevel": str(getattr(p.enforcement_level, "value",
                                                             p.enforcement_level)),
                               "message": p.message, "urn": p.resource_urn or ""})

    cli = auto.PulumiCommand(root=a.cli_root)
    name, program = _program(Path(a.project))
    stack = auto.create_or_select_stack(
        a.stack, project_name=name, program=program,
        opts=auto.LocalWorkspaceOptions(work_dir=a.project, pulumi_command=cli,
                                        secrets_provider="passphrase"))
    packs = {"policy_packs": [a.policy_pack]} if a.policy_pack else {}
    if a.policy_pack and a.policy_config:
        packs["policy_pack_configs"] = [a.policy_config]
    common: dict[str, Any] = {"on_output": out.append, "on_event": on_event}
    refresh: dict[str, Any] = {"refresh": True, "diff": True} if a.refresh else {}
    peak = [0]
    stop = threading.Event()
    sampler = threading.Thread(target=_cli_peak, daemon=True,
                               args=(Path(a.cli_root).resolve() / "bin" / "pulumi", stop, peak))
    sampler.start()
    started = time.monotonic()
    ok = True
    changes: dict[str, int] = {}
    outputs: dict[str, Any] = {}
    try:
        if a.op == "preview":
            changes = dict(stack.preview(on_error=err.append, **packs, **refresh,
                                         **common).change_summary)
        elif a.op == "up":
            res = stack.up(on_error=err.append, **packs, **refresh, **common)
            changes = dict(res.summary.resource_changes or {})
            outputs = {k: v.value for k, v in res.outputs.items()}
        elif a.op == "refresh":
            changes = dict(stack.refresh(on_error=err.append, **common).summary.resource_changes
                           or {})
        else:
            changes = dict(stack.destroy(on_error=err.append, **common).summary.resource_changes
                           or {})
    except auto.errors.CommandError as e:
        ok = False
        err.append(str(e))
    seconds = round(time.monotonic() - started, 2)
    stop.set()
    sampler.join()
    print(json.dumps({
        "ok": ok, "changes": {str(k): int(v) for k, v in changes.items()},
        "violations": violations, "diagnostics": diagnostics, "steps": steps, "outputs": outputs,
        "stdout": "\n".join(out)[-20000:], "stderr": "\n".join(err)[-20000:], "seconds": seconds,
        "cliPeakMb": round(peak[0] / 1024, 1),
        "hostPeakMb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
