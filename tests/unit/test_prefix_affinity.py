"""Prefix-affinity routing (gateway.coder.fleetRouting): the pick (spear/affinity.py), the pods
the hook reads from EndpointSlices and its loads (hosts/gateway/spear_gateway/pods.py), and the
setting (config/schema/gateway.py)."""

from __future__ import annotations

import collections
import types

import pytest

from spear import affinity, receipts, vllm
from spear_gateway import pods as pod_directory
from spear_gateway.pods import PodDirectory, Track, image_tag, ready_addresses, running, running_at
from spear_gateway.settings import Settings

PODS = ["10.244.0.11:8000", "10.244.0.12:8000", "10.244.0.13:8000"]
SYSTEM = {"role": "system", "content": "You are a coding agent. " * 50}


def turns(first_ask: str, n: int) -> list[list[dict]]:
    """The messages of each of a session's n turns: each repeats the one before and adds to it."""
    messages = [SYSTEM, {"role": "user", "content": first_ask}]
    out = []
    for i in range(n):
        out.append(list(messages))
        messages += [{"role": "assistant", "content": f"step {i}"},
                     {"role": "user", "content": f"go on {i}"}]
    return out


def test_every_turn_of_a_conversation_has_its_first_turns_key():
    keys = {affinity.session_key("team-a", m) for m in turns("fix the parser", 5)}
    assert len(keys) == 1


def test_two_tenants_never_share_a_key_even_for_the_same_conversation():
    [messages] = turns("fix the parser", 1)
    assert affinity.session_key("team-a", messages) != affinity.session_key("team-b", messages)


def test_a_tenants_sessions_are_keyed_by_their_first_ask():
    a, b = turns("fix the parser", 1)[0], turns("write the docs", 1)[0]
    assert affinity.session_key("team-a", a) != affinity.session_key("team-a", b)


def test_with_no_load_every_turn_of_a_session_lands_on_one_pod():
    picks = {affinity.pick(affinity.session_key("t", m), PODS, {}) for m in turns("task", 8)}
    assert len(picks) == 1


def test_many_sessions_spread_over_the_pods():
    counts = collections.Counter(affinity.pick(affinity.session_key("t", [SYSTEM, {
        "role": "user", "content": f"task {i}"}]), PODS, {}) for i in range(300))
    assert set(counts) == set(PODS) and min(counts.values()) > 60


def test_a_busy_pod_passes_the_request_to_the_keys_next_pod():
    key = affinity.session_key("t", turns("task", 1)[0])
    first, second, _ = affinity.ranked(key, PODS)
    # Three in flight on the first: the cap for a fourth over three pods is ceil(1.25*4/3) = 2.
    assert affinity.pick(key, PODS, {first: 3}) == second
    # Two in flight, one each on two pods: the cap is ceil(1.25*3/3) = 2, the first still has room.
    assert affinity.pick(key, PODS, {first: 1, second: 1}) == first


def test_no_pod_is_ever_above_its_bound_when_every_request_goes_to_one_key():
    load: dict[str, int] = {}
    for _ in range(30):
        pod = affinity.pick("one-hot-key", PODS, load)
        load[pod] = load.get(pod, 0) + 1
        assert max(load.values()) <= affinity.capacity(sum(load.values()) - 1, len(PODS))


def test_a_pod_that_leaves_moves_only_its_own_sessions():
    keys = [affinity.session_key("t", [{"role": "user", "content": f"task {i}"}]) for i in range(200)]
    before = {k: affinity.pick(k, PODS, {}) for k in keys}
    after = {k: affinity.pick(k, PODS[1:], {}) for k in keys}
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == PODS[0]} and moved


def test_no_pod_ready_leaves_the_pick_to_the_service():
    assert affinity.pick("k", [], {}) is None


SLICES = {"items": [
    {"ports": [{"name": "http", "port": 8000}], "endpoints": [
        {"addresses": ["10.244.0.11"], "conditions": {"ready": True}},
        {"addresses": ["10.244.0.12"], "conditions": {"ready": False, "terminating": True}},
        {"addresses": ["10.244.0.13"], "conditions": {}}]},
]}


def test_only_ready_endpoints_are_pods_to_route_to():
    assert ready_addresses(SLICES, 8000) == ["10.244.0.11:8000", "10.244.0.13:8000"]


REVISION = "0123456789abcdef0123456789abcdef01234567"


def pod(ip, tag, model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION):
    """A fleet pod as the API server lists it: its image and the `vllm serve` command line the
    fleet renders (spear/vllm.py)."""
    serve = types.SimpleNamespace(
        model=model, revision=revision, served_model_name="qwen3-coder-next",
        tensor_parallel_size=1, max_model_len=8192, port=8000, gpu_memory_utilization="0.9",
        scheduling_priority=True, tool_call_parser="qwen3_coder")
    return {"status": {"podIP": ip}, "spec": {"containers": [{
        "name": "vllm", "image": f"registry.internal:5000/vllm/vllm-openai:{tag}@sha256:{'0' * 64}",
        "command": vllm.command_line(serve)}]}}


class ListedApi:
    """The API server's answers, as FleetApi.slices and FleetApi.pods give them."""

    def __init__(self, slices, pods=()):
        self.answer, self.listed = slices, {"items": list(pods)}

    def slices(self, track):
        return self.answer

    def pods(self, namespace):
        return self.listed


