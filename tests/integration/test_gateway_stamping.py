"""What the gateway stamps on `coder` requests, on real LiteLLM (both pinned versions, database
mode with developers' keys): cache_salt per team, priority per key class (lowering only), the
fleet's time to first token counted by that priority, and rings (pilots on the canary, nobody
else ever). Each deployment is a stand-in that records the
bodies it received: a stable and a canary vLLM deployment (which take both fields) and a plain
endpoint (which takes neither, as llama-server).
"""

import json
import uuid
from dataclasses import replace

import pytest

from components.gateway.keys import key_metadata
from components.hostops.waiting import wait_until
from config.types import Developer
from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv
from spear.rules import CODER_MODEL
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import ProxyError, migrate
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database
from localhosts.servers.spear_gateway_proxy import FRONTIER_KEY, gateway_config, metric, spear_proxy

# proxy port, first of four stand-in ports (stable, canary, plain, frontier)
VERSIONS = dict(zip(TESTED_LITELLM, ((4130, 8174), (4131, 8180))))
VLLM = {"spear_cache_salt": True, "spear_priority": True}
DEPLOYMENTS = {"stable": {"id": "vllm-stable", "spear_track": "stable", **VLLM},
               "canary": {"id": "vllm-canary", "spear_track": "canary", **VLLM},
               "plain": {"id": "local"}}
# name: (team, ring, priority class)
DEVELOPERS = {"ana": ("platform", "general", "interactive"),
              "bob": ("platform", "general", "background"),
              "cy": ("data", "pilot", "interactive"),
              "dee": (None, "general", "background"),
              "eve": (None, "general", "interactive")}  # moved to the pilot ring by a test
N = 20  # requests per key where routing is random among deployments


def developer(name, **changes):
    team, ring, priority = DEVELOPERS[name]
    return replace(Developer(name=name, team=team, models=(CODER_MODEL,), max_budget=100.0,
                     budget_duration="30d", tpm_limit=None, rpm_limit=None,
                     max_parallel_requests=None, metadata={}, rotation=0, rotation_grace="24h",
                     ring=ring, priority=priority), **changes)


@pytest.fixture(scope="module", params=list(VERSIONS))
def gateway(request, tmp_path_factory):
    proxy_port, first = VERSIONS[request.param]
    venv = litellm_venv(request.param).path
    with postgres_database() as db, \
            OpenAIUpstream(first) as stable, OpenAIUpstream(first + 1) as canary, \
            OpenAIUpstream(first + 2) as plain, FrontierStandin(first + 3, FRONTIER_KEY) as frontier:
        migrate(venv, db.url)
        upstreams = {"stable": stable, "canary": canary, "plain": plain}
        config = gateway_config({upstreams[name].base_url: info
                                 for name, info in DEPLOYMENTS.items()}, frontier.base_url,
                                environment={"SPEAR_CACHE_SALT_SCOPE": "team"})
        with spear_proxy(venv, config, port=proxy_port, hatch_cap_usd=100.0,
                         log_dir=tmp_path_factory.mktemp(f"stamping-{request.param}"),
                         database_url=db.url) as proxy:
            keys = {name: proxy.post("/key/generate", {
                "key_alias": name, "models": [CODER_MODEL], "max_budget": 100.0,
                "budget_duration": "30d", "metadata": key_metadata(developer(name))})["key"]
                for name in DEVELOPERS}
            keys["master"] = None  # LitellmProxy.request sends the master key
            yield proxy, keys, upstreams, frontier


