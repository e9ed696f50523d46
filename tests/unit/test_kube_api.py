"""The API server as the checks reach it (components/hostops/kube_api.py), and how the gateway's
rollout wait reads its pods and ends (components/gateway/cluster.py): what each refuses or
reports, without a cluster; and the local cluster's client (localhosts/kube/kubecluster.py), which
speaks through the same one, against a stand-in API server that demands its certificates."""

from __future__ import annotations

import http.server
import json
import ssl
import threading

import pytest
import yaml

from components.gateway.cluster import GatewayRolloutProvider, RolloutFailed, _pod_problem
from components.hostops.kube_api import KubeApi, ServiceProxy, vantage, vantage_name
from components.hostops.ssh import RemoteError
from localhosts.kube import kubepki
from localhosts.kube.kubecluster import KubeClient


def kubeconfig(user: dict, cluster: dict | None = None) -> str:
    return yaml.safe_dump({
        "current-context": "it",
        "contexts": [{"name": "it", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6440"}}],
        "users": [{"name": "u", "user": user}],
    })


def test_a_kubeconfig_user_with_an_exec_plugin_is_refused_by_name():
    with pytest.raises(RemoteError, match="a client certificate or a token is needed; its exec"
                                          " plugin is not run here"):
        KubeApi({"kubeconfig": kubeconfig({"exec": {"command": "aws"}})})


def test_skipping_the_api_servers_certificate_check_is_refused():
    with pytest.raises(RemoteError, match="insecure-skip-tls-verify is refused"):
        KubeApi({"kubeconfig": kubeconfig({"token": "t"}, {"server": "https://10.0.0.1:6443",
                                                           "insecure-skip-tls-verify": True})})


def test_a_plain_http_api_server_is_refused():
    with pytest.raises(RemoteError, match="the server must be an https:// URL"):
        KubeApi({"kubeconfig": kubeconfig({"token": "t"}, {"server": "http://10.0.0.1:8080"})})


def test_a_missing_context_is_named():
    with pytest.raises(RemoteError, match="the kubeconfig has no context named 'other'"):
        KubeApi({"kubeconfig": kubeconfig({"token": "t"}), "context": "other"})


class Recorder:
    """Stands in for KubeApi.request: records what the proxy sends."""

    server = "https://127.0.0.1:6440"

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def request(self, method, path, body=b"", headers=None, timeout=30.0):
        self.sent.append((method, path, dict(headers or {})))
        return 200, {}, b"{}"


def proxy_to(scheme: str) -> ServiceProxy:
    proxy = ServiceProxy.__new__(ServiceProxy)
    proxy.api, proxy.namespace, proxy.service = Recorder(), "spear-gateway", "spear-gateway"
    proxy.key_header, proxy.where, proxy.scheme = "x-litellm-api-key", "here", scheme
    return proxy


def test_the_service_proxy_sends_the_key_in_the_header_the_api_server_lets_through():
    proxy = proxy_to("http")
    proxy.http(4000, "GET", "/key/info?key=abc", headers={"Authorization": "Bearer sk-master"})
    [(method, path, headers)] = proxy.api.sent
    assert (method, path) == ("GET", "/api/v1/namespaces/spear-gateway/services/"
                                     "spear-gateway:4000/proxy/key/info?key=abc")
    assert headers == {"x-litellm-api-key": "Bearer sk-master"}


def test_the_service_proxy_names_https_for_a_gateway_that_serves_tls():
    proxy = proxy_to("https")
    proxy.http(4000, "GET", "/health/liveliness")
    [(_, path, _)] = proxy.api.sent
    assert path == "/api/v1/namespaces/spear-gateway/services/https:spear-gateway:4000/proxy/health/liveliness"


def test_a_check_starts_from_the_cluster_when_it_has_one_else_from_its_host():
    cluster = {"cluster": {"kubeconfig": kubeconfig({"token": "t"}), "namespace": "n",
                           "service": "s", "key_header": "x"}}
    assert isinstance(vantage(cluster), ServiceProxy)
    assert vantage_name(cluster) == "n/s"
    assert vantage_name({"connection": {"host": "gw.internal"}}) == "gw.internal"


def failed_init_pod() -> dict:
    return {"metadata": {"name": "spear-gateway-7d9-abcde"}, "status": {
        "initContainerStatuses": [{
            "name": "prove-routes",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message":
                          "endpoint vllm-canary: tool-call probe failed: parser-not-configured"
                          " (...)\n"}}}],
        "containerStatuses": [{"name": "litellm", "state": {"waiting": {
            "reason": "PodInitializing"}}}]}}


def test_a_pod_whose_proof_failed_is_reported_with_the_proofs_own_words():
    assert _pod_problem(Recorder(), "gateway-it", failed_init_pod()) == (
        "gateway pod spear-gateway-7d9-abcde: prove-routes failed: endpoint vllm-canary:"
        " tool-call probe failed: parser-not-configured (...)")


def test_a_pod_still_proving_or_starting_is_not_a_problem_yet():
    pod = failed_init_pod()
    pod["status"]["initContainerStatuses"][0].update(state={"running": {}}, lastState={})
    assert _pod_problem(Recorder(), "gateway-it", pod) is None


