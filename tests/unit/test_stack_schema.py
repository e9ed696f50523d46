"""The stack files' JSON Schema is what config/schema's declarations give: committed as they give
it, named in each stack file for editors, valid for every committed stack, and an editor using it
underlines a mistyped key or a value of the wrong kind where it is typed."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from config.checker import ConfigError
from config.load import parse_stack
from config.options import Secret
from config.schema import SCHEMA_FILE, STACK, schema_text
from tests.support.config_cases import DELETE, changed, fleet_raw, gateway_raw
from tests.support.stack_files import REPO, prod_raw

STACKS = sorted((REPO / "stacks").glob("Pulumi.*.yaml"))


def _errors(stack: dict) -> list[tuple[str, ...]]:
    """Where the schema refuses the stack: each error's path in the file."""
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    return sorted(tuple(str(part) for part in error.absolute_path)
                  for error in validator.iter_errors(stack))


def _local() -> dict:
    return yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())


def test_the_committed_schema_is_what_the_declarations_give():
    assert (REPO / SCHEMA_FILE).read_text() == schema_text(), "run scripts/stack-schema"


def test_the_schema_is_a_json_schema():
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_text()))


@pytest.mark.parametrize("stack", STACKS, ids=[stack.stem for stack in STACKS])
def test_each_stack_file_names_the_schema_and_is_valid_under_it(stack):
    assert stack.read_text().splitlines()[0] == (
        f"# yaml-language-server: $schema={Path(SCHEMA_FILE).name}")
    assert stack.parent == (REPO / SCHEMA_FILE).parent  # the name is relative to the file
    assert _errors(yaml.safe_load(stack.read_text())) == []


def test_a_mistyped_key_is_underlined_at_the_object_that_has_it():
    stack = _local()
    config = stack["config"]
    [(name, host)] = config["spear-fleet:inferenceHosts"].items()
    host["server"]["ctxSzie"] = host["server"].pop("ctxSize")
    config["spear-fleet:gatway"] = config.pop("spear-fleet:gateway")
    assert _errors(stack) == [
        ("config",),  # spear-fleet:gatway is no key of the namespace
        ("config", "spear-fleet:inferenceHosts", name, "server"),  # ctxSzie, and ctxSize missing
        ("config", "spear-fleet:inferenceHosts", name, "server")]


def test_a_value_of_the_wrong_kind_is_underlined_where_it_is_typed():
    stack = _local()
    config = stack["config"]
    config["spear-fleet:vllmFleet"]["replicas"] = "two"
    config["spear-fleet:vllmFleet"]["stable"]["revision"] = "main"
    config["spear-fleet:gatewayMasterKey"] = "typed in plain text"
    assert _errors(stack) == [
        ("config", "spear-fleet:gatewayMasterKey"),
        ("config", "spear-fleet:vllmFleet", "replicas"),
        ("config", "spear-fleet:vllmFleet", "stable", "revision")]


def test_a_number_the_cli_wrote_as_text_is_valid():
    stack = _local()
    stack["config"]["spear-fleet:vllmFleet"]["replicas"] = "2"
    assert _errors(stack) == []


def as_stack_file(raw: dict) -> dict:
    """The stack file that holds `raw`: its keys namespaced, its secrets as ciphertext."""
    def stored(name, value):
        if isinstance(STACK.fields[name].kind, Secret):
            return {"secure": "v1:ciphertext"}
        if name == "sshPrivateKeys":
            return {host: {"secure": "v1:ciphertext"} for host in value}
        return value
    return {"config": {f"spear-fleet:{name}": stored(name, value) if name in STACK.fields
                       else value for name, value in raw.items()}}


HOST = ("inferenceHosts", "reds")
# (id, a stack the config check refuses, the key it names)
BAD = [
    ("top-level-typo", changed(prod_raw(), ("inferenceHost",), {}), "inferenceHost"),
    ("context-not-a-number", changed(prod_raw(), (*HOST, "server", "ctxSize"), "lots"),
     "inferenceHosts.reds.server.ctxSize"),
    ("port-out-of-range", changed(prod_raw(), (*HOST, "server", "port"), 70000),
     "inferenceHosts.reds.server.port"),
    ("nested-typo", changed(prod_raw(), (*HOST, "server", "ctxSzie"), 4096),
     "inferenceHosts.reds.server.ctxSzie"),
    ("required-missing", changed(prod_raw(), (*HOST, "model", "nativeCtx"), DELETE),
     "inferenceHosts.reds.model.nativeCtx"),
    ("no-shards", changed(prod_raw(), (*HOST, "model", "shards"), []),
     "inferenceHosts.reds.model.shards"),
    ("unknown-profile", changed(prod_raw(), (*HOST, "llamaCpp", "profile"), "tpu"),
     "inferenceHosts.reds.llamaCpp.profile"),
    ("branch-commit", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "master"),
     "inferenceHosts.reds.llamaCpp.source.commit"),
    ("backend-kind", changed(prod_raw(), ("backends",), {"lab": {"kind": "socket"}}),
     "backends.lab.kind"),
    ("hatch-cap-negative", changed(gateway_raw(), ("gateway", "hatch", "monthlyCapUsd"), -5),
     "gateway.hatch.monthlyCapUsd"),
    ("gateway-typo", changed(gateway_raw(), ("gateway", "coder", "fallbacks"), ["x"]),
     "gateway.coder.fallbacks"),
    ("ring-unknown", changed(gateway_raw(), ("developers", "ana", "ring"), "canary"),
     "developers.ana.ring"),
    ("harness-unpinned", changed(gateway_raw(), ("harnesses",), {"codex": "latest"}),
     "harnesses.codex"),
    ("fleet-replicas-zero", fleet_raw(replicas=0), "vllmFleet.replicas"),
    ("fleet-revision-a-branch", changed(fleet_raw(), ("vllmFleet", "stable", "revision"), "main"),
     "vllmFleet.stable.revision"),
    ("fleet-cache-salt", fleet_raw(tenancy={"cacheSalt": "everyone"}),
     "vllmFleet.tenancy.cacheSalt"),
    ("fleet-moved-key", fleet_raw(observability={"hatchCapUsd": 100}),
     "vllmFleet.observability.hatchCapUsd"),
    ("budget-zero", changed(gateway_raw(), ("developers", "ana", "maxBudget"), 0),
     "developers.ana.maxBudget"),
]


def _location(key: str) -> tuple[str, ...]:
    """Where `key` (as a Problem names it) is in a stack file."""
    first, *rest = key.split(".")
    return ("config", f"spear-fleet:{first}", *rest)


@pytest.mark.parametrize("raw,key", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_the_schema_refuses_where_the_config_check_refuses(raw, key):
    with pytest.raises(ConfigError) as refused:
        parse_stack(raw)
    assert f"spear-fleet:{key}" in [problem.key for problem in refused.value.problems]
    # At the key, or at the object that has it (a key it does not declare, or one missing).
    where = _location(key)
    assert {where, where[:-1]} & set(_errors(as_stack_file(raw))), _errors(as_stack_file(raw))


def test_the_stacks_the_config_check_accepts_the_schema_accepts_too():
    for raw in (prod_raw(), gateway_raw(), fleet_raw()):
        parse_stack(raw)
        assert _errors(as_stack_file(raw)) == []
