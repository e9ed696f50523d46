"""stacks/Pulumi.prod.yaml documents the schema: every key config/schema accepts appears there
(set, commented out, or named in the comment just above its object or its map by name), and
every key it shows is one the schema accepts.

The accepted keys are the allowed_keys of every Checker.obj call, recorded while the stacks and
the config tests' cases are parsed; every call site must be reached, so a new object cannot
slip past. The documented keys are the file's YAML with its comment markers taken off."""

from __future__ import annotations

import ast
import contextlib
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from config.checker import Checker, ConfigError
from config.schema import TOP_KEYS, parse
from tests.support.config_cases import changed, fleet_raw, gateway_raw, pod_raw, reds_raw, seats_raw
from tests.support.stack_files import REPO, prod_raw, stack_raw, with_placeholder_keys

SCHEMA = REPO / "config" / "schema"
DOC = REPO / "stacks" / "Pulumi.prod.yaml"
NAME = "<name>"  # a path segment that is a name the stack chooses (a host's, a pod's, ...)
KeyPath = tuple[str, ...]

_MARKER = re.compile(r"^(\s*)# ")
_KEY = re.compile(r"[\w./-]+")


def _cases() -> list[dict]:
    """Stacks that between them reach every object of the schema."""
    return [prod_raw(), stack_raw("local"), with_placeholder_keys(stack_raw("dev")),
            gateway_raw(), changed(gateway_raw(), ("gateway", "kubernetes"), {}), pod_raw(),
            reds_raw(), fleet_raw(memoryFloor={"models": {"Qwen/Qwen3-Coder-Next-FP8": {}}}),
            seats_raw(),
            changed(seats_raw(), ("vllmFleet", "agentSandbox", "seatImage"), {"file": "/none"}),
            changed(seats_raw(), ("gateway", "database", "backup"), {"hostPath": "/b"})]


def _obj_sites() -> set[tuple[str, int, int]]:
    """Each Checker.obj call in config/schema whose result is used (a bare call only says what
    a wrong value must be), as (file, first line, last line)."""
    sites = set()
    for path in SCHEMA.glob("*.py"):
        tree = ast.parse(path.read_text())
        bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        sites.update((path.name, node.lineno, node.end_lineno) for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                     and node.func.attr == "obj" and id(node) not in bare)
    return sites


Call = tuple[str, int, str, tuple[str, ...]]  # (file, line, key, allowed_keys)


@pytest.fixture(scope="module")
def calls() -> list[Call]:
    """Every Checker.obj call while the cases are parsed."""
    calls: list[Call] = []
    original = Checker.obj

    def recording(self, key, value, allowed_keys, required=True):
        caller = sys._getframe(1)
        calls.append((Path(caller.f_code.co_filename).name, caller.f_lineno, key,
                      tuple(allowed_keys)))
        return original(self, key, value, allowed_keys, required)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Checker, "obj", recording)
        for raw in _cases():
            with contextlib.suppress(ConfigError):  # a case need only reach its objects
                parse(raw)
    return calls


@pytest.fixture(scope="module")
def objects(calls) -> dict[KeyPath, set[str]]:
    """The objects the schema checks, by path (names as NAME; () the namespace itself) -> the
    keys each accepts."""
    found: dict[KeyPath, set[str]] = defaultdict(set, {(): set(TOP_KEYS)})
    for key, allowed in sorted(((re.sub(r"\[\d+\]", "", key).split("."), allowed)
                                for _, _, key, allowed in calls), key=lambda c: len(c[0])):
        found[normal(tuple(key), found)].update(allowed)
    return dict(found)


def normal(path: KeyPath, objects: dict[KeyPath, set[str]]) -> KeyPath:
    """path with every segment under something other than an object as NAME (a map by name)."""
    result: KeyPath = ()
    for segment in path:
        result = (*result, segment if result in objects else NAME)
    return result


def read_doc(text: str) -> tuple[set[KeyPath], dict[KeyPath, str]]:
    """Every key the stack file shows under `config:`, set or commented out, by its path; and the
    prose just above each (where an object's keys may be named instead of shown)."""
    lines = text.splitlines()
    stack: list[tuple[int, KeyPath]] = []  # the open blocks: (indent, path)
    paths: set[KeyPath] = set()
    prose: dict[KeyPath, str] = {}
    above = ""
    for line in lines[lines.index("config:") + 1:]:
        if line and not line[0].isspace():  # encryptionsalt: config is over
            break
        entry = _entry(line)
        if entry is None:
            above += " " + line
            continue
        indent, key, value = entry
        if key.startswith("spear-fleet:"):
            stack, key = [], key.removeprefix("spear-fleet:")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*(stack[-1][1] if stack else ()), key)
        stack.append((indent, path))
        paths.add(path)
        paths.update(_flow_keys(path, value))
        prose[path], above = prose.get(path, "") + above, ""
    return paths, prose


