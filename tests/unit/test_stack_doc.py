"""stacks/Pulumi.prod.yaml documents the schema: every key config/schema declares appears there
(set, commented out, or named in the comment just above its object or its map by name), and
every key it shows is one the schema declares.

The declared keys are config/options.py::paths of config/schema's STACK: the declarations
themselves, in one comparison. The documented keys are the file's YAML with its comment markers
taken off."""

from __future__ import annotations

import re
from collections import defaultdict

import yaml

from config.options import NAME_SEGMENT as NAME
from config.options import paths
from config.schema import STACK
from tests.support.stack_files import REPO

DOC = REPO / "stacks" / "Pulumi.prod.yaml"
KeyPath = tuple[str, ...]

_MARKER = re.compile(r"^(\s*)# ")
_KEY = re.compile(r"[\w./-]+")


def declared_objects() -> dict[KeyPath, set[str]]:
    """The objects the schema declares, by path (names as NAME; () the namespace itself) -> the
    keys each declares (NAME for a map by name)."""
    found: dict[KeyPath, set[str]] = defaultdict(set)
    for path in paths(STACK):
        found[path[:-1]].add(path[-1])
    return dict(found)


def normal(path: KeyPath, objects: dict[KeyPath, set[str]]) -> KeyPath:
    """path with every segment under a map by name as NAME."""
    result: KeyPath = ()
    for segment in path:
        result = (*result, NAME if objects.get(result) == {NAME} else segment)
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


def test_every_key_the_schema_declares_is_documented():
    objects = declared_objects()
    shown, named = documented(objects)
    # The comment above a map by name speaks for its entries (developers: "Optional: team, ...").
    missing = [".".join((*path, key)) for path, keys in objects.items() for key in keys
               if key != NAME and (*path, key) not in shown and not re.search(
                   rf"\b{key}\b", named[path] + (named[path[:-1]] if path[-1:] == (NAME,) else ""))]
    assert sorted(missing) == []


def test_every_documented_key_is_one_the_schema_declares():
    objects = declared_objects()
    shown, _ = documented(objects)
    accepted = {(*path, key) for path, keys in objects.items() for key in keys}
    # Under a map by name or a free map (selectorLabels, a developer's metadata) any key goes.
    checked = {path for path in shown if path[:-1] in objects and NAME not in objects[path[:-1]]}
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
