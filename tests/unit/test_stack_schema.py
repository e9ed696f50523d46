"""The stack files' JSON Schema is what config/schema's declarations give: committed as they give
it, named in each stack file for editors, valid for every committed stack, and an editor using it
underlines a mistyped key or a value of the wrong kind where it is typed."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from config.schema import SCHEMA_FILE, schema_text
from tests.support.stack_files import REPO

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
