"""`gpuplane`: argument parsing and output only; the work lives in the library.

Exit codes everywhere: 0 clean (warnings allowed), 1 error findings, 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import posixpath
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from gpuplane.containerd import LocalFiles

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # These hand every remaining argument to another parser untouched.
    if args and args[0] in _PASSTHROUGH:
        return _PASSTHROUGH[args[0]](args[1:])
    parser = root_parser()
    ns = parser.parse_args(args)
    if not hasattr(ns, "handler"):
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    return ns.handler(ns)


def root_parser() -> argparse.ArgumentParser:
    """`gpuplane`'s own parser; the commands in `_PASSTHROUGH` parse their own arguments."""
    parser = argparse.ArgumentParser(
        prog="gpuplane", description="Turn Kubernetes nodes into working NVIDIA GPU nodes.")
    parser.add_argument("--version", action="version", version=f"gpuplane {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    ctd = sub.add_parser("containerd", help="containerd configuration tools",
                         description="containerd configuration tools: `check` judges a "
                                     "node's containerd config files offline.")
    ctd_sub = ctd.add_subparsers(title="commands", metavar="COMMAND")
    check = ctd_sub.add_parser(
        "check", help="effective CRI config and findings for a node's containerd config",
        description="Read a top-level containerd config and its imports from local files, "
                    "as the given containerd release would, and report the effective CRI "
                    "runtimes and findings. Exit 0 clean, 1 errors, 2 unreadable input.")
    check.add_argument("--config", required=True, help="top-level config.toml")
    check.add_argument("--containerd-version", metavar="X.Y",
                       help="release line (default: ask `containerd --version` on PATH)")
    check.add_argument("--root", metavar="DIR",
                       help="directory standing in for / (paths in configs are node paths)")
    check.add_argument("--binaries", type=Path, metavar="FILE",
                       help="the <node>.binaries.json `gpuplane nodes capture` wrote: "
                            "whether each runtime's BinaryName exists on the node. Without "
                            "it a BinaryName is judged only where --root (or the node "
                            "itself) holds its directory, else reported as not checked")
    check.add_argument("--runtime-name", default="nvidia", metavar="NAME",
                       help="the GPU runtime pods use (RuntimeClass handler; default: "
                            "nvidia, as in the stacks): judged as used, so FM01/FM07 on it "
                            "are errors; '' judges no runtime as used")
    check.add_argument("--nri", action="store_true",
                       help="the GPU Operator runs its NRI plugin here (cdi.nriPluginEnabled, "
                            "gpuplane:gpuOperator.nri): NRI must be on in the merged config "
                            "(FM27) and no nvidia runtime is expected (implies "
                            "--runtime-name '')")
    check.add_argument("--runtime-class-handler", action="append", default=[],
                       metavar="NAME", dest="handlers",
                       help="a RuntimeClass handler pods use, named by hand (offline, "
                            "instead of --runtime-classes-from-cluster): judged as used "
                            "like --runtime-name")
    check.add_argument("--runtime-classes-from-cluster", action="store_true",
                       help="list the cluster's node.k8s.io/v1 RuntimeClasses and judge "
                            "every handler they name as used: one that the config does not "
                            "define, or defines with FM01/FM07 problems, is an error naming "
                            "the RuntimeClass")
    check.add_argument("--kubeconfig", metavar="PATH",
                       help="with --runtime-classes-from-cluster: kubeconfig (default: "
                            "KUBECONFIG or ~/.kube/config; in a pod, its service account)")
    check.add_argument("--context", metavar="NAME",
                       help="with --runtime-classes-from-cluster: kubeconfig context")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.set_defaults(handler=_containerd_check)

    explain = sub.add_parser(
        "explain", help="explain a failure mode (FM01-FM38)",
        description="Explain a failure mode of the rulebook: what users see, why it happens, "
                    "an example and the fix; without a rule id, list them all. Every finding "
                    "of `plan`, `containerd check` and `doctor` names its rule id.")
    explain.add_argument("rule", nargs="?", help="rule id, e.g. FM02; omit to list all")
    explain.set_defaults(handler=_explain)

    pack = sub.add_parser(
        "policy-pack", help="the CrossGuard policy pack installed with gpuplane",
        description="The CrossGuard pack ships inside the gpuplane package and runs with the "
                    "Python gpuplane is installed in: pulumi preview --policy-pack "
                    "\"$(gpuplane policy-pack path)\"")
    pack_sub = pack.add_subparsers(title="commands", metavar="COMMAND")
    pack_path = pack_sub.add_parser("path", help="print the pack's directory (for "
                                    "`pulumi preview --policy-pack` and `pulumi policy publish`)")
    pack_path.set_defaults(handler=_policy_pack_path)
    pack_config = pack_sub.add_parser(
        "config", help="write a policy config that gives every policy the same cluster facts",
        description="Pulumi gives each policy only its own config, so the cluster facts a "
                    "stack without gpuplane's components is judged by must sit under every "
                    "policy. This writes them from one set: pulumi preview --policy-pack "
                    "\"$(gpuplane policy-pack path)\" --policy-pack-config FILE")
    from gpuplane.policy.facts import FACTS_SCHEMA  # the facts' names, types and help

    for key, spec in FACTS_SCHEMA.items():
        pack_config.add_argument(f"--{_kebab(key)}", dest=f"fact_{key}", metavar="VALUE",
                                 help=f"{spec.get('description', key)} "
                                      f"({_fact_type(spec)})")
    pack_config.add_argument("--base", type=Path, metavar="FILE",
                             help="a policy config to extend: its levels and properties stay")
    pack_config.add_argument("--output", type=Path, metavar="FILE",
                             help="write the config there (default: stdout)")
    pack_config.set_defaults(handler=_policy_pack_config)

    sub.add_parser("probe", help="CUDA probe (see `gpuplane probe --help`)", add_help=False)
    sub.add_parser("plan", help="offline plan of a stack", add_help=False)
    sub.add_parser("node-agent", help="print the node agent script (sh; see its `help` mode)",
                   add_help=False)
    sub.add_parser("doctor", help="diagnose a live GPU cluster or a saved snapshot",
                   add_help=False)
    sub.add_parser("nodes", help="node tools: `nodes capture` reads the nodes' containerd "
                   "files into the stack", add_help=False)
    return parser


