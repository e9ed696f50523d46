"""config, REDS endpoints: every bad value under `redsEndpoints` (and an endpoint's
`sshPrivateKeys` entry) is refused with the full key, what was given and what is allowed, all at
once and before any resource is registered; an endpoint is either a host's `ssh` login and the
server's port, or an inference host the stack manages."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from config.checker import ConfigError
from config.load import StackConfigError, load
from config.load import parse_stack
from config.types import InlineKey, KeyFile, RedsSsh
from tests.support.stack_files import DUMMY_KEY, commented_example, engine_config, prod_raw
from tests.support.config_cases import (BOX, DELETE, NEAR, REDS_SECRETS as SECRETS, allowed_for,
                                        changed, problem_line, reds_raw, repeated_cases,
                                        run_program)

def second_box(**changes: Any) -> dict[str, Any]:
    return changed(reds_raw(), ("redsEndpoints", "lab2"),
                   {**copy.deepcopy(reds_raw()["redsEndpoints"]["box"]), **changes})


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("host-unknown", changed(reds_raw(), (*NEAR, "inferenceHost"), "pilot"),
     "redsEndpoints.near.inferenceHost", "one of the inferenceHosts: reds"),
    ("host-and-ssh", changed(reds_raw(), (*NEAR, "ssh"), {"host": "reds-box"}),
     "redsEndpoints.near", "exactly one of inferenceHost (a name in inferenceHosts"),
    ("neither-host-nor-ssh", changed(reds_raw(), (*BOX, "ssh"), DELETE),
     "redsEndpoints.box", "exactly one of inferenceHost"),
    ("port-zero", changed(reds_raw(), (*BOX, "port"), 0),
     "redsEndpoints.box.port", "an integer 1-65535"),
    ("port-too-big", changed(reds_raw(), (*BOX, "port"), 70000),
     "redsEndpoints.box.port", "an integer 1-65535"),
    ("port-not-a-number", changed(reds_raw(), (*BOX, "port"), "eighty"),
     "redsEndpoints.box.port", "an integer 1-65535"),
    ("port-with-host", changed(reds_raw(), (*NEAR, "port"), 8010),
     "redsEndpoints.near.port", "no port with inferenceHost: the server's port is"
     " inferenceHosts.reds.server.port"),
    ("ssh-port", changed(reds_raw(), (*BOX, "ssh", "port"), 0),
     "redsEndpoints.box.ssh.port", "an integer 1-65535"),
    ("ssh-host-space", changed(reds_raw(), (*BOX, "ssh", "host"), "reds box"),
     "redsEndpoints.box.ssh.host", "a host name, ~/.ssh/config alias or IP address"),
    ("ssh-host-missing", changed(reds_raw(), (*BOX, "ssh", "host"), DELETE),
     "redsEndpoints.box.ssh.host", "(required)"),
    ("ssh-user", changed(reds_raw(), (*BOX, "ssh", "user"), "bad user"),
     "redsEndpoints.box.ssh.user", "a user name"),
    ("ssh-unknown-key", changed(reds_raw(), (*BOX, "ssh", "identityFile"), "~/.ssh/id"),
     "redsEndpoints.box.ssh.identityFile", "one of host, port, user, privateKeyPath"),
    ("ssh-not-an-object", changed(reds_raw(), (*BOX, "ssh"), "reds-box"),
     "redsEndpoints.box.ssh", "an object with keys host, port, user, privateKeyPath"),
    ("endpoint-unknown-key", changed(reds_raw(), (*BOX, "model"), "qwen"),
     "redsEndpoints.box.model", "one of inferenceHost, ssh, port, modelId, backend"),
    ("endpoint-not-an-object", changed(reds_raw(), BOX, "reds-box"),
     "redsEndpoints.box", "an object with keys inferenceHost, ssh"),
    ("endpoint-name", changed(reds_raw(), ("redsEndpoints", "Box_1"), {"inferenceHost": "reds"}),
     "redsEndpoints.Box_1", "a name of lowercase letters"),
    ("endpoints-not-a-map", changed(reds_raw(), ("redsEndpoints",), ["box"]),
     "redsEndpoints", "a non-empty map of name -> a REDS endpoint"),
    ("model-id-space", changed(reds_raw(), (*BOX, "modelId"), "qwen3 coder"),
     "redsEndpoints.box.modelId", "a model id as /v1/models lists it"),
    ("backend-api", changed(reds_raw(), (*BOX, "backend"), "anthropic"),
     "redsEndpoints.box.backend", "one of local, remote, reds, lab"),
    ("backend-of-a-host", changed(reds_raw(), (*BOX, "backend"), "reds"),
     "redsEndpoints.box.backend", "a backend inferenceHosts.reds does not use"),
    ("backend-of-another-endpoint", second_box(),
     "redsEndpoints.lab2.backend", "a backend redsEndpoints.box does not use: the client's"
     " port 8083 tunnels to one server"),
    ("named-like-a-host", changed(reds_raw(), ("redsEndpoints", "reds"), {"inferenceHost": "reds"}),
     "redsEndpoints.reds", "a name no inference host or pod has"),
    ("key-and-key-file", changed(changed(reds_raw(), (*BOX, "ssh", "privateKeyPath"), "~/.ssh/id"),
                                 ("sshPrivateKeys", "box"), DUMMY_KEY),
     "redsEndpoints.box.ssh.privateKeyPath", "exactly one of redsEndpoints.box.ssh.privateKeyPath"
     " (a key file) or sshPrivateKeys.box"),
    ("key-not-a-key", changed(reds_raw(), ("sshPrivateKeys", "box"), "hunter2"),
     "sshPrivateKeys.box", "a private key (-----BEGIN"),
    ("key-for-a-managed-endpoint", changed(reds_raw(), ("sshPrivateKeys", "near"), DUMMY_KEY),
     "sshPrivateKeys.near", "no key: it logs in as inferenceHosts.reds does"),
    ("key-for-nothing", changed(reds_raw(), ("sshPrivateKeys", "other"), DUMMY_KEY),
     "sshPrivateKeys.other", "one of the inferenceHosts or REDS endpoints: reds, box, near"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_bad_endpoint_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    assert allowed in allowed_for(mocks, raw, key, SECRETS)


def test_no_two_bad_endpoint_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_an_endpoint_on_a_hand_run_server_parses_to_its_typed_config():
    cfg = parse_stack(reds_raw())
    box = cfg.reds_endpoints["box"]
    # The rest from ~/.ssh/config.
    assert box.ssh == RedsSsh(host="reds-box", port=None, user=None, key=None)
    assert (box.address, box.port, box.model_id, box.inference_host) == (
        "127.0.0.1", 8010, "qwen3-coder-next", None)
    assert box.backend == cfg.backends["lab"] and box.server == "redsEndpoints.box"


def test_an_endpoint_on_a_managed_host_logs_in_as_the_host_and_checks_its_server():
    cfg = parse_stack(reds_raw())
    near = cfg.reds_endpoints["near"]
    assert near.ssh == RedsSsh(host="reds.internal", port=22, user="root",
                               key=InlineKey(DUMMY_KEY))
    assert (near.address, near.port, near.model_id, near.inference_host) == (
        "127.0.0.1", 8010, None, "reds")
    # The host's own backend: one server behind the client's port.
    assert near.backend == cfg.backends["reds"] and near.server == "inferenceHosts.reds"


def test_endpoint_defaults_are_port_8010_and_backend_reds():
    raw = {**prod_raw(), "redsEndpoints": {"box": {"ssh": {"host": "10.0.0.7"}}}}
    raw = changed(raw, ("inferenceHosts", "reds", "backend"), "local")
    box = parse_stack(raw).reds_endpoints["box"]
    assert (box.port, box.backend.name, box.backend.port) == (8010, "reds", 8082)


def test_a_hand_run_server_may_be_reached_with_a_full_login_and_a_key():
    raw = changed(reds_raw(), (*BOX, "ssh"), {"host": "10.0.0.7", "port": 2022, "user": "spear",
                                              "privateKeyPath": "/keys/reds"})
    assert parse_stack(raw).reds_endpoints["box"].ssh == RedsSsh(
        host="10.0.0.7", port=2022, user="spear", key=KeyFile("/keys/reds"))
    raw = changed(reds_raw(), ("sshPrivateKeys", "box"), DUMMY_KEY)
    assert parse_stack(raw).reds_endpoints["box"].ssh.key == InlineKey(DUMMY_KEY)


def test_a_stack_without_endpoints_has_none():
    assert parse_stack(prod_raw()).reds_endpoints == {}


def test_all_endpoint_problems_are_reported_at_once_one_per_line():
    raw = changed(reds_raw(), (*NEAR, "inferenceHost"), "pilot")
    raw = changed(raw, (*BOX, "port"), 0)
    raw = changed(raw, (*BOX, "modelId"), "a b")
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [problem.key for problem in error.value.problems] == [
        "spear-fleet:redsEndpoints.box.modelId", "spear-fleet:redsEndpoints.box.port",
        "spear-fleet:redsEndpoints.near.inferenceHost"]


def test_an_endpoint_on_a_host_with_problems_of_its_own_is_not_also_unknown():
    with pytest.raises(ConfigError) as error:
        parse_stack(changed(reds_raw(), ("inferenceHosts", "reds", "server", "ctxSize"), DELETE))
    assert [problem.key for problem in error.value.problems] == [
        "spear-fleet:inferenceHosts.reds.server.ctxSize"]


def test_loaded_keys_are_the_managed_hosts_or_the_endpoints_own_or_none(mocks, tmp_path):
    key_file = tmp_path / "id_reds"
    key_file.write_text(DUMMY_KEY.replace("AAAA", "BBBB"))
    raw = changed(reds_raw(), ("redsEndpoints", "keyed"),
                  {"ssh": {"host": "10.0.0.8", "privateKeyPath": str(key_file)}, "backend": "local"})
    pulumi.runtime.set_all_config(engine_config(raw), SECRETS)
    seen: dict[str, tuple[bool, str]] = {}

    @pulumi.runtime.test
    def program():
        keys = load().ssh_keys
        assert "box" not in keys  # its alias's IdentityFile, read when the connection is made
        return pulumi.Output.all(*[
            pulumi.Output.all(keys[name].is_secret(), keys[name]).apply(
                lambda pair, name=name: seen.update({name: tuple(pair)}))
            for name in ("near", "keyed")])

    program()
    assert seen == {"near": (True, DUMMY_KEY), "keyed": (True, key_file.read_text())}


def test_an_endpoints_unreadable_key_file_is_named_by_the_endpoints_key(mocks, tmp_path):
    raw = changed(reds_raw(), (*BOX, "ssh", "privateKeyPath"), str(tmp_path / "absent"))
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(raw), SECRETS)
    assert "a readable private key file" in problem_line(error.value,
                                                         "redsEndpoints.box.ssh.privateKeyPath")


def test_prods_commented_endpoint_examples_parse_to_both_forms():
    raw = {**prod_raw(), "redsEndpoints": commented_example("prod", "redsEndpoints")}
    raw = changed(raw, ("backends", "lab"), {"port": 8083})  # as the example's note says
    raw = changed(raw, ("redsEndpoints", "reds-box", "ssh", "privateKeyPath"), "/keys/reds")
    endpoints = parse_stack(raw).reds_endpoints
    assert endpoints["reds-box"].ssh == RedsSsh(host="reds-box", port=22, user="spear",
                                               key=KeyFile("/keys/reds"))
    assert (endpoints["reds-box"].port, endpoints["reds-box"].model_id) == (8010, "qwen3-coder-next")
    managed = endpoints["reds-managed"]
    assert (managed.inference_host, managed.ssh.host, managed.port, managed.backend.name) == (
        "reds", "reds.internal", 8010, "reds")
