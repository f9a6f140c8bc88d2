"""A real Kubernetes control plane on 127.0.0.1 for the tests that run the Pulumi engine.

etcd is Debian's `etcd-server` (scripts/fetch-containerd.sh installs it);
kube-apiserver, kube-controller-manager and kube-scheduler are built from
`k8s.io/kubernetes` by scripts/build-oracles.sh (tests/builds/kubernetes-1.34.3), with the
version stamped so `/version` is what a real cluster of that release reports (the
kubernetes provider refuses an apiserver that says v0.0.0).

Each start makes its own certificates (a CA, the serving certificate for 127.0.0.1, an
admin client in `system:masters`, one client per controller with its own identity) and
its own data dir, runs with RBAC on and stops every process by PID. No kubelet of its own:
tests/support/kubelet_node.py adds a real node where a test needs one; elsewhere pods stay Pending
(`helm_hooks_succeed` stands in for the kubelet where a chart's uninstall hook would
otherwise wait for one).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_BUILD = "kubernetes-1.34.3"
KUBERNETES_VERSION = "v1.34.3"
CACHE = Path(os.environ.get("GPUPLANE_CACHE", Path.home() / ".cache" / "gpuplane"))
BIN = CACHE / "builds" / KUBERNETES_BUILD / "bin"


def missing() -> str | None:
    """Why no control plane can start here, or None."""
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        if not (BIN / name).exists():
            return f"{BIN / name} is not built: run `make containerd` (scripts/build-oracles.sh)"
    if shutil.which("etcd") is None:
        return ("no etcd on PATH: run `make containerd` "
                "(scripts/fetch-containerd.sh installs etcd-server)")
    if shutil.which("openssl") is None:
        return "no openssl on PATH (the control plane's certificates are made with it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def cert(pki: Path, name: str, subject: str, *, server: bool = False) -> None:
    """An EC key and a certificate for `subject` signed by the run's CA."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    ext = pki / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
                   "extendedKeyUsage=serverAuth\n" if server else
                   "extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", ext.name, cwd=pki)


def kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {
            "server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(pki / f"{user}.crt"),
            "client-key": str(pki / f"{user}.key")}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
    }, indent=1))


