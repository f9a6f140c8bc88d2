"""`gpuplane doctor`: arguments and exit codes; the work lives in the doctor package.

Exit codes: 0 healthy (warnings allowed), 1 error findings, 2 could not collect (no
kubeconfig, unreachable, forbidden: the message names the permission) or a snapshot
that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from rich.console import Console

EXIT_OK, EXIT_FINDINGS, EXIT_COLLECT = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuplane doctor",
        description="Diagnose a GPU cluster: collect GPU nodes, pods, events, the GPU "
                    "Operator and HAMi, inspect each GPU node's real containerd, and explain "
                    "what is wrong with the rulebook (FM01-FM38). Exit 0 healthy, 1 problems "
                    "found, 2 could not collect.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from", dest="source", metavar="DIR",
                     help="diagnose a snapshot directory instead of a live cluster")
    src.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig (default: KUBECONFIG "
                     "or ~/.kube/config; in a pod, its service account)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context")
    p.add_argument("--save", metavar="DIR", help="also write the snapshot to DIR (JSON files "
                   "to attach to a ticket)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-inspect", action="store_true",
                   help="do not start inspection pods on the GPU nodes")
    p.add_argument("--node", action="append", metavar="NAME",
                   help="inspect only this node (repeatable)")
    p.add_argument("--no-cri-probe", action="store_true",
                   help="inspect without starting a sandbox through the nvidia handler")
    p.add_argument("--inspect-namespace", default=None, metavar="NS",
                   help="namespace of the inspection pods (default kube-system)")
    p.add_argument("--inspect-image", default=None, metavar="IMAGE",
                   help="image of the inspection pods; needs python3 (default "
                        "python:3.12-slim)")
    return p


def main(argv: list[str], console: Callable[[], Console]) -> int:
    from gpuplane.doctor.analyse import analyse
    from gpuplane.doctor.collect import collect
    from gpuplane.doctor.inspect import DEFAULT_IMAGE, DEFAULT_NAMESPACE
    from gpuplane.doctor.report import render_report, report_to_json
    from gpuplane.doctor.snapshot import SnapshotError, load, save, validate
    from gpuplane.kube.client import CollectError, KubeClient

    ns = parser().parse_args(argv)
    if ns.source and ns.context:
        return _error("--context applies to a live cluster, not to --from")
    try:
        if ns.source:
            snapshot = load(ns.source)
        else:
            client = KubeClient(ns.kubeconfig, ns.context)
            snapshot = collect(
                client, inspect=not ns.no_inspect, only_nodes=ns.node,
                inspect_namespace=ns.inspect_namespace or DEFAULT_NAMESPACE,
                inspect_image=ns.inspect_image or DEFAULT_IMAGE,
                cri_probe=not ns.no_cri_probe,
                source={"server": client.server, "context": ns.context},
                progress=lambda what: print(f"gpuplane doctor: {what}", file=sys.stderr))
            validate(snapshot)
        if ns.save:
            save(snapshot, ns.save)
            print(f"gpuplane doctor: snapshot written to {ns.save}", file=sys.stderr)
    except CollectError as exc:
        return _error(f"could not collect: {exc}")
    except SnapshotError as exc:
        return _error(f"cannot read the snapshot: {exc}" if ns.source else
                      f"could not collect: {exc}")
    except OSError as exc:
        return _error(f"cannot write the snapshot: {exc}")
    if not snapshot.nodes:
        where = f"the snapshot {ns.source}" if ns.source else "the cluster"
        return _error(f"nothing to diagnose: {where} has no nodes (a snapshot needs at least "
                      "nodes.json, e.g. `kubectl get nodes -o json > nodes.json`)")
    report = analyse(snapshot)
    if ns.format == "json":
        print(json.dumps(report_to_json(report), indent=2))
    else:
        render_report(report, console())
    return EXIT_FINDINGS if report.failed else EXIT_OK


def _error(message: str) -> int:
    print(f"gpuplane doctor: {message}", file=sys.stderr)
    return EXIT_COLLECT


__all__ = ["EXIT_COLLECT", "EXIT_FINDINGS", "EXIT_OK", "main", "parser"]