def test_the_directory_counts_each_requests_pod_until_it_ends_and_a_retry_moves_it():
    track = Track("vllm", "vllm", 8000)
    directory = PodDirectory(None)
    directory._pods[track] = ["10.244.0.11:8000", "10.244.0.13:8000"]
    pod = directory.assign("r1", track, "k")
    assert directory._load == {pod: 1}
    again = directory.assign("r1", track, "k")  # a retry: the first try's pod is released
    assert directory._load == {again: 1}
    directory.release("r1")
    assert directory._load == {} and directory.assigned("r1") is None


def test_a_pod_that_did_not_answer_is_out_of_the_next_pick_at_once(monkeypatch):
    track = Track("vllm", "vllm", 8000)
    directory = PodDirectory(None)
    directory._pods[track] = ["10.244.0.11:8000", "10.244.0.13:8000"]
    pod = directory.assign("r1", track, "k")
    directory.quarantine(pod)
    other = directory.assign("r1", track, "k")
    assert other != pod and other is not None
    clock = pod_directory.time.monotonic() + pod_directory.QUARANTINE_SECONDS + 1
    monkeypatch.setattr(pod_directory.time, "monotonic", lambda: clock)
    assert pod in directory.pods(track)


class RoundOver(Exception):
    """Ends the poller's loop after one round (raised where it would sleep)."""


def one_round(seconds: float) -> None:
    raise RoundOver


def test_the_poller_takes_a_pod_out_when_its_endpoint_is_no_longer_ready(monkeypatch):
    track = Track("vllm", "vllm", 8000)
    api = ListedApi(SLICES)
    directory = PodDirectory(api)
    monkeypatch.setattr(pod_directory.PodDirectory, "_start", lambda self: None)
    assert directory.pods(track) == []  # not listed yet: the Service picks
    monkeypatch.setattr(pod_directory.time, "sleep", one_round)
    with pytest.raises(RoundOver):
        directory._poll()
    assert directory.pods(track) == ["10.244.0.11:8000", "10.244.0.13:8000"]
    api.answer = {"items": [{"endpoints": [{"addresses": ["10.244.0.13"],
                                            "conditions": {"ready": True}}]}]}
    with pytest.raises(RoundOver):
        directory._poll()
    assert directory.pods(track) == ["10.244.0.13:8000"]


def test_an_images_tag_is_read_past_a_registry_port_and_a_digest():
    assert image_tag("registry.internal:5000/vllm/vllm-openai:v0.25.0@sha256:abc") == "v0.25.0"
    assert image_tag("localhost/spear-fleet/vllm-standin:v0.24.0") == "v0.24.0"
    assert image_tag("registry.internal:5000/vllm/vllm-openai@sha256:abc") == ""


def test_what_each_fleet_pod_runs_is_read_off_its_image_and_command_line():
    listed = {"items": [pod("10.244.0.11", "v0.24.0"), pod("10.244.0.13", "v0.25.0"),
                        {"status": {}, "spec": {"containers": [{"command": ["vllm", "serve", "m"]}]}},
                        {"status": {"podIP": "10.244.0.20"}, "spec": {"containers": [
                            {"image": "busybox", "command": ["sleep", "1"]}]}}]}
    assert running(listed) == {
        "10.244.0.11": receipts.serving("v0.24.0", "Qwen/Qwen3-Coder-Next-FP8", REVISION),
        "10.244.0.13": receipts.serving("v0.25.0", "Qwen/Qwen3-Coder-Next-FP8", REVISION)}


def test_the_poller_keeps_what_the_pods_run_for_the_receipts_and_the_service_names_none(monkeypatch):
    track = Track("vllm", "vllm", 8000)
    directory = PodDirectory(ListedApi(SLICES, [pod("10.244.0.11", "v0.25.0")]))
    monkeypatch.setattr(pod_directory.PodDirectory, "_start", lambda self: None)
    monkeypatch.setattr(pod_directory, "RUNNING", {})
    directory.pods(track)
    monkeypatch.setattr(pod_directory.time, "sleep", one_round)
    with pytest.raises(RoundOver):
        directory._poll()
    assert running_at("http://10.244.0.11:8000/v1") == receipts.serving(
        "v0.25.0", "Qwen/Qwen3-Coder-Next-FP8", REVISION)
    # The Service's address: kube-proxy picked a pod, which nobody here can name.
    assert running_at("http://10.96.100.10:8000/v1") == "" and running_at(None) == ""


def test_the_hooks_fleet_api_is_all_three_settings_or_none():
    base = {"SPEAR_HATCH_MONTHLY_CAP_USD": "10"}
    assert Settings.from_environment(base).fleet_api is None
    with pytest.raises(ValueError, match="SPEAR_FLEET_API_TOKEN"):
        Settings.from_environment({**base, "SPEAR_FLEET_API_SERVER": "https://127.0.0.1:6440",
                                   "SPEAR_FLEET_API_CA": "Q0E="})
    with pytest.raises(ValueError, match="https://"):
        Settings.from_environment({**base, "SPEAR_FLEET_API_SERVER": "http://127.0.0.1:6440",
                                   "SPEAR_FLEET_API_CA": "Q0E=", "SPEAR_FLEET_API_TOKEN": "t"})

