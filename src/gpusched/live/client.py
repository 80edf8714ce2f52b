"""A thin Kubernetes API client: kubeconfig or in-cluster credentials, JSON over httpx.

Why not a typed client: the scheduler reads a few fields of many objects, and the typed clients
both decode slowly and fail on the Binding subresource, whose answer is a ``Status`` rather than
the ``Binding`` they expect -- after the bind has already happened. Here every call returns the
decoded JSON or raises :class:`ApiError` with the status code and the server's message, and
:meth:`KubeClient.bind` is one raw POST that is never retried.

Credentials (from a kubeconfig's current context, or the pod's service account when no
kubeconfig is given): client certificate and key (file or ``-data``), bearer token (inline or
``tokenFile``, re-read on every request so rotated tokens work), CA (file or ``-data``).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from gpusched.errors import ConfigError, GpuschedError

__all__ = ["ApiError", "Credentials", "JsonObj", "KubeClient", "load_credentials"]

JsonObj = dict[str, Any]

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiError(GpuschedError):
    """The apiserver refused a request (or could not be reached: ``status_code`` 0)."""

    def __init__(self, method: str, path: str, status_code: int, body: Mapping[str, Any]) -> None:
        self.status_code = status_code
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        self.body = dict(body)
        super().__init__(f"{method} {path}: {status_code} {self.reason} {self.message}".strip())


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where the apiserver is and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str = ""
    token_file: str | None = None
    insecure: bool = False

    def bearer(self) -> str:
        if self.token_file:
            return Path(self.token_file).read_text().strip()
        return self.token


def _data_file(data: str, suffix: str) -> str:
    """Write base64 ``-data`` from a kubeconfig to a private temporary file (ssl wants paths)."""
    fd, path = tempfile.mkstemp(prefix="gpusched-", suffix=suffix)
    with os.fdopen(fd, "wb") as out:
        out.write(base64.b64decode(data))
    return path


def load_credentials(kubeconfig: str | None, context: str | None = None) -> Credentials:
    """Credentials from ``kubeconfig`` (its current context, or ``context``); from the pod's
    service account when ``kubeconfig`` is ``None`` and the process runs in a cluster."""
    if kubeconfig is None:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        if not host or not (_SA_DIR / "token").is_file():
            raise ConfigError(
                "--kubeconfig: not given, and not running in a cluster (no "
                "KUBERNETES_SERVICE_HOST or service-account token); pass --kubeconfig FILE"
            )
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return Credentials(
            server=f"https://{host}:{port}",
            ca_file=str(_SA_DIR / "ca.crt"),
            token_file=str(_SA_DIR / "token"),
        )
    path = Path(kubeconfig)
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--kubeconfig {kubeconfig}: cannot read it: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--kubeconfig {kubeconfig}: expected a kubeconfig mapping")
    name = context or config.get("current-context")

    def pick(kind: str, wanted: str | None) -> dict[str, Any]:
        for entry in config.get(kind + "s") or []:
            if entry.get("name") == wanted:
                found: dict[str, Any] = entry.get(kind) or {}
                return found
        raise ConfigError(f"--kubeconfig {kubeconfig}: no {kind} named {wanted!r}")

    ctx = pick("context", name)
    cluster = pick("cluster", ctx.get("cluster"))
    user = pick("user", ctx.get("user"))
    base = path.parent

    def file_or_data(entry: dict[str, Any], key: str, suffix: str) -> str | None:
        if entry.get(key + "-data"):
            return _data_file(entry[key + "-data"], suffix)
        if entry.get(key):
            return str(base / entry[key])
        return None

    return Credentials(
        server=str(cluster.get("server", "")).rstrip("/"),
        ca_file=file_or_data(cluster, "certificate-authority", ".crt"),
        cert_file=file_or_data(user, "client-certificate", ".crt"),
        key_file=file_or_data(user, "client-key", ".key"),
        token=str(user.get("token", "")),
        token_file=str(base / user["tokenFile"]) if user.get("tokenFile") else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
    )


class _Bearer(httpx.Auth):
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._credentials.bearer()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


class KubeClient:
    """JSON requests to one apiserver. Thread-safe (httpx's client is)."""

    def __init__(self, credentials: Credentials, *, timeout_s: float = 30.0) -> None:
        self.credentials = credentials
        if credentials.insecure:
            verify: ssl.SSLContext | bool = False
        else:
            verify = ssl.create_default_context(cafile=credentials.ca_file)
            if credentials.cert_file and credentials.key_file:
                verify.load_cert_chain(credentials.cert_file, credentials.key_file)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
        self._http = httpx.Client(
            base_url=credentials.server,
            verify=verify,
            auth=_Bearer(credentials),
            timeout=timeout_s,
            limits=limits,
            headers={"User-Agent": "gpusched"},
        )

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonObj:
        """One request; the decoded JSON answer, or :class:`ApiError`."""
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            response = self._http.request(
                method, path, content=content, params=params, headers=headers
            )
        except httpx.HTTPError as exc:
            raise ApiError(method, path, 0, {"message": str(exc)}) from exc
        try:
            answer: JsonObj = response.json() if response.content else {}
        except ValueError:
            answer = {"message": response.text[:500]}
        if response.status_code >= 300:
            raise ApiError(method, path, response.status_code, answer)
        return answer

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JsonObj:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> JsonObj:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> JsonObj:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, *, strategic: bool = False) -> JsonObj:
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        return self.request("PATCH", path, body=body, content_type=f"application/{kind}+json")

    def delete(self, path: str) -> JsonObj:
        return self.request("DELETE", path)

    def watch(self, path: str, params: Mapping[str, str], *, timeout_s: float) -> Iterator[JsonObj]:
        """Watch events (``{"type", "object"}``) from a streaming GET until the server ends it.

        Raises :class:`ApiError` for a refused watch (``410`` when the resourceVersion is too
        old) and for a connection that breaks mid-stream (status 0).
        """
        query = {**params, "watch": "true"}
        try:
            with self._http.stream(
                "GET", path, params=query, timeout=httpx.Timeout(timeout_s + 30, connect=10)
            ) as response:
                if response.status_code >= 300:
                    response.read()
                    raise ApiError("WATCH", path, response.status_code, _decode(response))
                for line in response.iter_lines():
                    if line:
                        event: JsonObj = json.loads(line)
                        yield event
        except httpx.HTTPError as exc:
            raise ApiError("WATCH", path, 0, {"message": str(exc)}) from exc

    def bind(
        self,
        namespace: str,
        pod: str,
        uid: str,
        node: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind ``pod`` to ``node`` through the Binding subresource: one raw POST, never retried.

        The pod's ``uid`` is a precondition, so a pod deleted and re-created under the same name
        is never bound by mistake. ``annotations`` are copied onto the pod by the apiserver in
        the same write. A 409 means the pod is already bound (or its uid changed).
        """
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": pod,
                "namespace": namespace,
                "uid": uid,
                "annotations": dict(annotations or {}),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", body=body)


def _decode(response: httpx.Response) -> JsonObj:
    try:
        answer: JsonObj = response.json()
    except ValueError:
        return {"message": response.text[:500]}
    return answer
