"""The fleet upstream stand-in answers what the hatch tests rely on: completions with usage and
unique ids, and the status a test chose (for all requests or for one)."""

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.processes import free_port

PORT = free_port()  # not a fixed one: the integration tests' servers run beside


def post(url, body, timeout=10):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def ask(upstream, text="hi", **extra):
    return post(f"{upstream.base_url}/chat/completions",
                {"model": "m", "messages": [{"role": "user", "content": text}], **extra})


@pytest.fixture
def upstream():
    with OpenAIUpstream(PORT, hang_seconds=1.5) as up:
        yield up


def test_each_completion_has_usage_and_its_own_id(upstream):
    answers = [json.loads(ask(upstream, max_tokens=5)[1]) for _ in range(3)]
    assert len({a["id"] for a in answers}) == 3
    assert all(a["usage"]["completion_tokens"] == 5 and a["usage"]["prompt_tokens"] > 0 for a in answers)
    assert answers[0]["choices"][0]["message"]["content"] == "SPEAR-UPSTREAM-OK"
    assert upstream.completions_served() == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422, 429, 500, 503])
def test_a_chosen_status_is_answered_until_the_test_serves_again(upstream, status):
    upstream.answer_with(status)
    with pytest.raises(urllib.error.HTTPError) as err:
        ask(upstream)
    assert err.value.code == status
    assert json.loads(err.value.read())["error"]["code"] == str(status)
    upstream.answer_with(None)
    assert ask(upstream)[0] == 200
    assert [c.answered for c in upstream.calls] == [status, 200]


def test_one_request_chooses_its_own_status_in_its_text(upstream):
    with pytest.raises(urllib.error.HTTPError) as err:
        ask(upstream, "please SPEAR-ANSWER-STATUS=422")
    assert err.value.code == 422
    assert ask(upstream)[0] == 200


def test_a_timeout_is_a_connection_that_never_answers(upstream):
    upstream.answer_with("timeout")
    start = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        post(f"{upstream.base_url}/chat/completions",
             {"messages": [{"role": "user", "content": "x"}]}, timeout=0.5)
    assert time.monotonic() - start < 1.4
    assert upstream.calls[-1].answered == "timeout"


def test_an_unknown_status_is_refused_naming_the_allowed_ones(upstream):
    with pytest.raises(ValueError, match="allowed are"):
        upstream.answer_with(418)


def test_a_streamed_completion_ends_with_usage_and_done(upstream):
    status, text = ask(upstream, stream=True, stream_options={"include_usage": True})
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "SPEAR-UPSTREAM-OK"
    assert chunks[-1]["usage"]["completion_tokens"] == 12