def _containerd_check(ns: argparse.Namespace) -> int:
    from gpuplane.capture.record import load_binaries
    from gpuplane.cli.check_report import check_to_json, render_check
    from gpuplane.containerd import ConfigError, ContainerdVersion
    from gpuplane.kube.runtimeclasses import handler_error
    from gpuplane.rules.nodecheck import (
        VersionUnknown,
        check_node_config,
        detect_containerd_version,
    )

    for handler in ns.handlers:
        if (why := handler_error(handler)) is not None:
            return _input_error(f"--runtime-class-handler: {why}")
    for flag, value in (("--kubeconfig", ns.kubeconfig), ("--context", ns.context)):
        if value is not None and not ns.runtime_classes_from_cluster:
            return _input_error(f"{flag} applies only with --runtime-classes-from-cluster")
    source = "--containerd-version"
    try:
        if ns.containerd_version:
            version = ContainerdVersion.parse(ns.containerd_version)
        else:
            version = detect_containerd_version()
            # Said in the report: the local containerd may not be the node's.
            source = (f"the local `{shutil.which('containerd')} --version`; pass "
                      "--containerd-version X.Y for the node's")
    except ValueError as exc:
        return _input_error(f"--containerd-version: {exc}")
    except VersionUnknown as exc:
        return _input_error(f"cannot tell which containerd reads this config ({exc}); pass "
                            "--containerd-version X.Y (1.6, 1.7 or 2.1)")
    classes: list[tuple[str | None, str]] = [(None, h) for h in dict.fromkeys(ns.handlers)]
    if ns.runtime_classes_from_cluster:
        from gpuplane.kube.client import CollectError
        try:
            classes += _cluster_runtime_classes(ns.kubeconfig, ns.context)
        except CollectError as exc:
            return _input_error(f"--runtime-classes-from-cluster: cannot list the cluster's "
                                f"RuntimeClasses: {exc}")
    try:
        files, config = _node_files(ns.config, ns.root)
        binaries = load_binaries(ns.binaries) if ns.binaries else None
        result = check_node_config(files, config, version,
                                   {"nri_requested": True} if ns.nri else None,
                                   runtime_name=None if ns.nri else ns.runtime_name or None,
                                   runtime_classes=classes, binaries=binaries)
    except ConfigError as exc:
        return _input_error(_local_error(exc, ns.root))
    if ns.format == "json":
        print(json.dumps(check_to_json(result, source), indent=2))
    else:
        render_check(result, _console(), source)
    return EXIT_FINDINGS if result.failed else EXIT_OK


def _cluster_runtime_classes(kubeconfig: str | None,
                             context: str | None) -> list[tuple[str | None, str]]:
    """(RuntimeClass, handler) of every RuntimeClass of the cluster, through the doctor's
    client. Raises gpuplane.kube.client.CollectError."""
    from gpuplane.kube.client import KubeClient
    from gpuplane.kube.runtimeclasses import runtime_classes

    found = runtime_classes(KubeClient(kubeconfig, context))
    if not found:
        print("gpuplane: the cluster has no RuntimeClass: no handler of one is judged as "
              "used", file=sys.stderr)
    return [(rc.name, rc.handler) for rc in found]


