"""Which containerd the kubelet really talks to, from /proc: every containerd process with
its config and socket (flags, else the config's grpc.address, else the defaults), and the
kubelet (or kubelite / k3s) with its runtime endpoint and cgroup driver, from its flags,
its args file or its config file."""

# ------------------------------------------------------------------ processes

def processes(proc: str) -> list[dict[str, Any]]:
    """pid, argv, binary (exe link), comm and environment-free cmdline of each process."""
    out = []
    for entry in sorted(os.listdir(proc), key=lambda e: (len(e), e)):
        if not entry.isdigit():
            continue
        base = os.path.join(proc, entry)
        try:
            with open(os.path.join(base, "cmdline"), "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        argv = [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]
        if not argv:
            continue
        exe = None
        with contextlib.suppress(OSError):
            exe = os.readlink(os.path.join(base, "exe")).removesuffix(" (deleted)")
        comm = ""
        with contextlib.suppress(OSError), open(os.path.join(base, "comm")) as handle:
            comm = handle.read().strip()
        out.append({"pid": int(entry), "argv": argv, "exe": exe, "comm": comm})
    return out


def flag(argv: list[str], *names: str) -> str | None:
    """The value of the last `--name value` / `--name=value` / `-n value` in argv."""
    value = None
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                value = argv[index + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1:]
    return value


def _name(p: dict[str, Any]) -> str:
    return os.path.basename(p["exe"] or p["argv"][0])


def is_containerd(p: dict[str, Any]) -> bool:
    return "containerd" in (_name(p), os.path.basename(p["argv"][0]), p["comm"])


def unix_path(endpoint: str) -> str:
    """A socket path from `unix:///x`, `unix://x` or `/x`; /var/run is /run."""
    path = re.sub(r"^unix://", "", endpoint.strip())
    path = os.path.normpath(path)
    return "/run/" + path[len("/var/run/"):] if path.startswith("/var/run/") else path


def daemon_of(p: dict[str, Any], host: Host) -> dict[str, Any]:
    argv = p["argv"]
    config = flag(argv, "--config", "-c")
    address = flag(argv, "--address", "-a")
    record: dict[str, Any] = {
        "pid": p["pid"], "binary": p["exe"] or argv[0], "argv": argv,
        "config": config or DEFAULT_CONFIG, "config_source": "flag" if config else "default",
    }
    if address:
        record.update(address=unix_path(address), address_source="flag")
    else:
        configured = _grpc_address(host, record["config"])
        record.update(address=unix_path(configured or DEFAULT_ADDRESS),
                      address_source="config" if configured else "default")
    return record


def _grpc_address(host: Host, config: str) -> str | None:
    text = host.read(config)
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    grpc = data.get("grpc")
    address = grpc.get("address") if isinstance(grpc, dict) else None
    return address if isinstance(address, str) and address else None


# ------------------------------------------------------------------ kubelet

def is_kubelet(p: dict[str, Any]) -> bool:
    names = {_name(p), os.path.basename(p["argv"][0]), p["comm"]}
    if names & {"kubelet", "kubelite"}:
        return True
    # K3s runs the kubelet inside its own process ("k3s server" / "k3s agent").
    return bool(names & {"k3s", "k3s-server", "k3s-agent"}) and any(
        a in ("server", "agent") for a in p["argv"][1:2])


def kubelet_of(p: dict[str, Any], host: Host) -> dict[str, Any]:
    argv = list(p["argv"])
    args_file = flag(argv, "--kubelet-args-file")
    if args_file:  # MicroK8s' kubelite reads the kubelet's flags from a file
        text = host.read(args_file) or ""
        env = _environ(host.proc, p["pid"])
        argv += [_expand(a, env) for a in text.split()]
    record: dict[str, Any] = {"pid": p["pid"], "argv": p["argv"]}
    endpoint = flag(argv, "--container-runtime-endpoint")
    driver = flag(argv, "--cgroup-driver")
    config_file = flag(argv, "--config")
    record["config_file"] = config_file
    settings = _kubelet_config(host, config_file) if config_file else {}
    if endpoint:
        record["endpoint_source"] = "flag"
    elif settings.get("containerRuntimeEndpoint"):
        endpoint = settings["containerRuntimeEndpoint"]
        record["endpoint_source"] = f"config {config_file}"
    else:
        k3s = {_name(p), p["comm"]} & {"k3s", "k3s-server", "k3s-agent"}
        endpoint = K3S_ADDRESS if k3s else DEFAULT_ADDRESS
        record["endpoint_source"] = "default"
    record["endpoint"] = unix_path(endpoint)
    record["cgroup_driver"] = driver or settings.get("cgroupDriver")
    return record


def _kubelet_config(host: Host, path: str) -> dict[str, str]:
    """Top-level scalar keys of the kubelet's YAML config (no YAML library needed)."""
    found = {}
    for line in (host.read(path) or "").splitlines():
        match = re.match(r"^([A-Za-z]+):\s*['\"]?([^'\"#\s]+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _environ(proc: str, pid: int) -> dict[str, str]:
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (e.decode(errors="replace").partition("=") for e in raw.split(b"\0") if e)
    return {k: v for k, _, v in pairs}


def _expand(arg: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m[1] or m[2], m[0]), arg)
