"""The REDS tunnel check on a stand-in SSH session: it records what the server advertises, says
what is wrong and what to do when nothing (or the wrong thing) answers, refresh checks again, and
nothing is ever run or written on the host. Then the program under mocks: each endpoint is its
check, the cookbook's verification and the smoke test."""

from __future__ import annotations

import json

import pytest

from components.endpoints import reds
from components.endpoints.reds import RedsCheckFailed, RedsTunnelCheckProvider
from components.hostops.ssh import NoAnswer, RemoteError
from spear import tokens
from tests.support.stack_files import mocked_stack, run_main
from tests.support.config_cases import reds_raw

MODELS = json.dumps({"object": "list", "data": [{"id": "qwen3-coder-next"}, {"id": "other"}]})
PROPS = {"endpoint": "box", "connection": {"host": "reds-box"}, "ssh_host": "reds-box",
         "address": "127.0.0.1", "port": 8010, "expected_model_id": None, "managed_by": None,
         "triggers": {}}


class FakeHost:
    """A session whose server answers each path as told; anything but HTTP fails the test."""

    def __init__(self, answers: dict[str, tuple[int, str]] | None) -> None:
        self.answers = answers  # None: nothing listens on the port

    def __call__(self, connection: dict, connect_timeout: float = 0) -> FakeHost:
        return self

    def __enter__(self) -> FakeHost:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def http(self, port: int, method: str, path: str, address: str = "", timeout: float = 0,
             **_: object) -> tuple[int, bytes]:
        assert method == "GET"
        if self.answers is None:
            raise NoAnswer("root@reds.internal:22 (reds-box)", address, port, "connection refused")
        status, body = self.answers[path]
        return status, body.encode()


@pytest.fixture
def serve(monkeypatch):
    """serve(answers): the host's server answers so from now on (None: nothing listens)."""
    def serve(answers: dict[str, tuple[int, str]] | None) -> None:
        monkeypatch.setattr(reds, "Session", FakeHost(answers))
    return serve


HEALTHY = {"/health": (200, '{"status":"ok"}'), "/v1/models": (200, MODELS)}


def test_the_check_records_the_advertised_ids_and_uses_the_first_when_none_is_declared(serve):
    serve(HEALTHY)
    outs = RedsTunnelCheckProvider().create(PROPS).outs
    assert (outs["answering"], outs["model_ids"], outs["model_id"]) == (
        True, ["qwen3-coder-next", "other"], "qwen3-coder-next")
    declared = RedsTunnelCheckProvider().create({**PROPS, "expected_model_id": "other"}).outs
    assert declared["model_id"] == "other"


def test_nothing_answering_fails_the_create_saying_so_and_what_to_do(serve):
    serve(None)
    with pytest.raises(RedsCheckFailed) as error:
        RedsTunnelCheckProvider().create(PROPS)
    assert str(error.value) == (
        "reds endpoint box: nothing answers on 127.0.0.1:8010 on reds-box (connection refused)."
        " Start the inference server on that host yourself (spear-fleet installs nothing on a"
        " REDS host), or fix redsEndpoints.box.port")


def test_a_managed_hosts_silent_server_points_at_that_host(serve):
    serve(None)
    with pytest.raises(RedsCheckFailed, match=r"\(connection refused\)\. It is"
                                              r" inferenceHosts.reds's server: see its"
                                              r" spear-inference.service"):
        RedsTunnelCheckProvider().create({**PROPS, "managed_by": "reds"})


@pytest.mark.parametrize("answers,said", [
    ({"/health": (503, '{"error":"Loading model"}'), "/v1/models": (503, "")},
     "answers but is not ready (HTTP 503 on /health: still loading its model?). Run `pulumi up`"
     " again once it is"),
    ({"/health": (404, ""), "/v1/models": (404, "Not Found")},
     "answers, but GET /v1/models gives HTTP 404: b'Not Found'. An OpenAI-compatible server lists"),
    ({"/health": (200, ""), "/v1/models": (200, '{"data": []}')},
     "answers, but GET /v1/models gives HTTP 200"),
    ({"/health": (200, ""), "/v1/models": (200, "[1]")}, "answers, but GET /v1/models"),
], ids=["loading", "no-model-list", "no-models", "not-a-list"])
def test_a_server_that_answers_but_does_not_serve_fails_saying_what_it_answered(serve, answers, said):
    serve(answers)
    with pytest.raises(RedsCheckFailed) as error:
        RedsTunnelCheckProvider().create(PROPS)
    assert str(error.value).startswith("reds endpoint box: the server on 127.0.0.1:8010 on reds-box ")
    assert said in str(error.value)