def _local_error(exc: Exception, root: str | None) -> str:
    """A file error under `--root` names the local file the user opens, then the node
    path the configs use; without `--root` they are the same."""
    path = getattr(exc, "path", None)
    if root is None or not isinstance(path, str) or not path.startswith("/"):
        return str(exc)
    local = os.path.join(root, path.lstrip("/"))
    return str(exc).replace(path, f"{local} (node path {path})", 1)


def _top_level_names() -> set[str]:
    """The names of the top-level containerd configs the distributions use (config.toml,
    containerd.toml): under --root, a missing one is a node that runs on containerd's
    defaults; any other missing path named by --config is a mistake."""
    from gpuplane.distros.profiles import Distro, profile

    return {posixpath.basename(profile(d).config_path) for d in Distro}


def _node_files(config: str, root: str | None) -> tuple[LocalFiles, str]:
    """The file source and the config's node path, with or without a stand-in root. A
    path the user names that does not exist is an input error (exit 2), not a node without
    a config, except containerd's own `config.toml` under `--root` (the node has none)."""
    from gpuplane.containerd import ConfigError

    if root is None:
        if not Path(config).is_file():
            raise ConfigError(config, "no such file; fix: give the path of the node's "
                              "top-level config (to judge a node that has none, use --root "
                              "DIR with its node path, e.g. /etc/containerd/config.toml)")
        return LocalFiles(), os.path.abspath(config)
    base = Path(root)
    if not base.is_dir():
        raise ConfigError(root, "--root is not a directory")
    local = Path(config).resolve()
    if local.is_relative_to(base.resolve()):
        # A host path into the copy.
        node_path = "/" + local.relative_to(base.resolve()).as_posix()
    elif config.startswith("/"):
        # A node path, whatever this machine holds there.
        node_path = os.path.normpath(config)
    else:
        raise ConfigError(config, f"not under --root {root}: give the node path (e.g. "
                          "/etc/containerd/config.toml) or a path inside --root")
    if not (base / node_path.lstrip("/")).is_file():
        names = _top_level_names()
        if posixpath.basename(node_path) not in names:
            raise ConfigError(config, "no such file under --root; fix: check the path "
                              f"(only a missing {' or '.join(sorted(names))} is judged as a "
                              "node without a top-level config)")
        # Absent on the node: no top-level file, containerd's built-in defaults (judged
        # as such, like the planner does).
    return LocalFiles(base), node_path


def _explain(ns: argparse.Namespace) -> int:
    from gpuplane.rules import RULES, explain

    if ns.rule is None:
        for rule in RULES.values():
            print(f"{rule.id}  {rule.severity:7}  {rule.title}")
        return EXIT_OK
    try:
        print(explain(ns.rule))
    except KeyError:
        return _input_error(f"unknown rule {ns.rule!r}; valid ids: {', '.join(RULES)}")
    return EXIT_OK


def _policy_pack_path(ns: argparse.Namespace) -> int:
    from gpuplane.policy.location import pack_dir

    print(pack_dir())
    return EXIT_OK


def _kebab(key: str) -> str:
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in key)


def _fact_type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " or ".join(spec["enum"])
    return {"boolean": "true or false", "integer": "a whole number"}.get(
        spec.get("type", "string"), "text")


