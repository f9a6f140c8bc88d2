"""The few Kubernetes API calls the doctor makes, behind a small interface.

Collection and node inspection speak only `ClusterClient` (GET a path, POST/DELETE an
object, read a pod's log), so tests replay recorded API responses and never need a
cluster. `KubeClient` implements it with the official `kubernetes` client's credentials
and connection pool; responses are returned as the API's own JSON, not as the client's
model objects, so what is saved in a snapshot is exactly what `kubectl get -o json` shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode


class CollectError(Exception):
    """The cluster could not be read at all: `gpuplane doctor` exits 2 with this reason."""


class ApiError(Exception):
    """One API call failed; `status` is the HTTP status (0: the server was not reached)."""

    def __init__(self, status: int, method: str, path: str, message: str):
        self.status, self.method, self.path = status, method, path
        super().__init__(message)

    @property
    def permission(self) -> str:
        """The RBAC permission a 403 lacks, e.g. `list pods (all namespaces)`."""
        return describe_permission(self.method, self.path)


def get_required(client: ClusterClient, path: str, what: str, *, needs: str = "needs") -> Any:
    """`client.get(path)`, where failing means the command cannot go on: CollectError
    saying why (unreachable, credentials rejected, the RBAC permission lacking (`needs`:
    who needs it, e.g. "the doctor needs"), else the HTTP status)."""
    try:
        return client.get(path)
    except ApiError as exc:
        if exc.status == 0:
            raise CollectError(f"cluster unreachable: {exc}") from None
        if exc.status == 401:
            raise CollectError(f"unauthorized: the kubeconfig's credentials were rejected "
                               f"({exc})") from None
        if exc.status == 403:
            raise CollectError(f"forbidden: {needs} permission to {exc.permission} "
                               f"({exc})") from None
        raise CollectError(f"cannot read {what}: HTTP {exc.status}: {exc}") from None


class ClusterClient(Protocol):
    """What the doctor needs from a cluster. Paths are API paths (`/api/v1/nodes`)."""

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        """The parsed JSON body; raises ApiError."""

    def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        """A plain-text body (pod logs); raises ApiError."""

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """Create an object; raises ApiError."""

    def delete(self, path: str) -> None:
        """Delete an object (a missing object is not an error); raises ApiError."""


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>[^/]+))?$")
_VERB = {"GET": "get", "POST": "create", "DELETE": "delete", "PUT": "update"}
_CLUSTER_SCOPED = {"nodes", "runtimeclasses", "mutatingwebhookconfigurations",
                   "clusterpolicies", "namespaces", "resourceslices", "deviceclasses"}


def describe_permission(method: str, path: str) -> str:
    """`list nodes`, `create pods in namespace kube-system`, `get pods/log in namespace x`."""
    match = _PATH.match(path.split("?")[0])
    if not match:
        return f"{method} {path}"
    verb = _VERB.get(method, method.lower())
    if verb == "get" and not match["name"]:
        verb = "list"
    resource = match["resource"]
    if match["sub"]:
        resource += "/" + match["sub"]
    if match["group"]:
        resource += f".{match['group']}"
    if match["ns"]:
        where = f" in namespace {match['ns']}"
    elif verb == "list" and match["resource"] not in _CLUSTER_SCOPED:
        where = " (all namespaces)"
    else:
        where = ""
    return f"{verb} {resource}{where}"


class KubeClient:
    """`ClusterClient` over the official client: kubeconfig (or in-cluster) credentials."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 timeout: float = 30.0):
        from kubernetes.config.config_exception import ConfigException

        from gpuplane.kube.credentials import api_client

        self.timeout = timeout
        if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
            raise CollectError(f"no kubeconfig: {kubeconfig} does not exist; pass --kubeconfig "
                               "PATH of a readable kubeconfig")
        try:
            self.api = api_client(kubeconfig=kubeconfig, context=context)
        except (ConfigException, RuntimeError) as exc:
            raise CollectError(f"no usable kubeconfig: {exc}; pass --kubeconfig PATH (and "
                               "--context NAME) or set KUBECONFIG") from None
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise CollectError(f"kubeconfig {kubeconfig or '(default)'} cannot be read: "
                               f"{exc}") from None

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    def _call(self, method: str, path: str, params: dict[str, str] | None = None,
              body: Any = None, accept: str = "application/json") -> bytes:
        """One request through the client's own connection pool (TLS and client
        certificates as the kubeconfig says) with its bearer token (refreshed by exec
        plugins); independent of the generated API classes, whose signatures changed
        between client releases."""
        from urllib3.exceptions import HTTPError

        cfg = self.api.configuration
        url = str(cfg.host).rstrip("/") + path
        if params:
            url += "?" + urlencode(params)
        headers = {"Accept": accept, "User-Agent": "gpuplane-doctor"}
        for auth in cfg.auth_settings().values():   # the bearer token, refreshed if need be
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        if "authorization" not in {k.lower() for k in headers} and cfg.username:
            headers["Authorization"] = cfg.get_basic_auth_token()
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        try:
            response = self.api.rest_client.pool_manager.request(
                method, url, body=data, headers=headers, timeout=self.timeout, retries=False)
        except (HTTPError, OSError) as exc:
            raise ApiError(0, method, path, f"cannot reach {self.server}: {exc}") from None
        payload = bytes(response.data)
        if response.status >= 400:
            raise ApiError(response.status, method, path,
                           _api_message(response.status, response.reason, payload))
        return payload

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        data = self._call("GET", path, params)
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise ApiError(200, "GET", path, f"response is not JSON: {exc}") from None

    def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        return self._call("GET", path, params, accept="*/*").decode("utf-8", errors="replace")

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return json.loads(self._call("POST", path, body=body))

    def delete(self, path: str) -> None:
        try:
            self._call("DELETE", path)
        except ApiError as exc:
            if exc.status != 404:
                raise


def _api_message(status: int, reason: str, payload: bytes) -> str:
    """The API server's Status message, else the HTTP status line."""
    try:
        message = json.loads(payload).get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or f"{status} {reason}")


__all__ = ["ApiError", "ClusterClient", "CollectError", "KubeClient", "describe_permission"]
