"""The Kubernetes API as the dynamic resources reach it: the stack's kubeconfig (its secret text,
a file, or the ambient one), over the standard library's HTTPS client.

What they need of it is one thing: HTTP to a Service in the cluster through the API server's
service proxy (`/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/...`), which works wherever
`kubectl` does, with no port opened and no port-forward process. The API server authenticates the
caller with the kubeconfig's credentials and then drops the request's `Authorization` header
(kubernetes/kubernetes#38775), so a Service's own key travels in another header
(`key_header`: LiteLLM reads `x-litellm-api-key` before `Authorization`).

Credentials: client certificates and bearer tokens, inline or as files; exec and auth-provider
plugins are not run (a clear error names them).
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.hostops.ssh import NoAnswer, RemoteError, Session


def cluster_access(kubeconfig: Any, path: str | None, context: str | None) -> dict[str, Any]:
    """What a dynamic resource keeps to reach the cluster: the kubeconfig's text (a secret) or
    its path (None: $KUBECONFIG or ~/.kube/config when it runs), and the context."""
    return {"kubeconfig": kubeconfig, "path": path, "context": context}


def _kubeconfig(access: Mapping[str, Any]) -> tuple[dict[str, Any], Path]:
    """The parsed kubeconfig and the folder its relative file names are resolved from."""
    if access.get("kubeconfig"):
        return yaml.safe_load(access["kubeconfig"]), Path.cwd()
    where = access.get("path") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] \
        or str(Path.home() / ".kube" / "config")
    try:
        return yaml.safe_load(Path(where).read_text()), Path(where).parent
    except OSError as err:
        raise RemoteError(f"cannot read the kubeconfig {where}: {err}") from err


def _named(items: list[dict[str, Any]] | None, name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return item.get(what) or {}
    raise RemoteError(f"the kubeconfig has no {what} named {name!r}")


def _entries(access: Mapping[str, Any]) -> tuple[Path, str, dict[str, Any], dict[str, Any]]:
    """The kubeconfig's folder, and its context's name, cluster and user entries."""
    config, base = _kubeconfig(access)
    context_name = access.get("context") or config.get("current-context")
    context = _named(config.get("contexts"), context_name, "context")
    return (base, context_name, _named(config.get("clusters"), context.get("cluster"), "cluster"),
            _named(config.get("users"), context.get("user"), "user"))


def api_server(access: Mapping[str, Any]) -> dict[str, str]:
    """The context's API server as a client elsewhere reaches it with a token of its own: its
    URL and CA (base64 PEM, as a kubeconfig's certificate-authority-data)."""
    base, _, cluster, _ = _entries(access)
    ca = cluster.get("certificate-authority-data") or (base64.b64encode(
        (base / cluster["certificate-authority"]).read_bytes()).decode()
        if cluster.get("certificate-authority") else "")
    return {"server": cluster.get("server", ""), "ca": ca}


class KubeApi:
    """Requests to the API server of the kubeconfig's context."""

    def __init__(self, access: Mapping[str, Any]) -> None:
        base, context_name, cluster, user = _entries(access)
        url = urlsplit(cluster.get("server", ""))
        if url.scheme != "https" or not url.hostname:
            raise RemoteError(f"kubeconfig context {context_name!r}: the server must be an"
                              f" https:// URL, got {cluster.get('server')!r}")
        self.host, self.port = url.hostname, url.port or 443
        self.server = cluster["server"]
        self.tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            raise RemoteError(f"kubeconfig context {context_name!r}: insecure-skip-tls-verify is"
                              " refused: the API server carries the gateway's keys")
        with tempfile.TemporaryDirectory() as tmp:
            # ssl reads certificates and keys from files only; these live for the load.
            def file_of(field: str, entry: Mapping[str, Any]) -> str | None:
                if entry.get(f"{field}-data"):
                    path = Path(tmp) / field
                    path.write_bytes(base64.b64decode(entry[f"{field}-data"]))
                    path.chmod(0o600)
                    return str(path)
                return str(base / entry[field]) if entry.get(field) else None

            if ca := file_of("certificate-authority", cluster):
                self.tls.load_verify_locations(cafile=ca)
            cert, key = file_of("client-certificate", user), file_of("client-key", user)
            if cert and key:
                self.tls.load_cert_chain(cert, key)
        token = user.get("token") or (Path(base / user["tokenFile"]).read_text().strip()
                                      if user.get("tokenFile") else None)
        if not (cert and key) and not token:
            plugin = "exec" if user.get("exec") else "auth-provider" if user.get("auth-provider") \
                else None
            raise RemoteError(f"kubeconfig user of context {context_name!r}: a client certificate"
                              " or a token is needed" + (f"; its {plugin} plugin is not run here"
                                                         if plugin else ""))
        self.auth = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Mapping[str, str] | None = None, timeout: float = 30.0
                ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.tls,
                                           timeout=timeout)
        try:
            conn.request(method, path, body=body or None,
                         headers={"Content-Type": "application/json", **(headers or {}),
                                  **self.auth})
            response = conn.getresponse()
            return (response.status, {k.lower(): v for k, v in response.getheaders()},
                    response.read())
        except TimeoutError as err:
            raise ConnectionError(f"{path} through {self.server} did not answer in {timeout} s") \
                from err
        except OSError as err:
            raise NoAnswer(f"the API server {self.server}", self.host, self.port, str(err)) \
                from err
        finally:
            conn.close()


