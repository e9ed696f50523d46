"""A client that hangs up mid-stream (issue 40), on real LiteLLM (both pinned versions) with the
budget ledger in a real PostgreSQL: each stream cut after its first chunk is settled at once, at
what it used (spear_gateway/litellm_hooks.py, "A client gone mid-stream"), so a developer who
interrupts answers keeps the headroom they did not use; the fleet's stream stops too.

The developer's budget holds about six worst cases beyond nothing spent; 24 streams are cut one
after another, then plain requests must still be served."""

import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from components.hostops.waiting import wait_until
from localhosts.images import harness_install
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import migrate
from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database
from localhosts.servers.spear_gateway_proxy import FRONTIER_KEY, gateway_config, metric, spear_proxy
from spear import harness
from spear.rules import CODER_MODEL

# LiteLLM version: (proxy port, first of two stand-in ports: the fleet, the frontier)
VERSIONS = dict(zip(TESTED_LITELLM, ((4150, 8196), (4151, 8198))))
PRICES = (1e-6, 1e-4)  # USD per token, (input, output)
MAX_TOKENS = 32
CUTS, PLAIN = 24, 4
BODY = {"model": CODER_MODEL, "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": "Write a long answer."}]}


@pytest.fixture(scope="module", params=list(VERSIONS))
def gateway(request, tmp_path_factory):
    """(proxy, the developer's key, the fleet's stand-in, the database, a key with room for a
    harness's turn)."""
    proxy_port, first = VERSIONS[request.param]
    venv = litellm_venv(request.param).path
    # 40 chunks 0.25 s apart: a stream outlives its client's first read by seconds, and a stream
    # read to its end passes the hooks' 5 s checkpoint.
    with postgres_database() as db, \
            OpenAIUpstream(first, completion_tokens=40, chunk_seconds=0.25) as upstream, \
            FrontierStandin(first + 1, FRONTIER_KEY) as frontier:
        migrate(venv, db.url)
        config = gateway_config(upstream.base_url, frontier.base_url, coder_prices=PRICES,
                                request_timeout=30)
        with spear_proxy(venv, config, port=proxy_port, hatch_cap_usd=10.0,
                         log_dir=tmp_path_factory.mktemp(f"disconnect-{request.param}"),
                         database_url=db.url) as proxy:
            worst = 2000 * PRICES[0] + MAX_TOKENS * PRICES[1]  # a generous bound of one hold
            key = proxy.post("/key/generate", {
                "models": [CODER_MODEL], "max_budget": round(6 * worst, 6), "budget_duration": "30d",
                "metadata": {"developer": "cyn", "team": "research"}})["key"]
            roomy = proxy.post("/key/generate", {
                "models": [CODER_MODEL], "max_budget": 50.0, "budget_duration": "30d",
                "metadata": {"developer": "ana", "team": "platform"}})["key"]
            # The ledger makes its tables at its first request.
            assert proxy.post("/v1/chat/completions", BODY, key=roomy)["choices"]
            yield proxy, key, upstream, db, roomy