def ask(gateway, who, route="/v1/chat/completions", **fields):
    """One request of `who`'s key; (the deployment that served it, the body it received)."""
    proxy, keys, upstreams, _ = gateway
    marker = f"request {uuid.uuid4().hex}"
    body = ({"model": CODER_MODEL, "max_output_tokens": 8, "input": marker}
            if route == "/v1/responses" else
            {"model": CODER_MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": marker}]})
    proxy.post(route, body | fields, key=keys[who], timeout=60)
    [(name, received)] = [(name, call.body) for name, upstream in upstreams.items()
                          for call in upstream.calls if marker in json.dumps(call.body["messages"])]
    return name, received


def served(gateway, who, n=N, **fields):
    return [ask(gateway, who, **fields) for _ in range(n)]


def fleet_served(gateway, who, n=N, **fields):
    """The bodies of the first `n` of `who`'s requests that reached the fleet's deployments
    (stable, canary). Routing among a key's deployments is random, so this asks until that many
    got there: ten requests all landing on the plain deployment (1 in 1024) failed a CI run."""
    bodies = []
    for _ in range(20 * n):
        name, body = ask(gateway, who, **fields)
        if name != "plain":
            bodies.append(body)
            if len(bodies) == n:
                return bodies
    pytest.fail(f"fewer than {n} of {20 * n} requests of {who} reached the fleet's deployments")


def salts(bodies):
    return {body.get("cache_salt") for body in bodies}


def test_a_client_sent_cache_salt_is_replaced_by_its_teams_and_two_teams_never_share_one(gateway):
    by_key = {who: salts(fleet_served(gateway, who, cache_salt="chosen-by-the-client"))
              for who in ("ana", "bob", "cy", "dee")}
    assert all(len(found) == 1 for found in by_key.values()), by_key
    salt = {who: found.pop() for who, found in by_key.items()}
    assert salt["ana"] == salt["bob"]                      # one team: one salt, cache shared
    assert len({salt["ana"], salt["cy"], salt["dee"]}) == 3  # platform, data, dee on their own
    assert "chosen-by-the-client" not in salt.values()


def test_a_background_key_runs_at_10_and_an_interactive_one_at_0(gateway):
    for who, expected in (("bob", 10), ("dee", 10), ("ana", 0), ("cy", 0)):
        assert {body["priority"] for body in fleet_served(gateway, who)} == {expected}, who


def test_the_fleets_time_to_first_token_is_counted_by_the_priority_it_ran_at(gateway):
    proxy = gateway[0]
    before = {p: metric(proxy, "spear_fleet_ttft_seconds_count", priority=p) for p in ("0", "10")}
    served(gateway, "bob", n=3)
    served(gateway, "ana", n=2)
    def counted():
        return tuple(metric(proxy, "spear_fleet_ttft_seconds_count", priority=p) - before[p]
                     for p in ("10", "0"))
    # LiteLLM runs success callbacks after the answer has gone back, so the count may lag
    # the last answer by a moment: wait for it, then require exactly these counts.
    wait_until(lambda: all(n >= want for n, want in zip(counted(), (3, 2))), 15, interval=0.2)
    # Every request the fleet served is counted (the plain deployment takes no priority: its
    # answers are counted too, at the key's class, which is what the developer waited on).
    assert counted() == (3, 2)
    assert metric(proxy, "spear_fleet_ttft_seconds_sum", priority="10") > 0


@pytest.mark.parametrize("who, asked, runs_at", [("bob", 0, 10), ("bob", 20, 20),
                                                  ("ana", 20, 20), ("ana", -5, 0)])
def test_a_request_may_lower_its_own_priority_but_never_raise_it(gateway, who, asked, runs_at):
    assert {body["priority"] for body in fleet_served(gateway, who, n=5, priority=asked)} == {runs_at}


def test_a_priority_that_is_not_an_integer_is_refused_and_nothing_is_sent(gateway):
    upstreams = gateway[2]
    before = sum(len(u.calls) for u in upstreams.values())
    with pytest.raises(ProxyError) as refused:
        ask(gateway, "ana", priority="high")
    assert refused.value.status == 400
    assert refused.value.body["error"]["type"] == "spear_bad_priority"
    assert sum(len(u.calls) for u in upstreams.values()) == before


def test_the_plain_deployment_never_receives_cache_salt_or_priority(gateway):
    answers = [a for who in ("ana", "bob", "dee", "master")
               for a in served(gateway, who, n=10, cache_salt="x", priority=30)]
    plain = [body for name, body in answers if name == "plain"]
    assert plain and all("cache_salt" not in b and "priority" not in b for b in plain)


def test_pilot_requests_are_served_by_the_canary_and_no_other_keys_ever_are(gateway):
    where = {who: [name for name, _ in served(gateway, who)]
             for who in ("cy", "ana", "bob", "dee", "master")}
    print({who: {n: names.count(n) for n in DEPLOYMENTS} for who, names in where.items()})
    assert where["cy"] == ["canary"] * N
    assert all("canary" not in names for who, names in where.items() if who != "cy")


@pytest.mark.parametrize("who", ["master", "ana", "cy"])
@pytest.mark.parametrize("deployment", ["vllm-canary", "vllm-stable"])
def test_no_key_reaches_a_deployment_by_naming_it_and_nothing_is_sent(gateway, who, deployment):
    proxy, keys, upstreams, _ = gateway
    before = sum(len(u.calls) for u in upstreams.values())
    with pytest.raises(ProxyError) as refused:
        proxy.post("/v1/chat/completions", {"model": deployment, "max_tokens": 8, "messages": [
            {"role": "user", "content": "which track am I on?"}]}, key=keys[who], timeout=60)
    # A developer's key is refused by LiteLLM's own model check first (its models are `coder`).
    assert refused.value.status in (401, 403), refused.value.body
    if who == "master":
        assert refused.value.body["error"]["type"] == "spear_deployment_not_direct"
    assert sum(len(u.calls) for u in upstreams.values()) == before


DIALECTS = ("/v1/messages", "/v1/responses")


@pytest.mark.parametrize("route", DIALECTS)
def test_claude_codes_and_codexs_requests_are_stamped_the_same_way(gateway, route):
    answers = [ask(gateway, "bob", route, cache_salt="x") for _ in range(12)]
    chat = salts(fleet_served(gateway, "ana", n=6))
    fleet = [body for name, body in answers if name != "plain"]
    assert fleet and all(b["priority"] == 10 and {b["cache_salt"]} == chat for b in fleet)
    assert all("cache_salt" not in b and "priority" not in b
               for name, b in answers if name == "plain")


def test_a_pilots_escalation_reaches_the_frontier_without_the_fleets_fields(gateway):
    proxy, keys, upstreams, frontier = gateway
    calls = frontier.calls
    answer = proxy.post("/v1/chat/completions", {
        "model": CODER_MODEL, "max_tokens": 8, "cache_salt": "x", "priority": 30,
        "messages": [{"role": "user", "content": "SPEAR-ANSWER-STATUS=503"}]},
        key=keys["cy"], timeout=60)
    assert answer["choices"][0]["message"]["content"] == "SPEAR-FRONTIER-OK"
    assert upstreams["canary"].calls[-1].answered == 503
    assert upstreams["canary"].calls[-1].body["priority"] == 30
    assert frontier.calls == calls + 1
    assert not {"cache_salt", "priority"} & set(frontier.messages[-1].body)


def test_a_change_of_ring_and_priority_by_key_update_takes_effect_at_once(gateway):
    proxy, keys = gateway[:2]
    assert {name for name, _ in served(gateway, "eve", n=10)} != {"canary"}
    # What components/gateway/keys.py sends when the stack changes them: the new metadata.
    proxy.post("/key/update", {"key": keys["eve"], "metadata": key_metadata(
        developer("eve", ring="pilot", priority="background"))})
    answers = served(gateway, "eve", n=10)
    assert [name for name, _ in answers] == ["canary"] * 10
    assert {body["priority"] for _, body in answers} == {10}
