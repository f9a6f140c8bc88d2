"""A device plugin of the tests' own, speaking the kubelet's device-plugin API v1beta1 to a
real kubelet (tests/support/ns_node.py), so that the node advertises extended resources
such as `nvidia.com/mig-1g.10gb` the way NVIDIA's device plugin does on a MIG node.

The API, as the kubelet 1.34.3 serves it (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1
api.proto and constants.go@v0.34.3): the plugin serves `DevicePlugin` on a unix socket in
the kubelet's device-plugin directory, `/var/lib/kubelet/device-plugins/` (a fixed path,
not under the kubelet's --root-dir: so the plugin needs the node's own mount namespace,
which NsNode gives, and reaches it from outside through `/proc/<holder>/root`), then calls
`Registration.Register` on `kubelet.sock` there with its socket's name and resource name.
The kubelet dials back, streams `ListAndWatch` (every message is the full device list; a
healthy device counts in `status.allocatable`, every device in `status.capacity`) and
calls `Allocate` when it admits a pod asking for the resource.

The stubs are generated from that api.proto in the Go module cache the kubelet was built
from (`$GPUPLANE_CACHE/go/mod`), with grpc_tools.protoc, into
`$GPUPLANE_CACHE/deviceplugin-py/<hash>/`, as oracle.cri_modules does for the CRI: no
generated code enters the repository.
"""

from __future__ import annotations

import hashlib
import queue
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

from support import oracle

KUBELET_MODULE = "k8s.io/kubelet@v0.34.3"
PROTO_REL = "pkg/apis/deviceplugin/v1beta1/api.proto"
VERSION = "v1beta1"
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
_STOP = object()
_MODULES: tuple[ModuleType, ModuleType] | None = None


def proto_path() -> Path:
    return oracle.cache_dir() / "go" / "mod" / KUBELET_MODULE / PROTO_REL


def missing() -> str | None:
    """Why no plugin can run here, or None."""
    if not proto_path().is_file():
        return (f"the device-plugin API {proto_path()} is not in the Go module cache: "
                "run `make test` (scripts/build-oracles.sh kubelet-1.34.3 fetches it)")
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError:
        return "grpcio / grpcio-tools are not installed"
    return None


def modules() -> tuple[ModuleType, ModuleType]:
    """(messages, services) of the v1beta1 API, compiled on first use."""
    global _MODULES
    if _MODULES is not None:
        return _MODULES
    import google.protobuf
    import grpc_tools
    from grpc_tools import protoc

    source = proto_path().read_text()
    key = hashlib.sha256("\0".join([source, google.protobuf.__version__,
                                    getattr(grpc_tools, "__version__", "")]).encode()
                         ).hexdigest()[:16]
    outdir = oracle.cache_dir() / "deviceplugin-py" / key
    if not (outdir / "deviceplugin_v1beta1_pb2_grpc.py").is_file():
        outdir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=outdir.parent))
        (tmp / "deviceplugin_v1beta1.proto").write_text(source)
        include = Path(protoc.__file__).parent / "_proto"
        rc = protoc.main(["grpc_tools.protoc", f"-I{tmp}", f"-I{include}",
                          f"--python_out={tmp}", f"--grpc_python_out={tmp}",
                          str(tmp / "deviceplugin_v1beta1.proto")])
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"grpc_tools.protoc failed ({rc}) on {proto_path()}")
        try:
            tmp.rename(outdir)      # atomic; a concurrent compiler may have won
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    if str(outdir) not in sys.path:
        sys.path.insert(0, str(outdir))
    import deviceplugin_v1beta1_pb2
    import deviceplugin_v1beta1_pb2_grpc

    _MODULES = (deviceplugin_v1beta1_pb2, deviceplugin_v1beta1_pb2_grpc)
    return _MODULES


class DevicePlugin:
    """One resource name, `count` devices (ids `<prefix>-<i>`), served to the kubelet whose
    device-plugin directory is `plugin_dir` (as this process sees it). `set_devices`
    changes the list the kubelet watches; `allocated` records every Allocate."""

    def __init__(self, plugin_dir: Path, resource: str, count: int) -> None:
        self.plugin_dir, self.resource = plugin_dir, resource
        self.endpoint = "gp-" + hashlib.sha256(resource.encode()).hexdigest()[:10] + ".sock"
        self.prefix = resource.rsplit("/", 1)[-1]
        self.devices = self._list(count, 0)
        self.allocated: list[list[str]] = []
        self._watchers: list[queue.Queue[Any]] = []
        self._lock = threading.Lock()
        self._server: Any = None

    def _list(self, healthy: int, unhealthy: int) -> list[tuple[str, str]]:
        return [(f"{self.prefix}-{i}", "Healthy" if i < healthy else "Unhealthy")
                for i in range(healthy + unhealthy)]

    # -- the DevicePlugin service ------------------------------------------------------

    def _servicer(self) -> Any:
        pb, rpc = modules()
        plugin = self

        class Servicer(rpc.DevicePluginServicer):  # type: ignore[name-defined,misc]
            def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
                return pb.DevicePluginOptions()

            def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
                updates: queue.Queue[Any] = queue.Queue()
                with plugin._lock:
                    plugin._watchers.append(updates)
                    devices = list(plugin.devices)
                context.add_callback(lambda: updates.put(_STOP))
                while True:
                    yield pb.ListAndWatchResponse(
                        devices=[pb.Device(ID=i, health=h) for i, h in devices])
                    devices = updates.get()
                    if devices is _STOP:
                        return

            def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
                return pb.PreferredAllocationResponse()

            def Allocate(self, request: Any, context: Any) -> Any:
                responses = []
                for container in request.container_requests:
                    ids = list(container.devices_ids)
                    plugin.allocated.append(ids)
                    responses.append(pb.ContainerAllocateResponse(
                        envs={"GPUPLANE_TEST_DEVICES": ",".join(ids)}))
                return pb.AllocateResponse(container_responses=responses)

            def PreStartContainer(self, request: Any, context: Any) -> Any:
                return pb.PreStartContainerResponse()

        return Servicer()

    def start(self) -> DevicePlugin:
        """Serve, then register with the kubelet."""
        import grpc

        pb, rpc = modules()
        socket = self.plugin_dir / self.endpoint
        socket.unlink(missing_ok=True)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        rpc.add_DevicePluginServicer_to_server(self._servicer(), self._server)
        self._server.add_insecure_port(f"unix:{socket}")
        self._server.start()
        with grpc.insecure_channel(f"unix:{self.plugin_dir / 'kubelet.sock'}") as channel:
            rpc.RegistrationStub(channel).Register(pb.RegisterRequest(
                version=VERSION, endpoint=self.endpoint, resource_name=self.resource,
                options=pb.DevicePluginOptions()), timeout=30)
        return self

    def set_devices(self, healthy: int, unhealthy: int = 0) -> None:
        """The device list the kubelet sees from now on."""
        with self._lock:
            self.devices = self._list(healthy, unhealthy)
            for watcher in self._watchers:
                watcher.put(list(self.devices))

    def stop(self) -> None:
        with self._lock:
            for watcher in self._watchers:
                watcher.put(_STOP)
        if self._server is not None:
            self._server.stop(grace=1).wait(5)
            self._server = None
        (self.plugin_dir / self.endpoint).unlink(missing_ok=True)


__all__ = ["PLUGIN_DIR", "DevicePlugin", "missing", "modules"]
