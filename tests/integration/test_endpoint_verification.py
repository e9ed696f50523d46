"""EndpointVerification on real parts: the local stack's llama-server serving the tiny scripted
and parser-trap models on this machine's loopback, probed by the real provider code through a
real SSH channel (a local nspawn host shares this machine's loopback, as an inference host's
own server is reached from its sshd)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from components.endpoints.verification import EndpointVerificationProvider, VerificationFailed
from components.hostops.smoke_test import SmokeTestProvider
from localhosts.standins import tiny_model
from localhosts.hosts.host import start_host, stop_host
from tests.support.served_llama import llama_server

HOST = "it-endpoints"
SSH_PORT = 2250
SCRIPTED_PORT = 8120
KEYED_PORT = 8121
TRAP_PORT = 8122
SERVED = "spear-tiny"  # --alias: the name /v1/models lists
API_KEY = "sk-spear-endpoint-test"
ALL_PROBES = ["model-list", "completion", "tool-call"]


@pytest.fixture(scope="module")
def connection() -> Iterator[dict]:
    # fresh=False: a later run reuses the extracted root filesystem (sshd is all this host needs).
    info = start_host(HOST, SSH_PORT, fresh=False)
    yield info.connection()
    stop_host(HOST)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("llama-server")


@pytest.fixture(scope="module")
def scripted(logs) -> Iterator[int]:
    """The local stack's model, served as the local stack serves it (--jinja)."""
    with llama_server(tiny_model.ensure_model(tiny_model.SMOKE_ANSWER), SCRIPTED_PORT, logs,
                      "--jinja", "--alias", SERVED):
        yield SCRIPTED_PORT


def verify(connection: dict, port: int, endpoint: str, served_model: str = SERVED,
           api_key: str | None = None) -> dict:
    props = {"endpoint": endpoint, "connection": connection, "address": "127.0.0.1", "port": port,
             "served_model": served_model, "api_key": api_key, "triggers": {}}
    return EndpointVerificationProvider().create(props).outs


def test_the_scripted_model_passes_all_three_probes(connection, scripted):
    outs = verify(connection, scripted, "local")
    assert outs["passed"] == ALL_PROBES
    assert outs["served_model_ids"] == [SERVED]


def test_the_scripted_model_still_passes_the_smoke_test(connection, scripted):
    props = {"connection": connection, "port": scripted, "address": "127.0.0.1", "model": SERVED,
             "triggers": {}}
    assert SmokeTestProvider().create(props).outs["summary"] == "end_turn | SPEAR-BACKEND-OK | ()"


def test_a_served_name_the_endpoint_does_not_list_fails_the_model_list(connection, scripted):
    with pytest.raises(VerificationFailed, match=r"^endpoint local: model-list probe failed:"
                                                 r" model-not-listed \('qwen3-coder-next' is not among"):
        verify(connection, scripted, "local", served_model="qwen3-coder-next")


def test_an_endpoint_nothing_listens_on_is_unreachable(connection):
    with pytest.raises(VerificationFailed, match="^endpoint gone: model-list probe failed: unreachable"):
        verify(connection, SCRIPTED_PORT + 9, "gone")


def test_the_api_key_is_sent_and_its_absence_refused(connection, logs):
    with llama_server(tiny_model.ensure_model(tiny_model.SMOKE_ANSWER), KEYED_PORT, logs,
                      "--jinja", "--alias", SERVED, "--api-key", API_KEY):
        assert verify(connection, KEYED_PORT, "keyed", api_key=API_KEY)["passed"] == ALL_PROBES
        with pytest.raises(VerificationFailed, match="model-list probe failed: http-error"
                                                     r" \(HTTP 401: .*Invalid API Key"):
            verify(connection, KEYED_PORT, "keyed")


def test_the_parser_trap_model_passes_where_the_server_parses_tool_calls(connection, logs):
    with llama_server(tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER), TRAP_PORT, logs,
                      "--jinja", "--alias", SERVED):
        assert verify(connection, TRAP_PORT, "trap")["passed"] == ALL_PROBES


def test_the_parser_trap_model_fails_where_the_template_has_no_tool_calls(connection, logs):
    # The jinja engine with a template that knows no tools (as vLLM without --tool-call-parser):
    # the call comes back as text in content, which the gate names.
    with llama_server(tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER), TRAP_PORT, logs,
                      "--jinja", "--chat-template", "chatml", "--alias", SERVED):
        with pytest.raises(VerificationFailed, match=r"^endpoint trap: tool-call probe failed:"
                                                     r" parser-not-configured \(.*<tool_call>"):
            verify(connection, TRAP_PORT, "trap")


def test_the_parser_trap_model_fails_without_the_jinja_engine(connection, logs):
    # This llama-server turns the jinja engine on by default; switched off, it refuses any
    # request that offers tools, so the probe fails on the HTTP answer, not the gate.
    with llama_server(tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER), TRAP_PORT, logs,
                      "--no-jinja", "--alias", SERVED):
        with pytest.raises(VerificationFailed, match=r"^endpoint trap: tool-call probe failed:"
                                                     r" http-error \(HTTP 500: .*requires --jinja"):
            verify(connection, TRAP_PORT, "trap")
