"""The CRI probe: start a host-network pod sandbox with the `nvidia` runtime handler on the
kubelet's containerd, then stop and remove it. It speaks gRPC itself where the image has
grpcio (the few protobuf messages are encoded here by hand, no generated code), else runs
the host's crictl; without either it reports `not-probed` and why."""

# ------------------------------------------------------------------ CRI probe

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes | str | int) -> bytes:
    """One protobuf field: a length-delimited string/message or a varint."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _fields(data: bytes) -> dict[int, list[Any]]:
    """Decode one protobuf message's top-level fields (varints and byte strings)."""
    out: dict[int, list[Any]] = {}
    index = 0

    def varint() -> int:
        nonlocal index
        shift = value = 0
        while True:
            byte = data[index]
            index += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while index < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.setdefault(number, []).append(varint())
        elif wire == 2:
            size = varint()
            out.setdefault(number, []).append(data[index:index + size])
            index += size
        else:
            break
    return out


NODE_NETWORK = 2  # runtime.v1.NamespaceMode.NODE: no CNI needed for the probe sandbox


def sandbox_config(name: str, cgroup_parent: str) -> bytes:
    """runtime.v1.PodSandboxConfig: host network, the given cgroup parent."""
    uid = uuid.uuid4().hex[:12]
    metadata = _field(1, name) + _field(2, uid) + _field(3, "kube-system")
    security = _field(1, _field(1, NODE_NETWORK))
    linux = _field(1, cgroup_parent) + _field(2, security)
    return _field(1, metadata) + _field(8, linux)


def probe_grpc(socket_path: str, handler: str, cgroup_parent: str,
               timeout: float) -> dict[str, Any]:
    import grpc  # only present in images that ship grpcio

    service = "/runtime.v1.RuntimeService/"
    result: dict[str, Any] = {"method": "grpc", "handler": handler, "socket": socket_path,
                              "cgroup_parent": cgroup_parent}
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        def call(method: str, request: bytes) -> bytes:
            # No (de)serializers: the messages are encoded by hand, bytes in and out.
            rpc: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                service + method)
            return rpc(request, timeout=timeout)

        try:
            version = _fields(call("Version", _field(1, "v1")))
            result["runtime"] = {
                "name": _text(version, 2), "version": _text(version, 3),
                "api_version": _text(version, 4)}
            request = _field(1, sandbox_config("gpuplane-cri-probe", cgroup_parent))
            request += _field(2, handler)
            sandbox = _text(_fields(call("RunPodSandbox", request)), 1)
        except grpc.RpcError as exc:
            result.update(status="failed", error=exc.details() or exc.code().name,
                          code=exc.code().name)
            return result
        result.update(status="ok", sandbox_id=sandbox)
        try:
            call("StopPodSandbox", _field(1, sandbox))
            call("RemovePodSandbox", _field(1, sandbox))
        except grpc.RpcError as exc:
            result["cleanup_error"] = exc.details() or exc.code().name
    return result


def _text(fields: dict[int, list[Any]], number: int) -> str:
    values = fields.get(number) or [b""]
    return values[0].decode("utf-8", errors="replace")


def probe_crictl(host: Host, crictl: str, socket_path: str, handler: str,
                 cgroup_parent: str) -> dict[str, Any]:
    """`crictl runp --runtime <handler>` with a host-network sandbox, then stopp/rmp."""
    config = {
        "metadata": {"name": "gpuplane-cri-probe", "namespace": "kube-system",
                     "uid": uuid.uuid4().hex[:12], "attempt": 0},
        "linux": {"cgroup_parent": cgroup_parent,
                  "security_context": {"namespace_options": {"network": NODE_NETWORK}}},
    }
    result: dict[str, Any] = {"method": "crictl", "crictl": crictl, "handler": handler,
                              "socket": socket_path, "cgroup_parent": cgroup_parent}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config, handle)
    try:
        # In the host's mount namespace our /tmp is reachable through /proc/<pid>/root.
        path = (f"/proc/{os.getpid()}/root{handle.name}" if host.exec_mode == "nsenter"
                else handle.name)
        base = [crictl, "--runtime-endpoint", f"unix://{socket_path}", "--timeout", "60s"]
        run = host.run([*base, "runp", "--runtime", handler, path], timeout=90)
    finally:
        os.unlink(handle.name)
    if not run["ran"]:
        return {**result, "status": "not-probed", "why": run["why"]}
    if run["rc"] != 0:
        return {**result, "status": "failed", "error": run["stderr"] or run["stdout"].strip()}
    sandbox = run["stdout"].strip().splitlines()[-1] if run["stdout"].strip() else ""
    result.update(status="ok", sandbox_id=sandbox)
    for verb in ("stopp", "rmp"):
        done = host.run([*base, verb, sandbox], timeout=90)
        if done.get("rc"):
            result["cleanup_error"] = done["stderr"]
    return result


def cri_probe(host: Host, daemon: dict[str, Any] | None, args: argparse.Namespace,
              dump: dict[str, Any] | None, kubelet: dict[str, Any] | None) -> dict[str, Any]:
    if not args.cri_probe:
        return {"status": "not-probed", "why": "the CRI probe is off (--no-cri-probe)"}
    if daemon is None:
        return {"status": "not-probed", "why": "no containerd daemon serves the kubelet"}
    parent = args.cgroup_parent or _cgroup_parent(dump, kubelet, args.handler)
    method = args.cri_method
    if method in ("auto", "grpc"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            if method == "grpc":
                return {"status": "not-probed", "why": "python module grpc is not installed"}
        else:
            return probe_grpc(host.path(daemon["address"]), args.handler, parent,
                              args.timeout)
    crictl = _find_crictl(host)
    if crictl is None:
        return {"status": "not-probed",
                "why": "no grpc module in this image and no crictl on the host"}
    return probe_crictl(host, crictl, daemon["address"], args.handler, parent)


def _find_crictl(host: Host) -> str | None:
    if host.exec_mode == "none":
        return None
    if host.exec_mode == "direct":
        found = shutil.which("crictl")
        if found:
            return found
    return next((p for p in CRICTL_PATHS if host.executable(p)), None)


def _cgroup_parent(dump: dict[str, Any] | None, kubelet: dict[str, Any] | None,
                   handler: str) -> str:
    """A parent the runtime accepts: a systemd slice when the handler's runc uses the
    systemd cgroup driver (the field report's crictl test failed without one)."""
    systemd = None
    if dump and dump.get("ok"):
        with contextlib.suppress(tomllib.TOMLDecodeError):
            plugins = tomllib.loads(dump["stdout"]).get("plugins", {})
            for key in ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"):
                runtime = (plugins.get(key, {}).get("containerd", {})
                           .get("runtimes", {}).get(handler))
                if isinstance(runtime, dict):
                    systemd = bool((runtime.get("options") or {}).get("SystemdCgroup"))
                    break
    if systemd is None and kubelet:
        systemd = kubelet.get("cgroup_driver") == "systemd"
    return "gpuplane-probe.slice" if systemd else "/gpuplane-probe"
