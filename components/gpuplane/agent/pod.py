"""The node agent run from a pod (`cluster.nodeAccess: pod`): no SSH, the same agent.

One short-lived pod per node and run, pinned by `nodeName`, privileged with `hostPID`:
its container enters the host's namespaces (`nsenter -t 1 -m -u -i -n -p`) and runs the
agent there with the host's own shell, `sha256sum`, `systemctl` and containerd, exactly
as the SSH command runs it as root. (`chroot /host` would not do: `systemctl` refuses to
act from a chroot, and the agent restarts containerd through it.) The agent program (the
plan with the agent embedded, :func:`gpuplane.agent.script.embedded_program`) reaches the pod in
a ConfigMap made for the run and deleted after it, and enters the host on stdin.

Where the agent runs matters for the restart: the pod's container runs under a
containerd shim. A real node's `containerd.service` has `KillMode=process`, so its
restart keeps the shims and the pod lives through it. Where a restart does take the shims
down (another unit file, a sandbox), the agent is killed mid-transaction like any crash:
its write-ahead journal makes the next run converge (the crash suite, tests/
test_agent_faults.py, kills it at every step), so :func:`run_agent_pod`'s caller runs the
pod again when one ended without the agent's verdict.

Pure: manifests and the run against a `ClusterClient` (gpuplane.kube.client); the Pulumi
resource is gpuplane.stack.node_pod.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplane.agent.script import restore_script, status_script
from gpuplane.core.psa import PSA_ENFORCE, psa_problem
from gpuplane.kube.client import ApiError, ClusterClient

DEFAULT_IMAGE = "busybox:1.36"   # needs only sh and nsenter
LABELS = {"app.kubernetes.io/name": "gpuplane", "app.kubernetes.io/component": "node-agent"}
PROGRAM_DIR = "/gpuplane"
PROGRAM_KEY = "program"
NSENTER = ("-m", "-u", "-i", "-n", "-p")
# Exit codes of a pod that ended without the agent's verdict: killed (SIGKILL: 137,
# SIGTERM: 143), or its container lost (no exit code).
KILLED = frozenset({137, 143})


def pod_name(node: str, mode: str) -> str:
    """Stable per node and mode: a leftover of an interrupted run is found and replaced."""
    return f"gpuplane-agent-{hashlib.sha256(node.encode()).hexdigest()[:10]}-{mode}"


def rbac_needs(namespace: str) -> list[str]:
    """What the stack's credentials must be allowed, as the plan lists it."""
    return [f"create, get, delete pods in namespace {namespace}",
            f"get pods/log in namespace {namespace}",
            f"create, get, delete configmaps in namespace {namespace}",
            f"Pod Security: namespace {namespace} admits privileged pods with hostPID "
            f"({PSA_ENFORCE}: privileged)"]


def rejection(exc: ApiError, namespace: str) -> str:
    """The API's refusal of the agent's pod, as what to do about it."""
    text = str(exc)
    if exc.status == 403 and "PodSecurity" in text:
        return (f"the API server rejected the node agent's pod in namespace {namespace}: "
                f"{text}. Fix: label the namespace {PSA_ENFORCE}=privileged, or set "
                "gpuplane:nodePod.namespace to a namespace that admits privileged pods")
    if exc.status == 403:
        return (f"forbidden: the stack's credentials need permission to {exc.permission} "
                f"({text})")
    if exc.status == 404 and "namespaces" in text:
        return f"namespace {namespace} does not exist ({text}); create it or set " \
               "gpuplane:nodePod.namespace"
    return text


