"""The program's entry: gather every fact into one report (an error in one never costs the
rest), parse the command line, print the report as one JSON object."""

# ------------------------------------------------------------------ main

def inspect(args: argparse.Namespace) -> dict[str, Any]:
    host = Host(args.root, args.proc, args.exec_mode, args.timeout)
    report: dict[str, Any] = {"format": FORMAT, "hostname": socket.gethostname(),
                              "root": host.root, "exec": host.exec_mode, "errors": []}
    errors: list[str] = report["errors"]
    started = time.monotonic()
    procs = processes(args.proc)
    daemons = [daemon_of(p, host) for p in procs if is_containerd(p)]
    kubelets = [kubelet_of(p, host) for p in procs if is_kubelet(p)]
    kubelet = kubelets[0] if kubelets else None
    if kubelet is None:
        errors.append("no kubelet process found; assuming it talks to "
                      f"{DEFAULT_ADDRESS}")
    endpoint = kubelet["endpoint"] if kubelet else DEFAULT_ADDRESS
    served = [d for d in daemons if d["address"] == endpoint]
    mine = served[0] if served else None
    if daemons and mine is None:
        errors.append(f"no containerd daemon listens on the kubelet's endpoint {endpoint}")
    files: dict[str, str] = {}
    unreadable: list[str] = []
    for daemon in daemons:
        version = host.run([daemon["binary"], "--version"])
        daemon["version"] = version["stdout"].strip() if version.get("rc") == 0 else None
        collect_files(host, daemon["config"], files, unreadable)
    dump = None
    if mine is not None:
        dump = host.run([mine["binary"], "--config", mine["config"], "config", "dump"])
        dump = ({"pid": mine["pid"], "ok": dump.get("rc") == 0, **dump} if dump["ran"]
                else {"pid": mine["pid"], "ok": False, **dump})
    binaries = list(dict.fromkeys([*binary_names(files), *TOOLKIT_PATHS]))
    report.update(
        daemons=daemons,
        kubelet=kubelet,
        kubelet_daemon=mine["pid"] if mine else None,
        files=files,
        unreadable=unreadable,
        binaries=[inspect_binary(host, b) for b in binaries],
        glibc=host_glibc(host),
        os_release=os_release(host),
        config_dump=dump,
    )
    try:
        report["cri_probe"] = cri_probe(host, mine, args, dump, kubelet)
    except Exception as exc:  # the probe must never cost the rest of the report
        report["cri_probe"] = {"status": "failed", "error": f"probe crashed: {exc!r}"}
    report["elapsed_s"] = round(time.monotonic() - started, 3)
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="inspect_node", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/", help="where the host's / is mounted")
    parser.add_argument("--proc", default="/proc", help="where the host's /proc is")
    parser.add_argument("--exec", dest="exec_mode", choices=("nsenter", "direct", "none"),
                        default="none", help="how to run host commands")
    parser.add_argument("--cri-probe", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--cri-method", choices=("auto", "grpc", "crictl"), default="auto")
    parser.add_argument("--handler", default="nvidia", help="runtime handler to probe")
    parser.add_argument("--cgroup-parent", help="probe sandbox cgroup parent")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = inspect(args)
    except Exception as exc:
        report = {"format": FORMAT, "errors": [f"inspection failed: {exc!r}"]}
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
