"""The rollout gate run for real (gate/run.py): real llama-servers behind a real LiteLLM proxy,
addressed by route, the task set and trace from the repository, and the stack's config check
judging the record the run wrote. A neutral bump passes and promotes; the parser trap fails on
its tool calls, a regressing model on the paired eval with b, c and p."""

from __future__ import annotations

import contextlib

import pytest

from config.checker import ConfigError
from config.schema import parse
from gate import run as gate_run
from localhosts import tiny_model
from localhosts.litellm_venv import litellm_venv
from localhosts.litellm_proxy import LitellmProxy
from localhosts.processes import free_port
from tests.support import gate_records as records
from tests.support.config_cases import CANARY_PAIR, problem_line, promoted_raw
from tests.support.served_llama import llama_server

LITELLM = "1.91.1"
# Room for the trace's longest prompt, and a request offering every registry tool, in each of
# llama-server's slots (it splits the window among them), stretched past the tiny model's trained
# length as serve.sh and the serving image stretch it.
SLOT = 1024
WINDOW = ("--ctx-size", str(4 * SLOT), "--rope-scaling", "yarn",
          "--rope-scale", str(SLOT // tiny_model.CONTEXT_LENGTH),
          "--yarn-orig-ctx", str(tiny_model.CONTEXT_LENGTH),
          "--override-kv", f"llama.context_length=int:{SLOT}")
# route: (the model's answer, llama-server flags)
ROUTES = {
    "coder": (tiny_model.SMOKE_ANSWER, ("--jinja",)),
    "canary-neutral": (tiny_model.SMOKE_ANSWER, ("--jinja",)),
    # The jinja engine with a template that knows no tools: calls come back as text.
    "canary-trap": (tiny_model.TOOL_CALL_ANSWER, ("--jinja", "--chat-template", "chatml")),
    # Tool calls parsed, but it answers every plain question with the call's markup.
    "canary-regress": (tiny_model.TOOL_CALL_ANSWER, ("--jinja",)),
}


# This test's SLOs: generous, as it shares two cores with the rest of CI; the unit tests hold
# the verdict's arithmetic against exact numbers.
SLOS = {"ttftP95Seconds": 5.0, "itlP95Seconds": 1.0}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    logs = tmp_path_factory.mktemp("gate")
    with contextlib.ExitStack() as stack:
        bases = {}
        for route, (answer, flags) in ROUTES.items():
            bases[route] = stack.enter_context(llama_server(
                tiny_model.ensure_model(answer), free_port(), logs, *WINDOW, *flags))
        config = "model_list:\n" + "".join(
            f"  - model_name: {route}\n    litellm_params: {{model: openai/{route},"
            f" api_base: '{base}/v1', api_key: none}}\n" for route, base in bases.items())
        proxy = stack.enter_context(LitellmProxy(litellm_venv(LITELLM).path, config,
                                                 port=free_port(), log_dir=logs))
        yield gate_run.Endpoint(proxy.base_url, proxy.master_key)


@pytest.fixture()
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(records.project(tmp_path))
    return tmp_path


def gate(endpoint, route: str, name: str):
    """One run against `route` (stable: `coder`), its record written into the records folder."""
    return records.run_gate(gate_run.Track(endpoint, "coder", "master"),
                            gate_run.Track(endpoint, route, "master"), name, CANARY_PAIR, **SLOS)


def test_a_neutral_bump_passes_and_its_record_promotes(gateway, project):
    record = gate(gateway, "canary-neutral", "neutral")
    assert record["failures"] == [], gate_run.table(record, records.policy(**SLOS))
    paired = record["results"]["pairedEval"]
    assert (paired["tasks"], paired["b"], paired["c"], paired["p"]) == (14, 0, 0, 1.0)
    assert record["results"]["toolCalls"]["passed"] == 100
    assert record["pin"]["gatewayVersion"] == LITELLM  # as the gateway reports it
    [checked] = parse(promoted_raw(records.gate_config(**SLOS))).vllm_fleet.gate_records
    assert (checked.name, checked.passed) == ("neutral", True)


def test_the_parser_trap_fails_on_its_tool_calls(gateway, project):
    record = gate(gateway, "canary-trap", "trap")
    assert record["results"]["toolCalls"]["reason:parser-not-configured"] == 100
    assert any("refused: parser-not-configured 100" in f for f in record["failures"])
    with pytest.raises(ConfigError) as error:
        parse(promoted_raw(records.gate_config(**SLOS)))
    assert "record trap: the tool-call validator admitted 0 of 100" in problem_line(error.value,
                                                                                    "vllmFleet.stable")


def test_a_regressing_candidate_is_refused_with_b_c_and_p(gateway, project):
    record = gate(gateway, "canary-regress", "regress")
    paired = record["results"]["pairedEval"]
    assert (paired["b"], paired["c"], paired["candidatePassed"]) == (8, 0, 6)
    text = gate_run.table(record, records.policy(**SLOS))
    assert "b=8 c=0 p=0.007812" in text and "verdict: FAIL" in text
    assert any(f.startswith("the candidate regresses on the paired eval: b=8") for f in record["failures"])