def cut_after_first_chunk(proxy, key: str) -> bytes:
    """One streamed request, the connection closed once its first output chunk arrived."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", json.dumps({**BODY, "stream": True}),
                 {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    answer = conn.getresponse()
    assert answer.status == 200, answer.read()[:500]
    seen = b""
    while b'"content":"SPEAR' not in seen.replace(b" ", b""):
        line = answer.fp.readline()
        assert line, seen
        seen += line
    conn.sock.shutdown(2)
    conn.close()
    return seen


def spend_of(db, key: str) -> float:
    """What the ledger charged the key (it keys by LiteLLM's token: the key's sha256)."""
    return int(db.psql("SELECT used_nanos FROM spear_gateway.spear_budget_keys WHERE key ="
                       f" '{hashlib.sha256(key.encode()).hexdigest()}'") or 0) / 1e9


def holds_in_flight(db) -> int:
    return int(db.psql("SELECT count(*) FROM spear_gateway.spear_budget_requests WHERE NOT settled"))


def test_streams_cut_by_their_client_release_their_holds_at_once_and_charge_what_they_used(gateway):
    proxy, key, upstream, db, _ = gateway
    for _ in range(CUTS):
        cut_after_first_chunk(proxy, key)
    cut_at = time.monotonic()
    assert wait_until(lambda: holds_in_flight(db) == 0, timeout=5), \
        f"{holds_in_flight(db)} holds still in flight after the cuts"
    settled_within = time.monotonic() - cut_at
    assert settled_within < 1.5, settled_within
    # Headroom came back: plain requests within the budget are served.
    for _ in range(PLAIN):  # a refusal would raise ProxyError 429
        assert proxy.post("/v1/chat/completions", BODY, key=key)["choices"]
    assert metric(proxy, "spear_budget_settled_on_disconnect_total") == CUTS
    # Each cut was charged the prompt's bound and the output it carried, far below its hold.
    used = spend_of(db, key)
    worst = 2000 * PRICES[0] + MAX_TOKENS * PRICES[1]
    assert 0 < used < (CUTS + PLAIN) * worst / 2, used
    # The fleet's streams stopped when their clients went (LiteLLM closes the upstream).
    assert wait_until(lambda: upstream.streams_cut >= CUTS, timeout=10), upstream.streams_cut


def test_a_long_stream_records_what_it_used_so_far_for_its_holds_expiry(gateway):
    # Should the gateway process die mid-stream, the TTL charges what was measured, not the
    # worst case (the stores' tests charge it: test_budget_windows.py, test_gateway_budget_store.py).
    proxy, _, _, db, key = gateway
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", json.dumps({**BODY, "stream": True}),
                 {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    answer = conn.getresponse()
    measured = ("SELECT measured_nanos FROM spear_gateway.spear_budget_requests WHERE NOT settled"
                " AND measured_nanos IS NOT NULL")
    try:
        assert wait_until(lambda: answer.fp.readline() and db.psql(measured) != "", timeout=20), \
            "no checkpoint while the stream went on"
        assert 0 < int(db.psql(measured)) < int(db.psql(
            "SELECT held_nanos FROM spear_gateway.spear_budget_requests WHERE NOT settled"))
        while answer.fp.readline():
            pass
    finally:
        conn.close()
    # Read to its end, it is settled by the success path as before.
    assert wait_until(lambda: holds_in_flight(db) == 0, timeout=10)


def test_a_client_that_hangs_up_before_a_plain_answer_is_charged_its_prompt_at_once(gateway):
    # Not streamed: LiteLLM cancels the fleet's call when its client is gone (its
    # cancel_on_disconnect) and tells the failure hook, which settles the prompt's bound.
    proxy, _, upstream, db, key = gateway
    spent = spend_of(db, key)
    settled = metric(proxy, "spear_budget_settled_on_disconnect_total")
    upstream.delay_seconds = 5  # the fleet is slow to answer
    try:
        body = json.dumps(BODY).encode()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as conn:
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n"
                         b"Content-Type: application/json\r\n"
                         + f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n"
                         .encode() + body)
            assert wait_until(lambda: holds_in_flight(db) == 1, timeout=10), "never admitted"
        gone = time.monotonic()
        # Settled before the fleet would have answered: its call was cancelled.
        assert wait_until(lambda: holds_in_flight(db) == 0, timeout=3), "the hold was left behind"
        assert time.monotonic() - gone < 3
    finally:
        upstream.delay_seconds = 0
    charged = spend_of(db, key) - spent
    worst = 2000 * PRICES[0] + MAX_TOKENS * PRICES[1]
    assert 0 < charged < MAX_TOKENS * PRICES[1] < worst, charged  # the prompt only
    assert metric(proxy, "spear_budget_settled_on_disconnect_total") == settled + 1


def test_a_real_harness_killed_mid_answer_leaves_no_hold_behind(gateway, tmp_path):
    # Qwen-Code at the stack's version, wired by spear/harness.py with a developer's key, killed
    # (as Ctrl-C twice, or a closed terminal, would end it) while the fleet streams its answer.
    proxy, _, upstream, db, key = gateway
    command = harness_install.install(harness.QWEN_CODE, harness.DEFAULT_VERSIONS[harness.QWEN_CODE])
    wiring = harness.wiring(proxy.base_url, key, CODER_MODEL, harness.DEFAULT_VERSIONS,
                            harness.Window(32768, 4096))[harness.QWEN_CODE]
    home = tmp_path / "home"
    if "file" in wiring:
        path = home / wiring["file"]["path"].removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wiring["file"]["content"])
    home.mkdir(exist_ok=True)
    settled = metric(proxy, "spear_budget_settled_on_disconnect_total")
    asked = len(upstream.calls)
    turn = subprocess.Popen([str(command), "--approval-mode", "plan", "Explain this repository."],
                            cwd=tmp_path, env={"PATH": os.environ["PATH"], "HOME": str(home),
                                               **wiring["env"]},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert wait_until(lambda: any(c.body.get("stream") for c in upstream.calls[asked:])
                          and holds_in_flight(db) > 0, timeout=120), "the harness never asked"
        time.sleep(1)  # the answer is streaming: 40 chunks, 0.25 s apart
    finally:
        os.killpg(turn.pid, signal.SIGKILL)
        turn.wait()
    assert wait_until(lambda: holds_in_flight(db) == 0, timeout=10), \
        f"{holds_in_flight(db)} holds left behind by the killed harness"
    assert metric(proxy, "spear_budget_settled_on_disconnect_total") > settled
