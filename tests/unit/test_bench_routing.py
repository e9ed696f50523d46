"""scripts/bench-routing --pods N (localhosts/bench/bench_routing.py::scaled): the stable
Deployment is scaled for the run and back, and the run's field-manager entry is taken out after,
so the stack's next server-side apply owns `replicas` alone. The API server is a fake that keeps
one Deployment and its pods."""

from __future__ import annotations

import pytest

from localhosts.bench import bench_routing

DEPLOYMENT = "/apis/apps/v1/namespaces/vllm/deployments/vllm-stable"


class FakeApi:
    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.managed = [{"manager": "pulumi-kubernetes-1", "operation": "Apply"}]
        self.calls: list[tuple[str, str]] = []

    def pod(self, i: int, ready: bool = True) -> dict:
        return {"metadata": {}, "status": {"podIP": f"10.0.0.{i}", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}}

    def get(self, path: str) -> dict:
        if path == DEPLOYMENT:
            return {"spec": {"replicas": self.replicas}, "metadata": {"managedFields": list(self.managed)}}
        # One pod not ready yet beside the ready ones: it does not count.
        return {"items": [self.pod(i) for i in range(self.replicas)] + [self.pod(99, ready=False)]}

    def request(self, method: str, path: str, body, content_type: str = "") -> tuple[int, dict]:
        self.calls.append((method, path))
        assert path == f"{DEPLOYMENT}/scale?fieldManager={bench_routing.MANAGER}"
        self.replicas = body[0]["value"]
        entry = {"manager": bench_routing.MANAGER, "operation": "Update", "subresource": "scale"}
        if entry not in self.managed:
            self.managed.append(entry)
        return 200, {}

    def patch(self, path: str, patch: list) -> dict:
        assert path == DEPLOYMENT and patch[0]["path"] == "/metadata/managedFields"
        self.managed = patch[0]["value"]
        return {}


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(bench_routing, "LISTED_SECONDS", 0)


def test_a_run_on_more_pods_scales_the_deployment_and_gives_it_back_to_the_stacks_manager():
    api = FakeApi(replicas=2)
    with bench_routing.scaled(api, "vllm", 4) as pods:
        assert pods == [f"10.0.0.{i}" for i in range(4)] and api.replicas == 4
    assert api.replicas == 2
    assert api.managed == [{"manager": "pulumi-kubernetes-1", "operation": "Apply"}]


def test_the_deployment_is_given_back_when_the_run_fails():
    api = FakeApi(replicas=2)
    with pytest.raises(RuntimeError), bench_routing.scaled(api, "vllm", 6):
        raise RuntimeError("a turn failed")
    assert api.replicas == 2 and [e["manager"] for e in api.managed] == ["pulumi-kubernetes-1"]


def test_without_pods_or_at_the_deployed_count_nothing_is_scaled():
    api = FakeApi(replicas=2)
    for pods in (None, 2):
        with bench_routing.scaled(api, "vllm", pods) as ready:
            assert ready == ["10.0.0.0", "10.0.0.1"]
    assert api.calls == []