def test_a_crashing_litellm_is_reported_with_its_last_log_lines():
    pod = {"metadata": {"name": "spear-gateway-7d9-fghij"}, "status": {
        "initContainerStatuses": [{"name": "prove-routes", "state": {"terminated": {
            "exitCode": 0}}}],
        "containerStatuses": [{"name": "litellm", "state": {"waiting": {
            "reason": "CrashLoopBackOff", "message": "back-off 10s"}}}]}}
    api = Recorder()
    api.request = lambda *a, **k: (200, {}, b"line 1\nprisma: cannot reach the database\n")
    problem = _pod_problem(api, "gateway-it", pod)
    assert problem.startswith("gateway pod spear-gateway-7d9-fghij: litellm CrashLoopBackOff:"
                              " back-off 10s\n")
    assert problem.endswith("prisma: cannot reach the database")


def test_a_container_that_cannot_start_is_reported_at_once_with_the_runtimes_reason():
    pod = {"metadata": {"name": "spear-gateway-7d9-klmno"}, "status": {
        "initContainerStatuses": [{"name": "prove-routes", "state": {"terminated": {
            "exitCode": 0}}}],
        "containerStatuses": [{"name": "litellm", "state": {"waiting": {
            "reason": "RunContainerError", "message": "exec: \"/opt/litellm/venv/bin/litellm\":"
                                                      " no such file or directory"}}}]}}
    api = Recorder()
    api.request = lambda *a, **k: (400, {}, b'{"message": "container has not started"}')
    assert _pod_problem(api, "gateway-it", pod) == (
        'gateway pod spear-gateway-7d9-klmno: litellm RunContainerError: exec:'
        ' "/opt/litellm/venv/bin/litellm": no such file or directory')


class Rollout:
    """Stands in for KubeApi: the Deployment's status is `statuses` in turn (the last one from
    then on); no ReplicaSet or pod of the rollout shows yet."""

    def __init__(self, statuses: list[dict]) -> None:
        self.statuses, self.asked = statuses, 0

    def request(self, method, path, body=b"", headers=None, timeout=30.0):
        if "/deployments/" not in path:
            return 200, {}, b'{"items": []}'
        status = self.statuses[min(self.asked, len(self.statuses) - 1)]
        self.asked += 1
        return 200, {}, json.dumps({"metadata": {}, "status": status}).encode()


ROLLOUT = {"cluster": {"namespace": "gw"}, "deployment": "spear-gateway", "replicas": 1,
           "generation": 2, "timeout_seconds": 5}


@pytest.fixture
def rollout(monkeypatch):
    monkeypatch.setattr("components.gateway.cluster.ROLLOUT_POLL_SECONDS", 0.01)

    def start(statuses: list[dict]) -> Rollout:
        api = Rollout(statuses)
        monkeypatch.setattr("components.gateway.cluster.KubeApi", lambda _cluster: api)
        return api
    return start


def test_the_rollout_wait_ends_once_the_new_generation_is_ready_everywhere(rollout):
    ready = {k: 1 for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")}
    api = rollout([{"observedGeneration": 1, **ready}, {"observedGeneration": 2, **ready}])
    assert GatewayRolloutProvider().apply(ROLLOUT, None)["ready_replicas"] == 1
    assert api.asked == 2


def test_a_rollout_that_does_not_finish_in_time_fails_with_the_deployments_last_status(rollout):
    rollout([{"observedGeneration": 1}, {"observedGeneration": 2, "readyReplicas": 0}])
    with pytest.raises(RolloutFailed, match=r"gw/spear-gateway: not rolled out in 0.2 s:"
                                            r' \{"observedGeneration": 2, "readyReplicas": 0\}$'):
        GatewayRolloutProvider().apply({**ROLLOUT, "timeout_seconds": 0.2}, None)


class ApiServer(http.server.BaseHTTPRequestHandler):
    """Answers as an API server does, to a client that shows a certificate of the cluster's CA."""

    def do_GET(self) -> None:
        who = dict(field[0] for field in self.connection.getpeercert()["subject"])["commonName"]
        status, body = {"/version": (200, json.dumps({"gitVersion": "v1.31.0", "caller": who})),
                        "/readyz": (200, "ok")}.get(self.path, (404, '{"kind": "Status"}'))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_the_local_clusters_client_reaches_its_api_server_as_admin_with_the_kubeconfig(tmp_path):
    pki = kubepki.ensure_pki(tmp_path / "pki", "it", "10.96.0.1", "node", "127.0.0.2")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki / "ca.crt")
    tls.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
    tls.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ApiServer)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubepki.kubeconfig(pki, f"https://127.0.0.1:{server.server_port}", "it"))
    client = KubeClient(kubeconfig)
    try:
        assert client.request("GET", "/version") == (200, {"gitVersion": "v1.31.0", "caller": "admin"})
        assert client.get("/api/v1/nodes/gone") is None and client.ready()
    finally:
        server.shutdown()
        server.server_close()
    assert not client.ready()
