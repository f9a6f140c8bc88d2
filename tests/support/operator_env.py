"""The env the GPU Operator gives its toolkit container on a containerd node, per chart
tag: the test suite's own reading of the operator's code, written apart from gpuplane's
model (gpuplane.toolkit.operator) so that tests compare two readings, not one.

Read at the tags below from NVIDIA/gpu-operator (the chart tag is the operator's tag):

- `assets/state-container-toolkit/0500_daemonset.yaml`, container
  `nvidia-container-toolkit-ctr`: its env list is where the operator starts. Every tag:
  `ROOT=/usr/local/nvidia`, `NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND=
  management.nvidia.com/gpu`, `NVIDIA_VISIBLE_DEVICES=void`. `RUNTIME_ARGS=""` (second
  entry) @v24.3.0 … @v24.9.2, dropped @v25.3.0. `TOOLKIT_PID_FILE=/run/nvidia/toolkit/
  toolkit.pid` from @v24.6.2 (not @v24.3.0). `NRI_NAMESPACE` (valueFrom, the pod's
  namespace) from @v26.3.0 — left out here, it is not a literal.
- `controllers/object_controls.go`, `TransformToolkit` and `transformForRuntime` (plus
  `getRuntimeConfigFile` @≤v25.3.4 / `getRuntimeConfigFiles` @≥v25.10.0,
  `getRuntimeSocketFile`, `setContainerEnv`: replace by name, else append, value only):
  * `toolkit.env` loop before the `config.CDI.IsEnabled()` block @v24.3.0 … @v25.3.2
    (object_controls.go@v25.3.2 l.1257 loop, l.1263 CDI), after it from @v25.3.3
    (@v25.3.3 l.1257 CDI, l.1302 loop; @v25.10.1 l.1280 CDI, l.1325 loop).
  * CDI block @≤v25.3.4: `CDI_ENABLED=true`, `NVIDIA_CONTAINER_RUNTIME_MODES_CDI_
    ANNOTATION_PREFIXES=nvidia.cdi.k8s.io/`, `CRIO_CONFIG_MODE=config`, and
    `NVIDIA_CONTAINER_RUNTIME_MODE=cdi` only if `cdi.default` (chart default false;
    gpuplane does not set it). @≥v25.10.0 `transformToolkitCtrForCDI`: `CDI_ENABLED=true`,
    `NVIDIA_RUNTIME_SET_AS_DEFAULT=false`, `NVIDIA_CONTAINER_RUNTIME_MODE=cdi`,
    `CRIO_CONFIG_MODE=config` (+ `ENABLE_NRI_PLUGIN` with `cdi.nriPluginEnabled`, off).
  * then `RUNTIME=containerd`, `CONTAINERD_RUNTIME_CLASS=<operator.runtimeClass or
    "nvidia">` (`getRuntimeClass[Name]`).
  * top-level config: host file = `CONTAINERD_CONFIG` if non-empty, else (@≥v25.10.0
    only) `RUNTIME_CONFIG` if non-empty, else `/etc/containerd/config.toml`; its dir is
    mounted at `/runtime/config-dir/` and `CONTAINERD_CONFIG` (and from @v24.9.0
    `RUNTIME_CONFIG`) set to `/runtime/config-dir/<file name>`.
  * drop-in (@≥v25.10.0): host file = `RUNTIME_DROP_IN_CONFIG` if non-empty, else
    `/etc/containerd/conf.d/99-nvidia.toml`; dir mounted at `/runtime/config-dir.d/`,
    `RUNTIME_DROP_IN_CONFIG=/runtime/config-dir.d/<name>`,
    `RUNTIME_DROP_IN_CONFIG_HOST_PATH=<host file>`. Before: neither touched nor mounted.
  * `RUNTIME_CONFIG_SOURCE` (@≥v25.10.0): each `file=<p>` becomes `file=/host<p>`
    (the host root is mounted read-only at `/host`). Before: untouched.
  * socket: host = `CONTAINERD_SOCKET` if non-empty, else `/run/containerd/
    containerd.sock`; dir mounted at `/runtime/sock-dir/`; `CONTAINERD_SOCKET` (and from
    @v24.9.0 `RUNTIME_SOCKET`) = `/runtime/sock-dir/<name>`.

Tags read: v24.3.0, v24.6.2, v24.9.0, v24.9.1, v24.9.2, v25.3.0, v25.3.1, v25.3.2,
v25.3.3, v25.3.4, v25.10.0, v25.10.1, v26.3.0, v26.3.1, v26.3.2, v26.3.3, v26.7.0
(/work/notes/operator-env.md has the table with line numbers). The container runs
`/bin/entrypoint.sh` (ConfigMap `0400_configmap.yaml`), which ends in `exec
nvidia-toolkit` at every tag.

`operator_env` returns the env with every container path mapped back to the host path
it mounts, i.e. in node paths.
"""

from __future__ import annotations

# chart tag -> (base env has RUNTIME_ARGS, has TOOLKIT_PID_FILE, sets RUNTIME_CONFIG and
# RUNTIME_SOCKET, toolkit.env after the CDI block, v25.10 handling: drop-in, config
# source, RUNTIME_CONFIG fallback, the new CDI block)
_TAGS: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "v24.3.0": (True, False, False, False, False),
    "v24.6.2": (True, True, False, False, False),
    "v24.9.0": (True, True, True, False, False),
    "v24.9.1": (True, True, True, False, False),
    "v24.9.2": (True, True, True, False, False),
    "v25.3.0": (False, True, True, False, False),
    "v25.3.1": (False, True, True, False, False),
    "v25.3.2": (False, True, True, False, False),
    "v25.3.3": (False, True, True, True, False),
    "v25.3.4": (False, True, True, True, False),
    "v25.10.0": (False, True, True, True, True),
    "v25.10.1": (False, True, True, True, True),
    "v26.3.0": (False, True, True, True, True),
    "v26.3.1": (False, True, True, True, True),
    "v26.3.2": (False, True, True, True, True),
    "v26.3.3": (False, True, True, True, True),
    "v26.7.0": (False, True, True, True, True),
}
TAGS = tuple(_TAGS)