def agent_pod(node: str, mode: str, *, namespace: str, image: str = DEFAULT_IMAGE,
              timeout_s: int = 600, plan_id: str | None = None,
              agent_args: Sequence[str] = (), root: str = "",
              host_pid: int = 1, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The pod that runs the agent's `mode` (apply, restore or status) on `node`.

    apply reads its program from the ConfigMap :func:`program_configmap` (same name as the
    pod); status (:func:`gpuplane.agent.script.status_script`) and restore run the agent the node
    keeps (restore: :func:`gpuplane.agent.script.restore_script`,
    only if `plan_id` is still applied). `agent_args`, `root` and `host_pid` are for
    sandboxes (tests, benchmarks): the agent's extra options, the node's / and the process
    whose namespaces stand for the host's; `env` reaches the agent (nsenter keeps it: the
    fault suite's failpoints)."""
    enter = shlex.join(["nsenter", "-t", str(host_pid), *NSENTER, "--"])
    if mode == "apply":
        script = (f"exec {enter} sh -s -- apply {shlex.join(agent_args)} "
                  f"<{PROGRAM_DIR}/{PROGRAM_KEY}")
    elif mode in ("restore", "status"):
        inner = restore_script(plan_id, root=root, agent_args=tuple(agent_args)) \
            if mode == "restore" else status_script(root=root, agent_args=tuple(agent_args))
        script = f"exec {enter} sh -c {shlex.quote(inner)}"
    else:
        raise ValueError(f"agent pod: mode {mode!r} is not apply, restore or status")
    name = pod_name(node, mode)
    container: dict[str, Any] = {
        "name": "agent", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    spec: dict[str, Any] = {
        "nodeName": node, "hostPID": True, "restartPolicy": "Never",
        "automountServiceAccountToken": False, "enableServiceLinks": False,
        "activeDeadlineSeconds": timeout_s,
        # The agent bounds its own steps; a kill while it writes is what its journal is for.
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"operator": "Exists"}],
        "containers": [container],
    }
    if mode == "apply":
        container["volumeMounts"] = [{"name": "program", "mountPath": PROGRAM_DIR,
                                      "readOnly": True}]
        spec["volumes"] = [{"name": "program", "configMap": {"name": name}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS),
                         "annotations": {"gpuplane.dev/node": node,
                                         "gpuplane.dev/plan-id": plan_id or ""}},
            "spec": spec}


def program_configmap(pod: Mapping[str, Any], program: str) -> dict[str, Any]:
    """The apply pod's program, in a ConfigMap of the pod's name and namespace."""
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "labels": dict(LABELS)},
            "data": {PROGRAM_KEY: program}}


PLAN_PREFIX = "gpuplane-plan-"


def plan_configmap_name(plan_id: str, program: str) -> str:
    """The ConfigMap that holds one distinct plan's program for every node that shares
    it: named by the plan id and the program's digest, so a changed program (another agent
    version for the same plan) is a new ConfigMap and a change of each node using it."""
    return f"{PLAN_PREFIX}{plan_id}-{_digest(program)}"


def plan_configmap(name: str, namespace: str, program: str) -> dict[str, Any]:
    """That ConfigMap's manifest (immutable: its name says what it holds)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
            "data": {PROGRAM_KEY: program}, "immutable": True}


def read_plan_program(client: ClusterClient, namespace: str, name: str) -> str:
    """The program of the plan ConfigMap `name`, checked against the digest its name
    carries. Raises PodFailed (nothing ran) when it is missing or holds something else."""
    where = f"ConfigMap {namespace}/{name}"
    try:
        data = client.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}").get("data")
    except ApiError as exc:
        if exc.status == 404:
            raise PodFailed(f"the node agent's plan {where} does not exist (deleted outside "
                            "Pulumi?); run `pulumi up --refresh` to create it again") from None
        raise PodFailed(rejection(exc, namespace)) from None
    program = (data or {}).get(PROGRAM_KEY)
    if not isinstance(program, str) or not name.endswith(f"-{_digest(program)}"):
        raise PodFailed(f"the node agent's plan {where} does not hold the program its name "
                        "says (changed outside Pulumi?); delete it and run `pulumi up "
                        "--refresh` to create it again")
    return program


def _digest(program: str) -> str:
    return hashlib.sha256(program.encode()).hexdigest()[:12]


@dataclass
class PodRun:
    """One agent pod's end: the agent's exit code (None: the pod ended without one), its
    JSON result (the last `{` line of the log), the log, and the pod's phase."""

    rc: int | None
    out: dict[str, Any] = field(default_factory=dict)
    log: str = ""
    phase: str = ""

    @property
    def verdict(self) -> bool:
        """The agent ended on its own (an exit code that is no kill)."""
        return self.rc is not None and self.rc not in KILLED

    def tail(self, lines: int = 8) -> str:
        return " | ".join(self.log.strip().splitlines()[-lines:]) or "(no log)"


