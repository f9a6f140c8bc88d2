"""`gpuplane nodes capture`: argument parsing and output for the capture."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplane.capture.run import CaptureResult
    from gpuplane.kube.client import ClusterClient

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    """`gpuplane nodes`'s parser (also read by the generated CLI reference)."""
    parser = argparse.ArgumentParser(
        prog="gpuplane nodes",
        description="Node tools. `capture`: read the files gpuplane plans from off every "
                    "node of a stack over SSH and point the stack's baselineFiles at them.")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    cap = sub.add_parser(
        "capture", help="capture every node's containerd files into the stack",
        description="Over SSH (the stack's ssh.user/port/sudo, the node's host/user/port), "
                    "read from every node the distribution's containerd config, template(s) "
                    "and drop-ins, and `containerd --version`; store one copy per distinct "
                    "content under STACKS_DIR/captured/STACK and set baselineFiles in the "
                    "stack file (comments and order kept). Exit 0 every node captured, 1 a "
                    "node failed or disagrees with the stack (the others are captured), "
                    "2 bad input.")
    cap.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<NAME>.yaml")
    cap.add_argument("--stacks-dir", type=Path, metavar="DIR",
                     help="where Pulumi.<NAME>.yaml is; default: as `gpuplane plan` finds "
                          "it (the project's stackConfigDir, else its directory, or `stacks` "
                          "outside a project)")
    cap.add_argument("--identity", type=Path, metavar="FILE",
                     help="SSH private key (default: the stack's gpuplane:sshPrivateKey "
                          "secret through `pulumi config get`, when the stack has one)")
    cap.add_argument("--ssh-agent", action="store_true",
                     help="leave the key to ssh (its agent and ~/.ssh keys) instead of "
                          "reading the stack's secret")
    cap.add_argument("--ssh-config", type=Path, metavar="FILE",
                     help="ssh client config (`ssh -F`): host aliases, bastions")
    cap.add_argument("--out", type=Path, metavar="DIR",
                     help="where copies go (default: STACKS_DIR/captured/STACK)")
    cap.add_argument("--via", choices=("ssh", "kubernetes"), default="ssh",
                     help="ssh (default), or kubernetes: a short-lived privileged pod per "
                          "node (the host's / read-only), no SSH needed")
    cap.add_argument("--kubeconfig", metavar="PATH", help="--via kubernetes: kubeconfig "
                     "(default: KUBECONFIG or ~/.kube/config)")
    cap.add_argument("--context", metavar="NAME", help="--via kubernetes: kubeconfig context")
    cap.add_argument("--namespace", default="kube-system",
                     help="--via kubernetes: where the capture pods run")
    cap.add_argument("--image", default="busybox:1.36",
                     help="--via kubernetes: the capture pod's image (needs sh and chroot)")
    cap.add_argument("--remote-root", default="", metavar="DIR",
                     help="directory standing in for / on each node ({node} is replaced by "
                          "the node name): nodes whose root is mounted elsewhere, and tests")
    cap.add_argument("--format", choices=("text", "json"), default="text",
                     help="json: one object with every node's files, role, units, kubelet "
                          "cgroup driver and problems")
    cap.set_defaults(handler=_capture)
    return parser


def main(argv: list[str],
         stacks_dir_of: Callable[[Path | None], Path] | None = None) -> int:
    """`stacks_dir_of`: the stacks dir for `--stacks-dir` (None: not given), found as
    `gpuplane plan` finds it (the CLI passes its project discovery, a layer above)."""
    nodes = parser()
    ns = nodes.parse_args(argv)
    if not hasattr(ns, "handler"):
        nodes.print_help(sys.stderr)
        return EXIT_INPUT
    if hasattr(ns, "stacks_dir"):
        ns.stacks_dir = (stacks_dir_of(ns.stacks_dir) if stacks_dir_of is not None
                         else ns.stacks_dir or Path("stacks"))
    return int(ns.handler(ns))