_CONFIG_DIR = "/runtime/config-dir/"
_DROPIN_DIR = "/runtime/config-dir.d/"
_SOCKET_DIR = "/runtime/sock-dir/"


class _Container:
    """The toolkit container's env list, with the operator's get/setContainerEnv."""

    def __init__(self, env: list[tuple[str, str]]) -> None:
        self.env = list(env)

    def get(self, name: str) -> str:
        return next((v for n, v in self.env if n == name), "")

    def set(self, name: str, value: str) -> None:
        for i, (n, _) in enumerate(self.env):
            if n == name:
                self.env[i] = (name, value)
                return
        self.env.append((name, value))


def operator_env(chart: str, toolkit_env: list[dict[str, str]], *, cdi: bool,
                 runtime_class: str) -> dict[str, str]:
    """The toolkit container's env under chart `chart` (a tag such as "v25.3.4") for the
    chart values `toolkit.env`, `cdi.enabled` and `operator.runtimeClass`, in node paths."""
    tag = chart if chart.startswith("v") else f"v{chart}"
    if tag not in _TAGS:
        raise KeyError(f"operator env not read for chart {chart!r} (read: {', '.join(TAGS)})")
    runtime_args, pid_file, runtime_config_env, env_after_cdi, v25_10 = _TAGS[tag]
    base = [("ROOT", "/usr/local/nvidia")]
    if runtime_args:
        base.append(("RUNTIME_ARGS", ""))
    base += [("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
             ("NVIDIA_VISIBLE_DEVICES", "void")]
    if pid_file:
        base.append(("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"))
    ctr = _Container(base)
    mounts: dict[str, str] = {}   # container dir -> host dir

    def user_env() -> None:
        for entry in toolkit_env:
            ctr.set(entry["name"], entry.get("value", ""))

    def cdi_block() -> None:
        if not cdi:
            return
        if v25_10:
            ctr.set("CDI_ENABLED", "true")
            ctr.set("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false")
            ctr.set("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi")
            ctr.set("CRIO_CONFIG_MODE", "config")
        else:
            ctr.set("CDI_ENABLED", "true")
            ctr.set("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES",
                    "nvidia.cdi.k8s.io/")
            ctr.set("CRIO_CONFIG_MODE", "config")
            # NVIDIA_CONTAINER_RUNTIME_MODE=cdi only with cdi.default (false here)

    if env_after_cdi:
        cdi_block()
        user_env()
    else:
        user_env()
        cdi_block()

    ctr.set("RUNTIME", "containerd")
    ctr.set("CONTAINERD_RUNTIME_CLASS", runtime_class or "nvidia")
    top = ctr.get("CONTAINERD_CONFIG") or (ctr.get("RUNTIME_CONFIG") if v25_10 else "") \
        or "/etc/containerd/config.toml"
    dropin = (ctr.get("RUNTIME_DROP_IN_CONFIG") or "/etc/containerd/conf.d/99-nvidia.toml") \
        if v25_10 else ""
    name = top.rsplit("/", 1)[1]
    if runtime_config_env:
        ctr.set("RUNTIME_CONFIG", _CONFIG_DIR + name)
    ctr.set("CONTAINERD_CONFIG", _CONFIG_DIR + name)
    mounts[_CONFIG_DIR] = top.rsplit("/", 1)[0] + "/"
    if dropin:
        ctr.set("RUNTIME_DROP_IN_CONFIG", _DROPIN_DIR + dropin.rsplit("/", 1)[1])
        ctr.set("RUNTIME_DROP_IN_CONFIG_HOST_PATH", dropin)
        mounts[_DROPIN_DIR] = dropin.rsplit("/", 1)[0] + "/"
    if v25_10 and ctr.get("RUNTIME_CONFIG_SOURCE"):
        ctr.set("RUNTIME_CONFIG_SOURCE", ",".join(
            f"file=/host{s[5:]}" if s.startswith("file=") else s
            for s in ctr.get("RUNTIME_CONFIG_SOURCE").split(",")))
    socket = ctr.get("CONTAINERD_SOCKET") or "/run/containerd/containerd.sock"
    if runtime_config_env:
        ctr.set("RUNTIME_SOCKET", _SOCKET_DIR + socket.rsplit("/", 1)[1])
    ctr.set("CONTAINERD_SOCKET", _SOCKET_DIR + socket.rsplit("/", 1)[1])
    mounts[_SOCKET_DIR] = socket.rsplit("/", 1)[0] + "/"
    return {n: _to_node(v, mounts, host_root=v25_10) for n, v in ctr.env}


def _to_node(value: str, mounts: dict[str, str], *, host_root: bool) -> str:
    """A container path under one of the operator's mounts as the host path it shows."""
    parts = []
    for item in value.split(","):
        prefix = "file=" if item.startswith("file=") else ""
        path = item[len(prefix):]
        for inside, host in mounts.items():
            if path.startswith(inside):
                path = host + path[len(inside):]
                break
        else:
            if prefix and host_root and path.startswith("/host/"):
                path = path[len("/host"):]
        parts.append(prefix + path)
    return ",".join(parts)


__all__ = ["TAGS", "operator_env"]
