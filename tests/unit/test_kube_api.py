"""The API server as the checks reach it (components/hostops/kube_api.py), and how the gateway's
rollout wait reads its pods (components/gateway/cluster.py): what each refuses or reports,
without a cluster."""

from __future__ import annotations

import pytest
import yaml

from components.gateway.cluster import _pod_problem
from components.hostops.kube_api import KubeApi, ServiceProxy, vantage, vantage_name
from components.hostops.ssh import RemoteError


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


def test_the_service_proxy_sends_the_key_in_the_header_the_api_server_lets_through():
    proxy = ServiceProxy.__new__(ServiceProxy)
    proxy.api, proxy.namespace, proxy.service = Recorder(), "spear-gateway", "spear-gateway"
    proxy.key_header, proxy.where = "x-litellm-api-key", "here"
    proxy.http(4000, "GET", "/key/info?key=abc", headers={"Authorization": "Bearer sk-master"})
    [(method, path, headers)] = proxy.api.sent
    assert (method, path) == ("GET", "/api/v1/namespaces/spear-gateway/services/"
                                     "spear-gateway:4000/proxy/key/info?key=abc")
    assert headers == {"x-litellm-api-key": "Bearer sk-master"}


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