class ServiceProxy:
    """HTTP to a Service through the API server, with the call shape of an SSH Session's
    (`http`, `http_exchange`), so a check runs the same against a host and a cluster."""

    def __init__(self, cluster: Mapping[str, Any]) -> None:
        self.api = KubeApi(cluster)
        self.namespace, self.service = cluster["namespace"], cluster["service"]
        self.key_header = cluster["key_header"]
        # The API server proxies to an HTTPS Service when its path names the scheme (it does not
        # check the Service's certificate: the hop from the API server is the cluster's own).
        self.scheme = cluster.get("scheme", "http")
        self.where = f"service {self.namespace}/{self.service} through {self.api.server}"

    def __enter__(self) -> ServiceProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def http_exchange(self, port: int, method: str, path: str, body: bytes = b"",
                      address: str = "", timeout: float = 30.0,
                      headers: Mapping[str, str] | None = None
                      ) -> tuple[int, dict[str, str], bytes]:
        """`address` is the Service's, so it is not used; `Authorization` goes as key_header."""
        sent = {(self.key_header if name.lower() == "authorization" else name): value
                for name, value in (headers or {}).items()}
        proxied = (f"/api/v1/namespaces/{self.namespace}/services/"
                   f"{'https:' if self.scheme == 'https' else ''}{self.service}:{port}/proxy{path}")
        status, answer_headers, answer = self.api.request(method, proxied, body, sent, timeout)
        if status == 503 and b"no endpoints available" in answer:
            raise NoAnswer(self.where, self.service, port, "no ready pod behind the Service")
        return status, answer_headers, answer

    def http(self, port: int, method: str, path: str, body: bytes = b"", address: str = "",
             timeout: float = 30.0, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        status, _, answer = self.http_exchange(port, method, path, body, address, timeout, headers)
        return status, answer


def vantage(props: Mapping[str, Any]) -> Any:
    """Where a check's requests start: the host it logs in to (`connection`), or the API server
    of the cluster its Service runs in (`cluster`). Both are context managers with `http` and
    `http_exchange`."""
    if props.get("cluster"):
        return ServiceProxy(props["cluster"])
    return Session(props["connection"])


def vantage_name(props: Mapping[str, Any]) -> str:
    """The vantage in a resource id: the host, or namespace/service."""
    cluster = props.get("cluster")
    return f"{cluster['namespace']}/{cluster['service']}" if cluster else props["connection"]["host"]