def _capture(ns: argparse.Namespace) -> int:
    from gpuplane.capture.run import CaptureError, KubeAccess, capture_stack
    from gpuplane.config import StackConfigError
    from gpuplane.config.stackfile import StackFileError
    from gpuplane.kube.client import CollectError

    try:
        kube = None
        if ns.via == "kubernetes":
            kube = KubeAccess(_client(ns.kubeconfig, ns.context), ns.namespace, ns.image)
        result = capture_stack(ns.stack, ns.stacks_dir, ns.identity, ns.ssh_config, ns.out,
                               ns.remote_root, kube, use_agent=ns.ssh_agent)
    except (StackFileError, StackConfigError, CaptureError, CollectError) as exc:
        print(f"gpuplane: stack {ns.stack!r}: cannot capture\n{exc}", file=sys.stderr)
        return EXIT_INPUT
    if ns.format == "json":
        print(json.dumps(_as_json(ns.stack, result), indent=2))
    else:
        _print_text(ns.stack, result)
    failed = result.failed
    if failed:
        print(f"gpuplane: {len(failed)} of {len(result.nodes)} nodes not captured: "
              f"{', '.join(n.name for n in failed)}; their baselineFiles were left as they "
              "were", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _print_text(stack: str, result: CaptureResult) -> None:
    width = max(len(n.name) for n in result.nodes)
    print(f"capture {stack}: {len(result.nodes)} nodes, copies in {result.out_dir}")
    pad = f"  {'':{width}}    "
    for node in result.nodes:
        if node.problems:
            print(f"  {node.name:{width}}  FAILED  {node.host}")
            for problem in node.problems:
                print(f"{pad}{problem}")
        else:
            missing = f", absent: {', '.join(node.missing)}" if node.missing else ""
            print(f"  {node.name:{width}}  ok      containerd {node.version}, "
                  f"{sum(v is not None for v in node.files.values())} files, "
                  f"{node.new_copies} new{missing}")
        if node.binaries:
            print(f"{pad}runtime binaries: " + ", ".join(
                f"{path} {'present' if there else 'ABSENT'}"
                for path, there in sorted(node.binaries.items())))
        if node.record is not None:
            print(f"{pad}binaries record: {node.record} (containerd check --binaries)")
        if node.role is not None:
            print(f"{pad}role: {node.role.describe()}")
        if node.cgroup_driver is not None:
            print(f"{pad}kubelet cgroup driver: {node.cgroup_driver.describe()}")
        for note in node.notes:
            print(f"{pad}note: {note}")
    state = "updated" if result.stack_changed else "unchanged"
    print(f"stack file {result.stack.path}: {state}")


def _as_json(stack: str, result: CaptureResult) -> dict[str, Any]:
    """The machine-readable report: what the text shows, per node."""
    nodes = []
    for n in result.nodes:
        role, driver = n.role, n.cgroup_driver
        nodes.append({
            "name": n.name, "host": n.host, "ok": not n.problems,
            "containerdVersion": n.version, "files": n.files, "newCopies": n.new_copies,
            "missing": list(n.missing), "problems": n.problems, "notes": n.notes,
            "runtimeBinaries": dict(sorted(n.binaries.items())),
            "binariesRecord": None if n.record is None else str(n.record),
            "role": None if role is None else (role.role if role.known else "unknown"),
            "activeUnits": None if role is None else list(role.active),
            "kubeletCgroupDriver": None if driver is None else {
                "driver": driver.driver or None, "source": driver.source or None,
                "why": driver.why or None},
        })
    return {"stack": stack, "outDir": str(result.out_dir),
            "stackFile": str(result.stack.path), "stackChanged": result.stack_changed,
            "nodes": nodes}


def _client(kubeconfig: str | None, context: str | None) -> ClusterClient:
    """The API client (a seam for tests: they pass a recorded API instead)."""
    from gpuplane.kube.client import KubeClient

    return KubeClient(kubeconfig, context)