def _policy_pack_config(ns: argparse.Namespace) -> int:
    from gpuplane.policy.config import PackConfigError, load_pack_config
    from gpuplane.policy.facts import FACTS_SCHEMA, spread_facts
    from gpuplane.policy.pack import policy_names

    facts: dict[str, Any] = {}
    problems: list[str] = []
    for key, spec in FACTS_SCHEMA.items():
        raw = getattr(ns, f"fact_{key}")
        if raw is None:
            continue
        kind = spec.get("type")
        if kind == "boolean" and raw.lower() in ("true", "false"):
            facts[key] = raw.lower() == "true"
        elif kind == "integer" and raw.lstrip("-").isdigit():
            facts[key] = int(raw)
        elif kind in ("boolean", "integer"):
            problems.append(f"--{_kebab(key)} {raw!r}: expected {_fact_type(spec)}")
        else:
            facts[key] = raw
    if not facts and not problems:
        return _input_error("policy-pack config: give at least one fact, e.g. --distro "
                            "k3s --containerd-version 2.0 (see --help)")
    try:
        base = load_pack_config(ns.base, policy_names()) if ns.base else None
        config = spread_facts(facts, policy_names(), FACTS_SCHEMA, base)
    except PackConfigError as exc:
        problems += [_flagged(line) for line in str(exc).splitlines()]
    if problems:
        return _input_error("policy-pack config:\n  " + "\n  ".join(problems))
    text = json.dumps(config, indent=2) + "\n"
    if ns.output:
        try:
            ns.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            return _input_error(f"--output {ns.output}: {exc.strerror or exc}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _flagged(problem: str) -> str:
    """A facts problem (`containerdVersion: ...`) named by its flag."""
    key, sep, rest = problem.partition(": ")
    return f"--{_kebab(key)}: {rest}" if sep and " " not in key and "/" not in key else problem


def _probe(argv: list[str]) -> int:
    from gpuplane import probe  # written separately; imported only when asked for

    return int(probe.main(argv) or 0)


def _plan(argv: list[str]) -> int:
    from gpuplane.cli.plan.diff import check_base, plan_diff
    from gpuplane.cli.plan.project import ProgramFailed, ProjectError
    from gpuplane.cli.plan.render import render_markdown, render_text
    from gpuplane.cli.plan.run import plan_stack
    from gpuplane.config import StackConfigError
    from gpuplane.config.stackfile import StackFileError
    from gpuplane.core.findings import Severity

    ns = _plan_parser().parse_args(argv)
    loaded: dict[str, Any] = {"--policy-pack-config": None}
    for option, path in (("--base", ns.base),):
        try:
            loaded[option] = json.loads(path.read_text(encoding="utf-8")) if path else None
        except (OSError, ValueError) as exc:
            return _input_error(f"{option} {path}: {exc}")
    if loaded["--base"] is not None:
        try:
            check_base(loaded["--base"])
        except ValueError as exc:
            return _input_error(f"--base {ns.base}: {exc}")
    if ns.policy_pack_config:   # every level and policy name checked, file:line named
        from gpuplane.policy.config import load_pack_config
        from gpuplane.policy.pack import policy_names
        try:
            loaded["--policy-pack-config"] = load_pack_config(ns.policy_pack_config,
                                                              policy_names())
        except ValueError as exc:
            return _input_error(f"--policy-pack-config: {exc}")
    base = loaded["--base"]
    try:
        project, stacks_dir = _plan_project(ns.project, ns.stacks_dir)
        plan = plan_stack(ns.stack, stacks_dir, loaded["--policy-pack-config"], project)
    except ProjectError as exc:
        return _input_error(str(exc))
    except ProgramFailed as exc:   # the program's own error, never a plan of another
        return _input_error(f"stack {ns.stack!r}: {exc}")
    except (StackFileError, StackConfigError) as exc:
        return _input_error(f"stack {ns.stack!r}: invalid config\n{exc}")
    if base is not None:
        plan["diff"] = plan_diff(base, plan)
    if ns.format == "json":
        _write_json(plan)
    elif ns.format == "markdown":
        print(render_markdown(plan))
    else:
        render_text(plan, _console())
    mandatory = any(f["severity"] == Severity.ERROR for f in plan["findings"])
    return EXIT_FINDINGS if mandatory else EXIT_OK


def _write_json(value: Any, piece: int = 1 << 20) -> None:
    """`value` as indented JSON on stdout, written a megabyte at a time: `json.dumps`
    holds the whole text (82 MB for a 10,000-node plan, twice while it joins), and
    `json.dump` writes each token on its own, four times slower on stdout."""
    parts: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=2).iterencode(value):
        parts.append(chunk)
        size += len(chunk)
        if size >= piece:
            sys.stdout.write("".join(parts))
            parts.clear()
            size = 0
    sys.stdout.write("".join(parts) + "\n")


def _plan_project(folder: Path | None, stacks_dir: Path | None) -> tuple[Any, Path]:
    """The project to plan and its stacks dir: `--project`, else the Pulumi.yaml at or
    above `--stacks-dir` or the working directory (as `pulumi preview` finds it); its
    stacks in `--stacks-dir`, else its `stackConfigDir`. None: no Pulumi project at all,
    gpuplane's bundled program over `--stacks-dir` (default `stacks`)."""
    from gpuplane.cli.plan.project import find_project, project_at

    found = folder if folder is not None else find_project(stacks_dir or Path.cwd())
    if found is None:
        return None, stacks_dir or Path("stacks")
    project = project_at(found)
    if project is None:   # gpuplane's own project without its __main__.py: bundled program
        return None, stacks_dir or found / "stacks"
    return project, stacks_dir or project.stacks_dir