def test_a_declared_model_id_the_server_does_not_advertise_fails(serve):
    serve(HEALTHY)
    with pytest.raises(RedsCheckFailed) as error:
        RedsTunnelCheckProvider().create({**PROPS, "expected_model_id": "qwen3-coder"})
    assert str(error.value) == (
        "reds endpoint box: the server on 127.0.0.1:8010 on reds-box advertises"
        " ['qwen3-coder-next', 'other'], not 'qwen3-coder'. Serve that model there (llama-server"
        " --alias qwen3-coder), or fix redsEndpoints.box.modelId")


def test_a_failed_login_names_the_ssh_keys_to_fix(serve, monkeypatch):
    def refuse(connection: dict, connect_timeout: float = 0):
        raise RemoteError("cannot reach root@reds.internal:22 (reds-box) over SSH: Authentication failed.")
    monkeypatch.setattr(reds, "Session", refuse)
    with pytest.raises(RedsCheckFailed, match=r"^reds endpoint box: cannot log in to reds-box: .*"
                                              r"Authentication failed\.\. Fix redsEndpoints\.box\.ssh"
                                              r" \(or the host's entry in ~/\.ssh/config\)$"):
        RedsTunnelCheckProvider().create(PROPS)


def test_refresh_of_a_silent_endpoint_records_it_and_the_next_up_checks_again(serve):
    provider = RedsTunnelCheckProvider()
    serve(HEALTHY)
    recorded = provider.create(PROPS).outs
    assert provider.read("id", recorded).outs == recorded  # still answering: no change
    assert not provider.diff("id", recorded, PROPS).changes
    serve(None)
    refreshed = provider.read("id", recorded).outs
    assert (refreshed["answering"], refreshed["model_ids"]) == (False, [])
    assert refreshed["problem"].startswith("reds endpoint box: nothing answers on 127.0.0.1:8010")
    diff = provider.diff("id", refreshed, PROPS)
    assert diff.changes and not diff.replaces


def test_a_server_now_serving_another_model_is_checked_again(serve):
    provider = RedsTunnelCheckProvider()
    serve(HEALTHY)
    recorded = provider.create(PROPS).outs
    serve({**HEALTHY, "/v1/models": (200, json.dumps({"data": [{"id": "qwen3-next-2"}]}))})
    refreshed = provider.read("id", recorded).outs
    assert refreshed["model_ids"] == ["qwen3-next-2"] and refreshed["model_id"] == "qwen3-coder-next"
    assert provider.diff("id", refreshed, PROPS).changes
    assert provider.update("id", refreshed, PROPS).outs["model_id"] == "qwen3-next-2"


def test_delete_touches_nothing(monkeypatch):
    monkeypatch.setattr(reds, "Session", None)  # no session may be opened
    assert RedsTunnelCheckProvider().delete("id", PROPS) is None


# ---------------------------------------------------------------------------------------------
# The program under mocks


@pytest.fixture
def reds_program():
    with mocked_stack(reds_raw()) as mocks:
        yield mocks


def test_each_endpoint_is_its_check_verification_and_smoke_test(reds_program):
    run_main()
    for name in ("box", "near"):
        assert {resource: args.typ for resource, args in reds_program.resources.items()
                if resource == name or resource.startswith(f"{name}-")} == {
            name: tokens.REDS_ENDPOINT,
            f"{name}-check": tokens.REDS_TUNNEL_CHECK.type,
            f"{name}-verification": tokens.ENDPOINT_VERIFICATION.type,
            f"{name}-smoke-test": tokens.SMOKE_TEST.type,
            f"{name}-host-key": tokens.HOST_KEY.type,
        }
    box = reds_program.resources["box-check"].inputs
    assert (box["ssh_host"], box["address"], box["port"], box["expected_model_id"]) == (
        "reds-box", "127.0.0.1", 8010, "qwen3-coder-next")
    near = reds_program.resources["near-check"].inputs
    assert (near["ssh_host"], near["port"], near["managed_by"]) == ("reds.internal", 8010, "reds")
