"""The vllm stand-in (localhosts/images/serving_image/vllm_standin.py) without a model: the command lines
it takes and refuses, the requests it refuses as vLLM v0.24.0 does, and its Prometheus text."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess

import pytest

from components.vllm_fleet import alerts
from config.types import Vllm
from localhosts.images.serving_image import vllm_standin
from localhosts.images.serving_image.vllm_standin import RequestError, forwarded_body, parse
from spear import vllm

FLEET = Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision="da6e2ed27304dd39abadd9c82ef50e8de67bdd4c",
             served_model_name="qwen3-coder-next", tensor_parallel_size=2,
             max_model_len=262144, port=8000)
SERVED = FLEET.served_model_name


def refusal(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("priority", [False, True], ids=["fcfs", "priority-scheduling"])
def test_the_fleets_rendered_command_line_is_taken_as_it_is(priority):
    argv = vllm.command_line(dataclasses.replace(FLEET, scheduling_priority=priority))
    model, flags = parse(argv[1:])
    assert model == FLEET.model
    assert flags["--served-model-name"] == SERVED
    assert flags.get("--scheduling-policy") == ("priority" if priority else None)


@pytest.mark.parametrize("change, reason", [
    (["--swap-space", "4"], "unknown argument '--swap-space'"),
    (["--port", "8001"], "--port given twice"),
    (["--scheduling-policy", "lifo"], "--scheduling-policy 'lifo': not a valid value"),
    (["--enable-auto-tool-choice=yes"], "--enable-auto-tool-choice given twice"),
    (["--api-key", "sk-x"], "--api-key: the API key belongs in VLLM_API_KEY"),
    (["--quantization=fp8"], "--quantization: the cookbook forbids it"),
])
def test_a_flag_it_does_not_take_is_refused_with_the_reason(change, reason, capsys):
    argv = vllm.command_line(FLEET)[1:] + change
    assert reason in refusal(argv, capsys)


def test_a_missing_flag_and_a_malformed_revision_are_refused(capsys):
    argv = vllm.command_line(FLEET)[1:]
    without_parser = [a for a in argv if a not in ("--tool-call-parser", "qwen3_coder")]
    assert "missing --tool-call-parser" in refusal(without_parser, capsys)
    short = [("abc123" if a == FLEET.revision else a) for a in argv]
    assert "--revision 'abc123': not a valid value" in refusal(short, capsys)


def test_it_refuses_every_flag_the_project_forbids_and_the_key_flag():
    assert set(vllm.FORBIDDEN_FLAGS) | {vllm.API_KEY_FLAG} <= set(vllm_standin.REFUSED)


def test_an_unknown_model_is_refused_with_the_ids_it_serves(capsys):
    config = {"models": {"Qwen/Qwen3-Coder-Next-FP8": {}, "spear-fleet/tiny-no-tool-template": {}}}
    with pytest.raises(SystemExit) as exit_:
        vllm_standin.model_entry(config, "meta-llama/Llama-3-8B")
    assert exit_.value.code == 2
    assert ("unknown model 'meta-llama/Llama-3-8B': this stand-in serves Qwen/Qwen3-Coder-Next-FP8,"
            " spear-fleet/tiny-no-tool-template") in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Requests

CHAT = {"model": SERVED, "messages": [{"role": "user", "content": "hi"}]}


def error(body: dict, priority_scheduling: bool = False) -> RequestError:
    with pytest.raises(RequestError) as err:
        forwarded_body(body, SERVED, priority_scheduling)
    return err.value


def test_a_non_zero_priority_without_priority_scheduling_is_a_400_in_vllms_words():
    err = error({**CHAT, "priority": 10})
    assert err.status == 400
    assert err.body() == {"error": {
        "message": "Got priority 10 but Priority scheduling is not enabled.",
        "type": "BadRequestError", "param": None, "code": 400}}


@pytest.mark.parametrize("priority", [0, 10, -5])
def test_with_priority_scheduling_any_integer_priority_is_taken_and_stripped(priority):
    assert forwarded_body({**CHAT, "priority": priority, "cache_salt": "team-a"}, SERVED,
                          True) == CHAT


def test_priority_zero_is_taken_without_priority_scheduling():
    assert forwarded_body({**CHAT, "priority": 0}, SERVED, False) == CHAT


@pytest.mark.parametrize("priority", ["10", 1.5, True])
def test_a_priority_that_is_not_an_integer_is_a_400(priority):
    assert error({**CHAT, "priority": priority}, True).param == "priority"


@pytest.mark.parametrize("salt", ["", 7])
def test_an_empty_or_non_string_cache_salt_is_a_400(salt):
    err = error({**CHAT, "cache_salt": salt})
    assert (err.status, err.message) == (
        400, "Parameter 'cache_salt' must be a non-empty string if provided.")


def test_another_models_name_is_a_404_and_no_name_is_the_served_model():
    err = error({**CHAT, "model": "gpt-4o"})
    assert (err.status, err.kind, err.param) == (404, "NotFoundError", "model")
    without = {k: v for k, v in CHAT.items() if k != "model"}
    assert forwarded_body(without, SERVED, False) == without


# ---------------------------------------------------------------------------------------------
# Metrics

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(name, labels): value} of a Prometheus text exposition; fails on a line it cannot read."""
    found = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match["labels"]))
        found[match["name"], labels] = float(match["value"])
    return found


