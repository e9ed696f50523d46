"""The endpoint probes (spear/probes.py): the cookbook's requests and their judges,
and EndpointVerificationProvider's handling of them against a fake SSH session (the real server
and SSH channel are in tests/integration/test_endpoint_verification.py)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.runtime import rpc

from components.endpoints import verification
from spear import probes
from spear.probes import COMPLETION, MODEL_LIST, TOOL_CALL, judge_completion, judge_tool_call
from spear import tokens
from tests.support.stack_files import RecordingMocks

SERVED = "qwen3-coder-next"
CALL_MARKUP = '<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>'


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def model_list(*ids: str) -> bytes:
    return body({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def chat(content: str | None = None, finish: str = "stop", calls: list | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return body({"choices": [{"index": 0, "message": message, "finish_reason": finish}]})


def read_file_call(arguments: str = '{"path": "src/app.py"}', name: str = "read_file") -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


def judge_list(status: int, answer: bytes) -> probes.ProbeResult:
    return probes.judge_model_list(SERVED, status, answer)


# --- The requests.

def test_the_probes_run_in_the_cookbooks_order():
    assert [(p.name, p.method, p.path) for p in probes.probes(SERVED)] == [
        (MODEL_LIST, "GET", "/v1/models"),
        (COMPLETION, "POST", "/v1/chat/completions"),
        (TOOL_CALL, "POST", "/v1/chat/completions"),
    ]


def test_the_model_list_is_asked_for_without_a_body():
    assert probes.probes(SERVED)[0].encoded_body() == b""


def test_the_completion_is_the_cookbooks_one_liner_request():
    assert json.loads(probes.probes(SERVED)[1].encoded_body()) == {
        "model": SERVED,
        "messages": [{"role": "user", "content": "Write a Python one-liner that reverses a string."}],
        "max_tokens": 128,
    }


def test_the_tool_call_request_is_the_cookbooks_read_file_request():
    assert json.loads(probes.probes(SERVED)[2].encoded_body()) == {
        "model": SERVED,
        "messages": [{"role": "user", "content": "Read src/app.py and summarise it."}],
        "tools": [{"type": "function", "function": {
            "name": "read_file",
            "description": "Read a file from the repository",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}}}],
        "tool_choice": "auto",
        "max_tokens": 256,
    }


def test_the_tool_call_gate_admits_the_cookbooks_registry():
    assert {name: (dict(spec.required), dict(spec.optional))
            for name, spec in probes.TOOL_REGISTRY.items()} == {
        "read_file": ({"path": str}, {"max_bytes": int}),
        "run_tests": ({"target": str}, {}),
    }


# --- Probe 1: the model list.

def test_a_model_list_naming_the_served_model_passes():
    result = judge_list(200, model_list("other", SERVED))
    assert (result.name, result.passed, result.reason) == (MODEL_LIST, True, "ok")


def test_a_model_list_without_the_served_model_fails_and_shows_what_it_lists():
    result = judge_list(200, model_list("/models/spear.gguf"))
    assert (result.passed, result.reason) == (False, "model-not-listed")
    assert "/models/spear.gguf" in result.detail and SERVED in result.detail


@pytest.mark.parametrize("answer", [{"data": "nope"}, {"data": [{"name": SERVED}]}, {"data": ["x"]},
                                    {"models": []}])
def test_an_answer_that_is_not_an_openai_model_list_fails(answer):
    assert judge_list(200, body(answer)).reason == "bad-model-list"


def test_an_http_error_fails_with_its_status_and_body():
    result = judge_list(401, b'{"error": {"message": "Invalid API Key"}}')
    assert (result.passed, result.reason) == (False, "http-error")
    assert result.detail.startswith("HTTP 401:") and "Invalid API Key" in result.detail


@pytest.mark.parametrize("answer", [b"<html>proxy error</html>", b"[]"])
def test_an_answer_that_is_not_a_json_object_fails(answer):
    assert judge_list(200, answer).reason == "not-json"


def test_a_long_answer_is_cut_short_in_the_detail():
    result = judge_list(502, b"x" * 10_000)
    assert len(result.detail) < probes.DETAIL_CHARS + 50 and result.detail.endswith("...")


# --- Probe 2: a plain completion.

def test_a_completion_that_stops_with_text_passes():
    result = judge_completion(200, chat("print('abc'[::-1])"))
    assert (result.name, result.passed, result.reason) == (COMPLETION, True, "ok")


def test_a_completion_cut_by_the_length_limit_fails():
    result = judge_completion(200, chat("print('abc'", finish="length"))
    assert (result.passed, result.reason) == (False, "not-stopped")
    assert "'length'" in result.detail


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_completion_without_text_fails(content):
    assert judge_completion(200, chat(content)).reason == "empty-text"


@pytest.mark.parametrize("content", ["<think>The user wants a one-liner.</think>print('abc'[::-1])",
                                     "print('abc'[::-1])\n<think>done</think>"])
def test_a_completion_with_a_think_block_fails_a_model_without_a_thinking_mode(content):
    result = judge_completion(200, chat(content))
    assert (result.passed, result.reason) == (False, "thinking-output")
    assert "<think>" in result.detail


def test_a_completion_with_reasoning_beside_its_text_fails_too():
    answer = json.loads(chat("print('abc'[::-1])"))
    answer["choices"][0]["message"]["reasoning_content"] = "The user wants a one-liner."
    assert judge_completion(200, json.dumps(answer).encode()).reason == "thinking-output"


def test_a_plain_question_answered_with_a_tool_call_fails():
    # Seed 6.2.10: end_turn requires zero tool calls.
    assert judge_completion(200, chat(None, "tool_calls", [read_file_call()])).reason == (
        "unexpected-tool-call")


@pytest.mark.parametrize("answer", [{}, {"choices": []}, {"choices": ["text"]}])
def test_a_completion_without_a_choice_fails(answer):
    assert judge_completion(200, body(answer)).reason == "no-choices"


# --- Probe 3: the tool call, judged by the gate.

def test_a_well_formed_read_file_call_passes_and_shows_the_call():
    result = judge_tool_call(200, chat("", "tool_calls", [read_file_call()]))
    assert (result.name, result.passed, result.reason) == (TOOL_CALL, True, "ok")
    assert result.detail == 'read_file({"path": "src/app.py"})'


def test_tool_call_markup_in_the_text_is_the_parser_trap():
    result = judge_tool_call(200, chat(CALL_MARKUP))
    assert (result.passed, result.reason) == (False, "parser-not-configured")
    assert "<tool_call>" in result.detail


@pytest.mark.parametrize(("answer", "why"), [
    (chat("I will summarise it without reading it."), "no-tool-call"),
    (chat("", "tool_calls", [read_file_call(name="delete_repo")]), "unknown-tool"),
    (chat("", "tool_calls", [read_file_call('{"path": "src/a')]), "malformed-arguments"),
    (chat("", "length", [read_file_call()]), "truncated-or-mixed"),
    (body({"choices": []}), "no-choices"),
])
def test_the_tool_call_probe_fails_with_the_gates_reason(answer, why):
    assert judge_tool_call(200, answer).reason == why


def test_a_server_that_refuses_tools_fails_the_tool_call_probe_with_its_message():
    result = judge_tool_call(500, b'{"error": {"message": "tools param requires --jinja flag"}}')
    assert result.reason == "http-error" and "requires --jinja" in result.detail


# --- The provider, on a fake SSH session.

class FakeSession:
    """Stands in for Session: answers by path, or by whether the chat offers tools; records each
    request as (method, what was asked, headers)."""

    def __init__(self, answers: dict[str, tuple[int, bytes]]) -> None:
        self.answers = answers
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, connection: dict) -> FakeSession:
        return self

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def http(self, port: int, method: str, path: str, body: bytes = b"", address: str = "127.0.0.1",
             timeout: float = 30.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        key = path if not body else ("tools" if b'"tools"' in body else "plain")
        self.requests.append((method, key, dict(headers or {})))
        if key not in self.answers:
            raise ConnectionError(f"nothing answers on {address}:{port}")
        return self.answers[key]


HEALTHY = {"/v1/models": (200, model_list(SERVED)), "plain": (200, chat("SPEAR-BACKEND-OK")),
           "tools": (200, chat("", "tool_calls", [read_file_call()]))}
PROPS = {"endpoint": "reds", "connection": {"host": "127.0.0.1", "port": 2222}, "address": "127.0.0.1",
         "port": 8010, "served_model": SERVED, "api_key": None, "triggers": {}}


@pytest.fixture
def session(monkeypatch):
    def install(answers: dict[str, tuple[int, bytes]]) -> FakeSession:
        fake = FakeSession(answers)
        monkeypatch.setattr(verification, "Session", fake)
        return fake
    return install


def test_a_healthy_endpoint_records_the_probes_that_passed_and_the_listed_models(session):
    fake = session(HEALTHY)
    result = verification.EndpointVerificationProvider().create(PROPS)
    assert result.id == "reds@127.0.0.1:127.0.0.1:8010"
    assert result.outs["passed"] == ["model-list", "completion", "tool-call"]
    assert result.outs["served_model_ids"] == [SERVED]
    assert [(m, k) for m, k, _ in fake.requests] == [("GET", "/v1/models"), ("POST", "plain"),
                                                     ("POST", "tools")]


def test_the_api_key_goes_in_a_bearer_header_on_every_probe(session):
    fake = session(HEALTHY)
    verification.EndpointVerificationProvider().create({**PROPS, "api_key": "sk-test"})
    assert [h for _, _, h in fake.requests] == [{"Authorization": "Bearer sk-test"}] * 3


def test_no_api_key_sends_no_authorization_header(session):
    fake = session(HEALTHY)
    verification.EndpointVerificationProvider().create(PROPS)
    assert all(h == {} for _, _, h in fake.requests)


def test_a_failed_probe_fails_the_update_naming_the_endpoint_probe_and_reason(session):
    fake = session({**HEALTHY, "tools": (200, chat(CALL_MARKUP))})
    with pytest.raises(verification.VerificationFailed,
                       match=r"^endpoint reds: tool-call probe failed: parser-not-configured \(.*<tool_call>"):
        verification.EndpointVerificationProvider().update("id", PROPS, {**PROPS, "triggers": {"t": 2}})
    assert len(fake.requests) == 3


def test_the_probes_stop_at_the_first_failure(session):
    fake = session({**HEALTHY, "/v1/models": (200, model_list("other"))})
    with pytest.raises(verification.VerificationFailed, match="model-list probe failed: model-not-listed"):
        verification.EndpointVerificationProvider().create(PROPS)
    assert len(fake.requests) == 1


def test_an_endpoint_nothing_answers_on_is_unreachable(session):
    session({})
    with pytest.raises(verification.VerificationFailed,
                       match=r"endpoint reds: model-list probe failed: unreachable \(nothing answers"):
        verification.EndpointVerificationProvider().create(PROPS)


def test_a_new_trigger_or_served_model_re_runs_the_probes_but_a_new_connection_is_only_recorded(session):
    provider = verification.EndpointVerificationProvider()
    assert provider.diff("id", PROPS, {**PROPS, "triggers": {"started_at": "2"}}).changes
    assert provider.diff("id", PROPS, {**PROPS, "served_model": "other"}).changes
    moved = {**PROPS, "connection": {"host": "h", "port": 22}}
    assert provider.diff("id", PROPS, moved).changes
    fake = session(HEALTHY)
    assert provider.update("id", PROPS, moved).outs == {**PROPS, "connection": moved["connection"]}
    assert fake.requests == []  # no probe ran


def test_reading_the_check_back_returns_what_it_recorded():
    outs = {**PROPS, "passed": ["model-list"], "served_model_ids": [SERVED]}
    assert verification.EndpointVerificationProvider().read("id", outs).outs == outs


# --- The resource, under Pulumi's mocks.

@pytest.fixture
def mocks() -> RecordingMocks:
    recorded = RecordingMocks()
    pulumi.runtime.set_mocks(recorded, project="spear-fleet", stack="prod")
    return recorded


@pulumi.runtime.test
def declare_reds_verification():
    verification.EndpointVerification("reds-endpoint", verification.EndpointVerificationArgs(
        endpoint="reds", connection=pulumi.Output.secret(PROPS["connection"]), port=8010,
        served_model=SERVED, api_key=pulumi.Output.secret("sk-test"),
        triggers={"started_at": "1"}))


def test_the_resource_has_its_own_type_and_gets_the_api_key_as_a_secret(mocks):
    declare_reds_verification()
    args = mocks.resources["reds-endpoint"]
    assert args.typ == tokens.ENDPOINT_VERIFICATION.type == "pulumi-python:dynamic/spear:EndpointVerification"
    assert {k: args.inputs.get(k) for k in ("endpoint", "address", "port", "served_model", "triggers")} == {
        "endpoint": "reds", "address": "127.0.0.1", "port": 8010, "served_model": SERVED,
        "triggers": {"started_at": "1"}}
    # The mocks see a secret in its wire form: the secret signature next to the value.
    assert args.inputs["api_key"] == {rpc._special_sig_key: rpc._special_secret_sig, "value": "sk-test"}


def test_a_track_behind_a_service_is_proven_after_its_replaced_pods_drained_once_it_answers(session, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(verification.time, "sleep", slept.append)
    fake = session(HEALTHY)
    answers = iter([False, False, True])  # kube-proxy catching up with the new pods
    monkeypatch.setattr(verification, "_answers", lambda host, port, address: next(answers))
    track = {**PROPS, "settle_seconds": 25.0}
    assert verification.EndpointVerificationProvider().update("id", PROPS, track).outs["passed"] == [
        "model-list", "completion", "tool-call"]
    assert slept[0] == 25.0 and len(slept) == 3  # the drain, then two polls before it answered
    assert next(answers, "all used") == "all used"
    assert [k for _, k, _ in fake.requests] == ["/v1/models", "plain", "tools"]


def test_an_endpoint_not_behind_a_service_is_probed_at_once(session, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(verification.time, "sleep", slept.append)
    session(HEALTHY)
    verification.EndpointVerificationProvider().update("id", PROPS, PROPS)
    assert slept == []
