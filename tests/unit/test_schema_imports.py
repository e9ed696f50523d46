"""The config/schema modules share parsers through config/schema/common.py only: a private name
(`_x`) stays in its module, so changing it cannot break another section."""

from __future__ import annotations

import ast

from tests.support.stack_files import REPO

SCHEMA = REPO / "config" / "schema"
PACKAGE = "config.schema"


def private_uses(source: str) -> list[str]:
    """The private names a module takes from another config/schema module: imported by name, or
    read off a schema module it imported."""
    found, modules = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{node.module}.{alias.name}")
                elif node.module == PACKAGE:  # from config.schema import hosts
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level:  # from .hosts import _x
            found.extend(f".{node.module}.{a.name}" for a in node.names if a.name.startswith("_"))
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_schema_module_uses_another_ones_private_names():
    modules = sorted(SCHEMA.glob("*.py"))
    assert len(modules) > 5
    assert {path.name: private_uses(path.read_text()) for path in modules
            if private_uses(path.read_text())} == {}


def test_a_private_name_taken_from_another_schema_module_is_found():
    assert private_uses("from config.schema.hosts import _backend as b, host_key\n"
                        "from config.schema import runpod\n"
                        "from .reds import _ONE_OF\n"
                        "x = runpod._api_key, runpod.KEYS\n") == [
        "config.schema.hosts._backend", ".reds._ONE_OF", "runpod._api_key"]