class PodFailed(Exception):
    """The agent's pod could not run (the API refused it, it never started, timed out).
    `started`: whether its container may have run the agent (a timeout; an API error
    while it ran), so that the node may hold a change."""

    def __init__(self, message: str, *, started: bool = False) -> None:
        super().__init__(message)
        self.started = started


def run_agent_pod(client: ClusterClient, pod: dict[str, Any], program: str | None = None,
                  *, timeout_s: float = 600, poll_s: float = 2.0,
                  clock: Any = time.monotonic, sleep: Any = time.sleep) -> PodRun:
    """Create the pod (and its program's ConfigMap), wait for its end, read its exit code
    and log, and delete both whatever happens. Raises PodFailed with what to do."""
    meta = pod["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    pods, maps = (f"/api/v1/namespaces/{namespace}/pods",
                  f"/api/v1/namespaces/{namespace}/configmaps")
    try:
        client.delete(f"{pods}/{name}")
        if program is not None:
            client.delete(f"{maps}/{name}")
            client.post(maps, program_configmap(pod, program))
        _create(client, pods, pod, clock() + timeout_s, poll_s, sleep, clock)
    except ApiError as exc:
        with contextlib.suppress(ApiError):
            client.delete(f"{maps}/{name}")
        raise PodFailed(rejection(exc, namespace)) from None
    try:
        status = _wait(client, f"{pods}/{name}", clock() + timeout_s, poll_s, sleep, clock)
        try:
            log = client.get_text(f"{pods}/{name}/log", {"container": "agent"})
        except ApiError as exc:
            if exc.status != 400:
                raise
            # The container is gone with its log (a restart took its shim down): the
            # exit code in the pod's status still tells what happened.
            log = f"(no log: {exc})"
    except ApiError as exc:
        raise PodFailed(rejection(exc, namespace), started=True) from None
    finally:
        with contextlib.suppress(ApiError):
            client.delete(f"{pods}/{name}")
        if program is not None:
            with contextlib.suppress(ApiError):
                client.delete(f"{maps}/{name}")
    phase = str(status.get("phase") or "")
    return PodRun(_exit_code(status), _result(log), log, phase)


def _create(client: ClusterClient, base: str, pod: dict[str, Any], deadline: float,
            poll_s: float, sleep: Any, clock: Any) -> None:
    """A leftover of an earlier run may still be terminating (409): wait for it."""
    while True:
        try:
            client.post(base, pod)
            return
        except ApiError as exc:
            if exc.status != 409 or clock() > deadline:
                raise
        sleep(poll_s)


_STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName",
          "CreateContainerConfigError", "CreateContainerError")


def _wait(client: ClusterClient, path: str, deadline: float, poll_s: float, sleep: Any,
          clock: Any) -> dict[str, Any]:
    phase = "Pending"
    while clock() < deadline:
        status = client.get(path).get("status") or {}
        phase = str(status.get("phase") or "Pending")
        if phase in ("Succeeded", "Failed"):
            return dict(status)
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _STUCK:
                raise PodFailed(f"the node agent's pod cannot start: {waiting['reason']} "
                                f"({waiting.get('message', '')}); set gpuplane:nodePod.image "
                                "to an image the node can pull (it needs sh and nsenter)")
        sleep(poll_s)
    raise PodFailed(f"the node agent's pod was still {phase} after the bound "
                    "(gpuplane:nodePod.timeoutSeconds); it was deleted",
                    started=phase != "Pending")


def _exit_code(status: Mapping[str, Any]) -> int | None:
    for cs in status.get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def _result(log: str) -> dict[str, Any]:
    """The agent's JSON result: the last log line that is a JSON object."""
    for line in reversed(log.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                return data
    return {}


__all__ = [
    "DEFAULT_IMAGE",
    "LABELS",
    "PodFailed",
    "PodRun",
    "agent_pod",
    "plan_configmap",
    "plan_configmap_name",
    "pod_name",
    "program_configmap",
    "psa_problem",
    "rbac_needs",
    "read_plan_program",
    "rejection",
    "run_agent_pod",
]