def _plan_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuplane plan",
        description="Offline plan of a stack: runs the project's Pulumi program under the "
                    "mock engine "
                    "(no CLI, cluster or credentials), renders per-node files and Helm values, "
                    "runs every policy. Exit 0 clean, 1 mandatory policy violations, 2 bad "
                    "config or a program that fails.")
    parser.add_argument("--stack", required=True,
                        help="stack name: Pulumi.<NAME>.yaml in the stacks dir")
    parser.add_argument("--project", type=Path, metavar="DIR",
                        help="the Pulumi project to plan (its Pulumi.yaml's program, as "
                             "`pulumi preview` runs it); default: the project at or above "
                             "--stacks-dir or the working directory")
    parser.add_argument("--stacks-dir", type=Path, metavar="DIR",
                        help="where Pulumi.<NAME>.yaml is; default: the project's "
                             "stackConfigDir (else its directory), or `stacks` outside a "
                             "project")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument("--base", type=Path, metavar="PLAN.json",
                        help="a previous JSON plan (e.g. main's): diff every resource's inputs, "
                             "the stack settings, node files, Helm values, the rollout (with "
                             "the nodes that restart, in order, and why) and the findings")
    parser.add_argument("--policy-pack-config", type=Path, metavar="FILE",
                        help="policy config JSON, as `pulumi preview --policy-pack-config`")
    return parser


NODE_AGENT_HELP = (
    "usage: gpuplane node-agent > agent.sh\n\n"
    "Print the node agent, the POSIX sh script gpuplane runs on each node (over SSH or from\n"
    "a pod) to write containerd's files and restart it, rolling back when containerd does\n"
    "not come back. It takes no arguments; its modes (apply, status, restore) are listed by\n"
    "`sh agent.sh help`.")


def _node_agent(argv: list[str]) -> int:
    from gpuplane.agent.script import agent_source

    if argv in (["-h"], ["--help"]):
        print(NODE_AGENT_HELP)
        return EXIT_OK
    if argv:
        return _input_error("node-agent takes no arguments: it prints the agent script, "
                            "whose own modes are listed by `sh agent.sh help`")
    sys.stdout.write(agent_source())
    return EXIT_OK


def _doctor(argv: list[str]) -> int:
    from gpuplane.doctor.command import main as doctor

    return doctor(argv, _console)


def _nodes(argv: list[str]) -> int:
    from gpuplane.capture.command import main as nodes

    def stacks_dir_of(given: Path | None) -> Path:
        """The stacks dir `gpuplane plan` would use (one discovery for both commands)."""
        from gpuplane.cli.plan.project import ProjectError

        try:
            return _plan_project(None, given)[1]
        except ProjectError:   # a Pulumi.yaml plan cannot read: its stacks dir as given
            return given or Path("stacks")

    return nodes(argv, stacks_dir_of)


def passthrough_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parsers of the commands that parse their own arguments, by command name: what
    the generated CLI reference (scripts/gen_docs.py) reads, so it cannot drift from the
    options. `node-agent` takes no arguments and has no parser."""
    from gpuplane.capture.command import parser as nodes
    from gpuplane.doctor.command import parser as doctor
    from gpuplane.probe.cuda_probe import build_parser as probe

    return {"plan": _plan_parser(), "doctor": doctor(), "nodes": nodes(),
            "probe": probe(prog="gpuplane probe")}


_PASSTHROUGH: dict[str, Callable[[list[str]], int]] = {
    "probe": _probe, "plan": _plan, "node-agent": _node_agent, "doctor": _doctor,
    "nodes": _nodes}


def _version() -> str:
    """The installed distribution's version; from a source tree (no installed metadata)
    the version says so, rather than a number that may not be this code's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuplane")
    except PackageNotFoundError:
        return "(not installed: run from source)"


def _input_error(message: str) -> int:
    print(f"gpuplane: {message}", file=sys.stderr)
    return EXIT_INPUT


def _console() -> Console:
    """One console for every command: the terminal's width on a terminal; piped, no
    colour, padding or truncation (`gpuplane.core.console`)."""
    from gpuplane.core.console import make_console

    return make_console()


def entry() -> NoReturn:
    """The `gpuplane` command (pyproject's script): :func:`main`, its output flushed, then
    the process ends at once. A normal exit frees the heap object by object, which after a
    10,000-node plan is 3.5 s of nothing (benchmarks/plan_scale.py's figures in
    docs/benchmarks.md); gpuplane registers no exit handlers that this skips."""
    try:
        code = main()
    except BrokenPipeError:   # `gpuplane plan | head`: the reader has what it wanted
        code = EXIT_OK
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):   # `| head`, a closed stream
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
