"""The host's filesystem as the program sees it: `Host` reads the host's files under
`--root` (the pod's /host), resolving symlinks against the host's / rather than the pod's,
and runs host commands the way `--exec` allows (nsenter, direct, or not at all). Every
other part reaches the node only through it, which is what lets tests inject a sandbox
root and a fake /proc."""

# ------------------------------------------------------------------ host filesystem

class Host:
    """The host's filesystem seen under `root`, with symlinks resolved inside it."""

    def __init__(self, root: str, proc: str, exec_mode: str, timeout: float):
        self.root = os.path.abspath(root)
        self.proc = proc
        self.exec_mode = exec_mode
        self.timeout = timeout

    def path(self, host_path: str) -> str:
        """Where `host_path` is readable here, following links as the host would."""
        resolved = self.resolve(host_path)
        return os.path.join(self.root, resolved.lstrip("/")) if self.root != "/" else resolved

    def resolve(self, host_path: str, depth: int = 0) -> str:
        """`host_path` with every symlink resolved against the host's /, not ours."""
        if self.root == "/":
            return os.path.realpath(host_path)
        parts = [p for p in os.path.normpath("/" + host_path).split("/") if p]
        done = "/"
        for index, part in enumerate(parts):
            candidate = os.path.join(done, part)
            local = os.path.join(self.root, candidate.lstrip("/"))
            if os.path.islink(local) and depth < 40:
                target = os.readlink(local)
                base = target if target.startswith("/") else os.path.join(done, target)
                rest = "/".join(parts[index + 1:])
                return self.resolve(os.path.normpath(os.path.join(base, rest)), depth + 1)
            done = candidate
        return done

    def read(self, host_path: str, limit: int = MAX_FILE) -> str | None:
        try:
            with open(self.path(host_path), "rb") as handle:
                return handle.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None

    def read_bytes(self, host_path: str, limit: int) -> bytes | None:
        try:
            with open(self.path(host_path), "rb") as handle:
                return handle.read(limit)
        except OSError:
            return None

    def glob(self, pattern: str) -> list[str]:
        """Host paths matching an absolute pattern, sorted (containerd's order)."""
        if self.root == "/":
            return sorted(glob.glob(pattern))
        local = os.path.join(self.root, pattern.lstrip("/"))
        return sorted("/" + os.path.relpath(p, self.root) for p in glob.glob(local))

    def isfile(self, host_path: str) -> bool:
        return os.path.isfile(self.path(host_path))

    def executable(self, host_path: str) -> bool:
        return os.access(self.path(host_path), os.X_OK)

    def run(self, argv: list[str], timeout: float | None = None) -> dict[str, Any]:
        """Run a host command; {"ran": False, "why": ...} when --exec forbids it."""
        if self.exec_mode == "none":
            return {"ran": False, "why": "host commands are off (--exec none)"}
        if self.exec_mode == "nsenter":
            argv = ["nsenter", "-t", "1", "-m", "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout or self.timeout,
                                  check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ran": False, "why": f"{argv[0]}: {exc}"}
        return {"ran": True, "rc": done.returncode,
                "stdout": done.stdout[:MAX_DUMP].decode("utf-8", errors="replace"),
                "stderr": done.stderr[-4000:].decode("utf-8", errors="replace").strip()}
