"""What the daemons read and run: each daemon's config with every file its `imports` match
and the drop-ins beside it, the nvidia runtime binaries those files (and the toolkit's
usual paths) name with the glibc each needs, the host's own glibc and its os-release."""

# ------------------------------------------------------------------ config files

def collect_files(host: Host, config: str, files: dict[str, str], unreadable: list[str]) -> None:
    """The top-level config, every file its imports match (recursively), the TOML files
    in the drop-in directories beside it and the RKE2/K3s templates, by host path."""
    queue = [config]
    base = os.path.dirname(config)
    for sub in DROP_IN_DIRS:
        queue += host.glob(os.path.join(base, sub, "*.toml"))
    queue += host.glob(os.path.join(base, "*.tmpl"))
    seen: set[str] = set()
    while queue and len(files) < MAX_FILES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = host.read(path)
        if text is None:
            if path == config:
                unreadable.append(path)
            continue
        files[path] = text
        for pattern in _imports(text):
            if not pattern.startswith("/"):
                # 1.7+ resolve against the file's directory, 1.6 globs against /: take both.
                candidates = [os.path.join(os.path.dirname(path), pattern), "/" + pattern]
            else:
                candidates = [pattern]
            for candidate in candidates:
                queue += host.glob(os.path.normpath(candidate))


def _imports(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    imports = data.get("imports")
    return [i for i in imports if isinstance(i, str)] if isinstance(imports, list) else []


def binary_names(files: dict[str, str]) -> list[str]:
    """Every BinaryName a runtime's options name in the collected files."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "BinaryName" and isinstance(value, str) and value:
                    found.append(value)
                else:
                    walk(value)

    for text in files.values():
        with contextlib.suppress(tomllib.TOMLDecodeError):
            walk(tomllib.loads(text))
    return found


# ------------------------------------------------------------------ binaries and glibc

def glibc_versions(data: bytes) -> list[str]:
    """GLIBC_x.y symbol versions an ELF file names (what it needs, or libc: provides)."""
    versions = {(int(m[1]), int(m[2])) for m in _GLIBC.finditer(data)}
    return [f"{a}.{b}" for a, b in sorted(versions)]


def inspect_binary(host: Host, path: str) -> dict[str, Any]:
    record: dict[str, Any] = {"path": path, "present": host.isfile(path)}
    if not record["present"]:
        return record
    record["executable"] = host.executable(path)
    data = host.read_bytes(path, ELF_SCAN) or b""
    record["elf"] = data[:4] == b"\x7fELF"
    if record["elf"]:
        needed = glibc_versions(data)
        record["glibc_required"] = needed[-1] if needed else None
    return record


def host_glibc(host: Host) -> dict[str, Any] | None:
    for directory in LIBC_DIRS:
        path = os.path.join(directory, "libc.so.6")
        data = host.read_bytes(path, ELF_SCAN)
        if not data or data[:4] != b"\x7fELF":
            continue
        banner = _GLIBC_BANNER.search(data)
        if banner:
            version = f"{int(banner[1])}.{int(banner[2])}"
        else:
            provided = glibc_versions(data)
            if not provided:
                continue
            version = provided[-1]
        return {"version": version, "path": path, "resolved": host.resolve(path)}
    return None


def os_release(host: Host) -> dict[str, str]:
    text = host.read("/etc/os-release") or host.read("/usr/lib/os-release") or ""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("ID", "VERSION_ID", "PRETTY_NAME", "ID_LIKE"):
            found[key] = value.strip().strip('"')
    return found