@dataclass
class ControlPlane:
    """The running processes and how to reach them."""

    root: Path
    server: str
    kubeconfig: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def raw(self, path: str) -> bytes:
        """GET `path` from the apiserver as the admin."""
        pki = self.root / "pki"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        with urllib.request.urlopen(self.server + path, context=ctx, timeout=10) as r:
            return bytes(r.read())

    def get(self, path: str) -> object:
        """GET `path` from the apiserver as the admin (JSON)."""
        return json.loads(self.raw(path))

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")[-4000:]

    def explain(self, namespace: str) -> str:
        """The pods of `namespace` and the nodes as the API server has them, whether each
        process still runs, and the scheduler's and the controller-manager's last lines.
        Attached to a failed assertion, it tells a pod that was never made, one never
        scheduled and one never started apart."""
        from kubernetes import client, config

        lines = [f"{name}: {'running' if p.poll() is None else f'exited {p.returncode}'}"
                 for name, p in self.procs.items()]
        try:
            core = client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))
            for pod in core.list_namespaced_pod(namespace).items:
                conditions = [f"{c.type}={c.status} {c.reason or ''}".strip()
                              for c in pod.status.conditions or []]
                lines.append(f"pod {pod.metadata.name}: {pod.status.phase} on "
                             f"{pod.spec.node_name} since {pod.metadata.creation_timestamp}: "
                             f"{conditions}")
            for node in core.list_node().items:
                ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
                taints = [t.key for t in node.spec.taints or []]
                lines.append(f"node {node.metadata.name}: Ready={ready} taints={taints} "
                             f"allocatable={node.status.allocatable}")
        except Exception as error:      # a report: the failure is the test's
            lines.append(f"the API server did not answer: {error}")
        for name in ("kube-scheduler", "kube-controller-manager"):
            lines += [f"--- {name}.log (last lines)", self.log(name)[-1500:]]
        return "\n".join(lines)

    def stop(self) -> None:
        """Stop every process by its PID, newest first (etcd last, so the apiserver can
        finish its requests); kill what does not exit in 15 s."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, however it dies
    (prctl PR_SET_PDEATHSIG), so a killed test run leaves no control plane behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def _spawn(cp: ControlPlane, name: str, argv: list[str]) -> None:
    log = open(cp.root / f"{name}.log", "wb")  # noqa: SIM115 - owned by the process
    cp.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True,
                                      preexec_fn=die_with_parent)


def _wait(cp: ControlPlane, name: str, ready: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if cp.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited {cp.procs[name].returncode}:\n{cp.log(name)}")
        try:
            if callable(ready) and ready():
                return
        except Exception as e:
            last = e
        time.sleep(0.5)
    raise RuntimeError(f"{name} not ready in {timeout:.0f} s ({last}):\n{cp.log(name)}")


def start(root: Path) -> ControlPlane:
    """Start etcd, kube-apiserver, kube-controller-manager and kube-scheduler under `root`."""
    pki = root / "pki"
    pki.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=gpuplane-test-ca",
             "-days", "2", cwd=pki)
    cert(pki, "apiserver", "/CN=kube-apiserver", server=True)
    cert(pki, "admin", "/O=system:masters/CN=gpuplane-test-admin")
    cert(pki, "controller-manager", "/CN=system:kube-controller-manager")
    cert(pki, "scheduler", "/CN=system:kube-scheduler")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)

    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    cp = ControlPlane(root=root, server=server, kubeconfig=root / "admin.kubeconfig")
    for user in ("admin", "controller-manager", "scheduler"):
        kubeconfig(root / f"{user}.kubeconfig", server, pki, user)
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    try:
        _spawn(cp, "etcd", [
            "etcd", "--name", "test", "--data-dir", str(root / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync"])

        def etcd_ready() -> bool:
            with urllib.request.urlopen(etcd_url + "/health", timeout=2) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        _wait(cp, "etcd", etcd_ready, 30)

        _spawn(cp, "kube-apiserver", [
            str(BIN / "kube-apiserver"), "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(api_port), "--cert-dir", str(root / "apiserver-certs"),
            "--tls-cert-file", str(pki / "apiserver.crt"),
            "--tls-private-key-file", str(pki / "apiserver.key"),
            "--client-ca-file", str(pki / "ca.crt"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--authorization-mode", "Node,RBAC", "--allow-privileged=true",
            # A test node's name does not resolve: reach kubelets at their InternalIP.
            "--kubelet-preferred-address-types", "InternalIP"])
        _wait(cp, "kube-apiserver", lambda: cp.raw("/readyz") == b"ok", 90)
        _spawn(cp, "kube-controller-manager", [
            str(BIN / "kube-controller-manager"),
            "--kubeconfig", str(root / "controller-manager.kubeconfig"),
            "--service-account-private-key-file", str(pki / "sa.key"),
            "--root-ca-file", str(pki / "ca.crt"),
            "--cluster-signing-cert-file", str(pki / "ca.crt"),
            "--cluster-signing-key-file", str(pki / "ca.key"),
            "--use-service-account-credentials=true", "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", "0"])
        _spawn(cp, "kube-scheduler", [
            str(BIN / "kube-scheduler"), "--kubeconfig", str(root / "scheduler.kubeconfig"),
            "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", str(free_port())])
        # The controller-manager is up once it has made the default namespace's
        # service-account token machinery work: the `default` ServiceAccount exists.
        _wait(cp, "kube-controller-manager",
              lambda: cp.get("/api/v1/namespaces/default/serviceaccounts/default"), 60)
    except BaseException:
        cp.stop()
        raise
    return cp


@contextlib.contextmanager
def helm_hooks_succeed(cp: ControlPlane, *namespaces: str) -> Iterator[None]:
    """Play the missing kubelet's part for Helm hook Jobs in `namespaces`: their pods are
    marked Succeeded, so a hook (the GPU Operator chart's node-feature-discovery `prune`
    Job at `helm uninstall`, HAMi's webhook-certificate Jobs at install) completes instead
    of holding the release until Helm's timeout. Only Jobs carrying a `helm.sh/hook`
    annotation; a real node comes with the real-node tests."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(cp.kubeconfig))
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    stop = threading.Event()

    def complete(namespace: str) -> None:
        hooks = {j.metadata.name for j in batch.list_namespaced_job(namespace).items
                 if "helm.sh/hook" in (j.metadata.annotations or {})}
        for pod in core.list_namespaced_pod(namespace).items:
            job = (pod.metadata.labels or {}).get("batch.kubernetes.io/job-name")
            if job in hooks and pod.status.phase == "Pending":
                core.patch_namespaced_pod_status(
                    pod.metadata.name, namespace, {"status": {"phase": "Succeeded"}})

    def run() -> None:
        while not stop.wait(1.0):
            for namespace in namespaces:
                with contextlib.suppress(Exception):   # not there yet, or going away
                    complete(namespace)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
