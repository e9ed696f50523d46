"""The frontier stand-in speaks the Messages API the way the hatch tests need: usage, unique
ids, the provider key checked, every call counted."""

import json
import urllib.error
import urllib.request

import pytest

from localhosts.servers.processes import free_port
from localhosts.standins.frontier_standin import FrontierStandin

PORT = free_port()  # not a fixed one: the integration tests' servers run beside
KEY = "sk-ant-standin"


def messages(standin, body, key=KEY, version="2023-06-01"):
    headers = {"Content-Type": "application/json", "x-api-key": key, "anthropic-version": version}
    req = urllib.request.Request(f"{standin.base_url}/v1/messages", data=json.dumps(body).encode(),
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode()


BODY = {"model": "claude-standin", "max_tokens": 7, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def standin():
    with FrontierStandin(PORT, KEY) as s:
        yield s


def test_each_message_has_usage_its_own_id_and_is_counted(standin):
    answers = [json.loads(messages(standin, BODY)) for _ in range(2)]
    assert answers[0]["id"] != answers[1]["id"] and answers[0]["id"].startswith("msg_")
    assert answers[0]["content"] == [{"type": "text", "text": "SPEAR-FRONTIER-OK"}]
    assert answers[0]["usage"]["output_tokens"] == 7 and answers[0]["stop_reason"] == "max_tokens"
    assert standin.calls == 2


def test_filling_max_tokens_makes_every_answer_use_exactly_its_limit():
    with FrontierStandin(PORT, KEY, fill_max_tokens=True, output_tokens=1) as s:
        assert json.loads(messages(s, BODY | {"max_tokens": 5}))["usage"]["output_tokens"] == 5


@pytest.mark.parametrize("key, body, status", [
    ("wrong", BODY, 401),
    (KEY, {k: v for k, v in BODY.items() if k != "max_tokens"}, 400),
    (KEY, BODY | {"messages": [{"role": "system", "content": "x"}]}, 400),
])
def test_a_request_the_provider_would_refuse_is_refused_and_not_counted(standin, key, body, status):
    with pytest.raises(urllib.error.HTTPError) as err:
        messages(standin, body, key=key)
    assert err.value.code == status
    assert json.loads(err.value.read())["type"] == "error"
    assert standin.calls == 0 and len(standin.refused) == 1


def test_a_streamed_message_ends_with_its_usage_and_message_stop(standin):
    text = messages(standin, BODY | {"stream": True})
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][0] == "message_start"
    assert events[-1] == {"type": "message_stop"}
    assert events[-2]["usage"]["output_tokens"] == 7
    assert events[2]["delta"]["text"] == "SPEAR-FRONTIER-OK"
