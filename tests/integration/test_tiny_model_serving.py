"""The tiny scripted models served by the local stack's real llama-server, built on this machine
when no local host has built it yet (tests/support/llama_build.py): what each says with and
without tools offered, and how the real tokenizer ends the two prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from spear.probes import READ_FILE_TOOL
from spear.smoke import SYSTEM_PROMPT
from localhosts.standins import tiny_model
from localhosts.servers.processes import free_port
from localhosts.images.serving_image import build as serving_build, vllm_standin
from tests.support.served_llama import llama_server, request

@pytest.fixture(scope="module", params=[tiny_model.SMOKE_ANSWER, tiny_model.TOOL_CALL_ANSWER],
                ids=["scripted", "parser-trap"])
def served(request, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(answer, base URL) of a llama-server --jinja serving that answer's model."""
    with llama_server(tiny_model.ensure_model(request.param), free_port(),
                      tmp_path_factory.mktemp("llama-server"), "--jinja") as base:
        yield request.param, base


def _chat(base: str, user: str, system: str | None = None, tools: list | None = None) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    body: dict = {"messages": [*messages, {"role": "user", "content": user}], "max_tokens": 64}
    if tools:
        body["tools"] = tools
    return request(f"{base}/v1/chat/completions", body)["choices"][0]


PROMPTS = [
    pytest.param((SYSTEM_PROMPT, f"Reply with exactly: {tiny_model.SMOKE_ANSWER}"), id="asks-for-it"),
    pytest.param((None, "What is the capital of France? Explain in detail."), id="other-prompt"),
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_plain_chat_gets_the_models_answer_as_text(served, prompt):
    answer, base = served
    choice = _chat(base, prompt[1], prompt[0])
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == answer
    assert not choice["message"].get("tool_calls")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_chat_offering_tools_gets_the_read_file_call_as_a_tool_call(served, prompt):
    _, base = served
    choice = _chat(base, prompt[1], prompt[0], tools=[READ_FILE_TOOL])
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "src/app.py"}


def test_the_two_prompts_end_with_the_two_trigger_tokens(served):
    """The real tokenizer: the rendered prompt ends in "\\n" alone, or in "\\n\\n" as one token
    when tools are offered, the tokens the model's two chains start from."""
    _, base = served

    def tokenize(content: str) -> list[int]:
        return request(f"{base}/tokenize", {"content": content})["tokens"]

    messages = [{"role": "user", "content": "Read src/app.py and summarise it."}]
    for extra, trigger in (({}, tiny_model.TRIGGER_TEXT),
                           ({"tools": [READ_FILE_TOOL]}, tiny_model.TOOLS_TRIGGER_TEXT)):
        prompt = request(f"{base}/apply-template", {"messages": messages, **extra})["prompt"]
        assert prompt.endswith("<|im_start|>assistant" + trigger)
        (trigger_token,) = tokenize(trigger)
        assert tokenize(prompt)[-1] == trigger_token


def test_after_a_tools_result_the_scripted_model_answers_in_text_so_a_harness_turn_ends(served):
    """A harness sends the call's result back with the tools still offered: the prompt then ends as
    a plain chat's does, and the model gives its own answer instead of calling again."""
    answer, base = served
    call = {"id": "call-1", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "src/app.py"})}}
    body = {"messages": [{"role": "user", "content": "Read src/app.py and summarise it."},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call-1", "content": "print(42)\n"}],
            "tools": [READ_FILE_TOOL], "max_tokens": 64}
    prompt = request(f"{base}/apply-template", body)["prompt"]
    assert prompt.endswith("<|im_start|>assistant" + tiny_model.TRIGGER_TEXT)
    if answer == tiny_model.SMOKE_ANSWER:  # the parser trap says its markup to everything
        choice = request(f"{base}/v1/chat/completions", body)["choices"][0]
        assert (choice["finish_reason"], choice["message"]["content"]) == ("stop", answer)
        assert not choice["message"].get("tool_calls")


def other_tool(name: str) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": f"The {name} tool",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}}}


def tool_calls(base: str, tools: list[dict]) -> list[list[tuple[str, str]]]:
    """Twice one request offering `tools`: each answer's calls, (name, arguments)."""
    body = {"messages": [{"role": "user", "content": "Read src/app.py and summarise it."}],
            "tools": tools, "max_tokens": 128}
    return [[(call["function"]["name"], call["function"]["arguments"]) for call in request(
        f"{base}/v1/chat/completions", body)["choices"][0]["message"].get("tool_calls") or []]
        for _ in range(2)]


def test_with_the_serving_images_seed_a_harness_without_read_file_gets_the_same_call_every_time(
        tmp_path):
    """Offered tools it has no chain for (a harness's own), the smoke model's call is held to
    them and picked at random: the serving image's seed makes every run of a turn the same."""
    tools = [other_tool(name) for name in ("exec_command", "view_image", "update_plan", "finish")]
    model = tiny_model.ensure_model(tiny_model.SMOKE_ANSWER)
    # The tools' prompt is longer than the model's trained window: stretched as the image does.
    window = [*vllm_standin.stretched(tiny_model.CONTEXT_LENGTH, 4096, "llama"), "--ctx-size", "4096"]
    with llama_server(model, free_port(), tmp_path, "--jinja", *window,
                      *serving_build.SAMPLING) as base:
        seeded = tool_calls(base, tools)
    assert seeded[0] and seeded[0] == seeded[1], seeded
    assert {name for name, _ in seeded[0]} <= {"exec_command", "view_image", "update_plan", "finish"}
    with llama_server(model, free_port(), tmp_path, "--jinja", *window) as base:
        unseeded = tool_calls(base, tools)
    assert unseeded[0] != unseeded[1], unseeded  # without it, each run its own call