def documented(objects: dict[KeyPath, set[str]]) -> tuple[set[KeyPath], dict[KeyPath, str]]:
    """read_doc of the prod stack, its paths as normal() gives them."""
    paths, prose = read_doc(DOC.read_text())
    named: dict[KeyPath, str] = defaultdict(str)
    for path, text in prose.items():
        named[normal(path, objects)] += text
    return {normal(path, objects) for path in paths}, named


def _entry(line: str) -> tuple[int, str, object] | None:
    """(indent, key, value) of a line that is one YAML entry once uncommented; None for prose."""
    # The file comments a key out at its own indent (`# key: ...`) or a block at its parent's
    # (`# spear-fleet:x:` then `#   key: ...`): taking the marker off keeps the nesting.
    while match := _MARKER.match(line):
        line = match[1] + line[match.end():]
    text = line.lstrip()
    indent = len(line) - len(text)
    if text.startswith("- "):  # a list item's keys nest under the list
        text, indent = text[2:], indent + 2
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        return None
    [(key, value)] = value.items()
    if not isinstance(key, str) or not (_KEY.fullmatch(key) or key.startswith("spear-fleet:")):
        return None
    if isinstance(value, str) and len(value.split()) > 2:  # "local: PostgreSQL from Debian ..."
        return None
    return indent, key, value


def _flow_keys(path: KeyPath, value: object) -> set[KeyPath]:
    """The keys of a flow value, e.g. listen: {host: 127.0.0.1, port: 4000}."""
    if isinstance(value, dict):
        return {(*path, str(key)) for key in value} | {
            key for k, v in value.items() for key in _flow_keys((*path, str(k)), v)}
    if isinstance(value, list):
        return {key for item in value for key in _flow_keys(path, item)}
    return set()


def test_the_cases_reach_every_object_the_schema_checks(calls):
    unreached = {site for site in _obj_sites()
                 if not any(file == site[0] and site[1] <= line <= site[2]
                            for file, line, _, _ in calls)}
    assert unreached == set(), "add a case to _cases() that reaches these"


def test_every_key_the_schema_accepts_is_documented(objects):
    shown, named = documented(objects)
    # The comment above a map by name speaks for its entries (developers: "Optional: team, ...").
    missing = [".".join((*path, key)) for path, keys in objects.items() for key in keys
               if (*path, key) not in shown and not re.search(
                   rf"\b{key}\b", named[path] + (named[path[:-1]] if path[-1:] == (NAME,) else ""))]
    assert sorted(missing) == []


def test_every_documented_key_is_one_the_schema_accepts(objects):
    shown, _ = documented(objects)
    accepted = {(*path, key) for path, keys in objects.items() for key in keys}
    # Under a map by name or a free map (selectorLabels, a developer's metadata) any key goes.
    checked = {path for path in shown if path[:-1] in objects}
    assert sorted(".".join(path) for path in checked - accepted) == []


def test_the_stack_files_keys_nest_as_in_the_file_and_prose_goes_to_the_key_below():
    text = ("config:\n"
            "  # The hosts, by name.\n"
            "  spear-fleet:inferenceHosts:\n"
            "    reds:\n"
            "      ssh:\n"
            "        host: reds.internal # a comment\n"
            "        # hostKey: ssh-ed25519 AAAA\n"
            "      listen: {host: 127.0.0.1, port: 4000}\n"
            "      shards:\n"
            "        - name: a.gguf\n"
            "          size: 1\n"
            "        # local: PostgreSQL from Debian on the host; external: a URL\n"
            "  # spear-fleet:gateway:\n"
            "  #   name: gateway\n"
            "  #   # kubernetes:\n"
            "  #   #   replicas: 2\n"
            "encryptionsalt: v1:x\n")
    keys, prose = read_doc(text)
    assert keys == {
        ("inferenceHosts",), ("inferenceHosts", "reds"), ("inferenceHosts", "reds", "ssh"),
        ("inferenceHosts", "reds", "ssh", "host"), ("inferenceHosts", "reds", "ssh", "hostKey"),
        ("inferenceHosts", "reds", "listen"), ("inferenceHosts", "reds", "listen", "host"),
        ("inferenceHosts", "reds", "listen", "port"), ("inferenceHosts", "reds", "shards"),
        ("inferenceHosts", "reds", "shards", "name"), ("inferenceHosts", "reds", "shards", "size"),
        ("gateway",), ("gateway", "name"), ("gateway", "kubernetes"),
        ("gateway", "kubernetes", "replicas")}
    assert prose[("inferenceHosts",)] == "   # The hosts, by name."
    assert "external: a URL" in prose[("gateway",)]
