"""`gpuplane nodes capture`: argument parsing and output for the capture."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplane.doctor.client import ClusterClient

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


def main(argv: list[str]) -> int:
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
    cap.add_argument("--stacks-dir", default="stacks", type=Path)
    cap.add_argument("--identity", type=Path, metavar="FILE",
                     help="SSH private key (default: ssh-agent and ~/.ssh keys)")
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
    cap.set_defaults(handler=_capture)
    ns = parser.parse_args(argv)
    if not hasattr(ns, "handler"):
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    return int(ns.handler(ns))


def _capture(ns: argparse.Namespace) -> int:
    from gpuplane.capture.run import CaptureError, KubeAccess, capture_stack
    from gpuplane.config import StackConfigError
    from gpuplane.doctor.client import CollectError
    from gpuplane.plan.stackfile import StackFileError

    try:
        kube = None
        if ns.via == "kubernetes":
            kube = KubeAccess(_client(ns.kubeconfig, ns.context), ns.namespace, ns.image)
        result = capture_stack(ns.stack, ns.stacks_dir, ns.identity, ns.ssh_config, ns.out,
                               ns.remote_root, kube)
    except (StackFileError, StackConfigError, CaptureError, CollectError) as exc:
        print(f"gpuplane: stack {ns.stack!r}: cannot capture\n{exc}", file=sys.stderr)
        return EXIT_INPUT
    width = max(len(n.name) for n in result.nodes)
    print(f"capture {ns.stack}: {len(result.nodes)} nodes, copies in {result.out_dir}")
    for node in result.nodes:
        if node.problems:
            print(f"  {node.name:{width}}  FAILED  {node.host}")
            for problem in node.problems:
                print(f"  {'':{width}}    {problem}")
            continue
        missing = f", absent: {', '.join(node.missing)}" if node.missing else ""
        print(f"  {node.name:{width}}  ok      containerd {node.version}, "
              f"{len(node.files)} files, {node.new_copies} new{missing}")
    state = "updated" if result.stack_changed else "unchanged"
    print(f"stack file {result.stack.path}: {state}")
    failed = result.failed
    if failed:
        print(f"gpuplane: {len(failed)} of {len(result.nodes)} nodes not captured: "
              f"{', '.join(n.name for n in failed)}; their baselineFiles were left as they "
              "were", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _client(kubeconfig: str | None, context: str | None) -> ClusterClient:
    """The API client (a seam for tests: they pass a recorded API instead)."""
    from gpuplane.doctor.client import KubeClient

    return KubeClient(kubeconfig, context)