def exercised() -> vllm_standin.Metrics:
    metrics = vllm_standin.Metrics(SERVED, slots=2)
    for _ in range(3):
        metrics.started()
    for seconds in (0.03, 0.3, 3.0):
        metrics.observe("vllm:time_to_first_token_seconds", seconds)
    metrics.observe("vllm:inter_token_latency_seconds", 0.01)
    metrics.finished("tool_calls", *vllm_standin.token_counts(
        {"usage": {"prompt_tokens": 30, "completion_tokens": 5},
         "timings": {"cache_n": 20, "prompt_n": 10, "predicted_n": 5}}))
    metrics.aborted()
    return metrics


def test_the_metrics_are_vllms_names_labelled_with_the_served_model():
    found = samples(exercised().render())
    model = ("model_name", SERVED)
    value = {name: v for (name, labels), v in found.items()
             if labels == frozenset({model})}
    assert value["vllm:num_requests_running"] == 2 and value["vllm:num_requests_waiting"] == 1
    assert value["vllm:prompt_tokens_total"] == 30
    assert value["vllm:generation_tokens_total"] == 5
    assert value["vllm:prefix_cache_queries_total"] == 30
    assert value["vllm:prefix_cache_hits_total"] == 20
    assert value["vllm:num_preemptions_total"] == 0
    assert value["vllm:time_to_first_token_seconds_count"] == 3
    assert value["vllm:time_to_first_token_seconds_sum"] == pytest.approx(3.33)
    assert found["vllm:time_to_first_token_seconds_bucket", frozenset({model, ("le", "0.04")})] == 1
    assert found["vllm:time_to_first_token_seconds_bucket", frozenset({model, ("le", "+Inf")})] == 3
    # A tool call finishes as a stop in vLLM's engine.
    success = "vllm:request_success_total"
    assert found[success, frozenset({model, ("finished_reason", "stop")})] == 1
    assert found[success, frozenset({model, ("finished_reason", "abort")})] == 1


def test_the_histogram_buckets_are_cumulative_and_end_at_the_count():
    found = samples(exercised().render())
    buckets = [(labels, v) for (name, labels), v in found.items()
               if name == "vllm:time_to_first_token_seconds_bucket"]
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and counts[-1] == 3
    assert dict(buckets[-1][0])["le"] == "+Inf"


def test_every_series_the_alert_rules_watch_is_there_for_the_served_model():
    text = exercised().render()
    for name in (alerts.PREEMPTIONS, f"{alerts.TTFT}_bucket", alerts.PREFIX_HITS,
                 alerts.PREFIX_QUERIES):
        assert re.search(rf'^{re.escape(name)}\{{[^}}]*model_name="{SERVED}"', text, re.M), name


def test_promtool_reads_the_exposition_and_minds_only_the_colons_vllms_names_have():
    assert shutil.which("promtool"), "promtool is missing: scripts/setup.sh installs it"
    checked = subprocess.run(["promtool", "check", "metrics"], input=exercised().render(),
                             capture_output=True, text=True)
    complaints = (checked.stdout + checked.stderr).splitlines()
    assert complaints and all(line.endswith("metric names should not contain ':'")
                              for line in complaints), complaints


def test_a_model_name_with_quotes_is_escaped_in_its_label():
    text = vllm_standin.Metrics('a"b\\c').render()
    assert 'model_name="a\\"b\\\\c"' in text
    assert samples(text)


# The scripted task (the diff-producing seat turn): the tiny model cannot call tools.
WRITE_TOOL = {"type": "function", "function": {"name": "Write", "parameters": {}}}
TASK = "Create /workspace/demo/hello.py that prints a greeting."


def test_the_scripted_task_is_one_write_call_then_a_one_line_answer():
    asked = {"messages": [{"role": "system", "content": "You are Claude Code."},
                          {"role": "user", "content": [{"type": "text", "text": "<reminder/>"},
                                                       {"type": "text", "text": TASK}]}],
             "tools": [WRITE_TOOL]}
    call = vllm_standin.scripted_answer(asked)
    [tool_call] = call["tool_calls"]
    assert tool_call["function"]["name"] == "Write"
    assert json.loads(tool_call["function"]["arguments"]) == {
        "file_path": "/workspace/demo/hello.py", "content": vllm_standin.SCRIPTED_CONTENT}
    answered = {**asked, "messages": [*asked["messages"], {"role": "assistant", **call},
                                      {"role": "tool", "tool_call_id": tool_call["id"],
                                       "content": "File created"}]}
    assert vllm_standin.scripted_answer(answered) == {
        "role": "assistant", "content": "Wrote /workspace/demo/hello.py."}
    # Streamed, the call is one tool_calls delta, and the stream ends as OpenAI's does.
    events = vllm_standin.scripted_events(call, SERVED).decode().split("\n\n")
    chunks = [json.loads(e.removeprefix("data: ")) for e in events if e and "[DONE]" not in e]
    assert chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "Write"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and events[-2] == "data: [DONE]"


def test_everything_else_goes_to_the_model():
    plain = {"messages": [{"role": "user", "content": TASK}]}  # no Write tool offered
    assert vllm_standin.scripted_answer(plain) is None
    other = {"messages": [{"role": "user", "content": "Say hi."}], "tools": [WRITE_TOOL]}
    assert vllm_standin.scripted_answer(other) is None
    # A tool result that is not the scripted call's is the model's too.
    theirs = {"messages": [{"role": "user", "content": TASK},
                           {"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
              "tools": [WRITE_TOOL]}
    assert vllm_standin.scripted_answer(theirs) is None
