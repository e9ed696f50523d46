"""spear/ is pure (spear/__init__.py): every module imports only the standard library's pure
modules and spear itself, and calls nothing that reads or writes outside the process."""

from __future__ import annotations

import ast

import pytest

from tests.support.stack_files import REPO

SPEAR = REPO / "spear"
# Modules that compute and touch nothing outside the process. Anything else (os, sys, pathlib,
# subprocess, socket, fcntl, urllib, http, time, ...) and the repository's other packages,
# pulumi and yaml are refused: the policy pack and the gateway host import spear/ as it is.
PURE_STDLIB = frozenset({
    "__future__", "abc", "base64", "binascii", "bisect", "collections", "copy", "dataclasses",
    "decimal", "difflib", "enum", "fractions", "functools", "hashlib", "heapq", "hmac",
    "ipaddress", "itertools", "json", "math", "numbers", "operator", "random", "re", "shlex",
    "statistics", "string", "textwrap", "tomllib", "types", "typing", "unicodedata",
})
# Builtins that do I/O, or run code (and imports) this check cannot see.
IMPURE_BUILTINS = frozenset({"open", "print", "input", "breakpoint", "__import__", "exec", "eval"})
# A path's I/O, for a path a caller handed in.
IMPURE_METHODS = frozenset({
    "open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "touch", "unlink",
    "rmdir", "iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "stat",
})


def impurities(source: str) -> list[str]:
    """What in a module's source is not pure, as "<line>: <what>"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # `from . import x` stays in spear/; `from .. import x` leaves it.
            modules = [node.module or ""] if node.level != 1 else []
        else:
            modules = []
        found += [f"{node.lineno}: imports {module or '..'}" for module in modules
                  if module.partition(".")[0] not in PURE_STDLIB | {"spear"}]
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in IMPURE_BUILTINS:
                found.append(f"{node.lineno}: calls {func.id}()")
            elif isinstance(func, ast.Attribute) and func.attr in IMPURE_METHODS:
                found.append(f"{node.lineno}: calls .{func.attr}()")
    return found


MODULES = sorted(path.name for path in SPEAR.glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_a_spear_module_imports_only_pure_standard_library_modules_and_does_no_io(name):
    assert impurities((SPEAR / name).read_text()) == []


@pytest.mark.parametrize("source", [
    "import subprocess", "import socket", "import fcntl", "import os.path", "import sys",
    "from pathlib import Path", "from urllib.request import urlopen", "import http.client",
    "import time", "import pulumi", "import yaml", "import components.cache",
    "from config import types", "from .. import config",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from config.types import Vllm",
    "open('x')", "print('x')", "path.read_text()", "path.write_text('x')", "path.open()",
])
def test_the_check_refuses_io_other_packages_and_type_only_imports_of_config(source):
    assert impurities(source)


def test_the_check_allows_spear_and_the_pure_standard_library():
    assert impurities("from collections.abc import Mapping\nimport json, re\n"
                      "from spear import rules\nfrom . import vllm\nfrom spear.vllm import flags\n"
                      "re.compile('x').match('x')") == []
