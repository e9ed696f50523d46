"""docs/RULES.md stays true: every place it names exists (a file, or a file and a name defined in
it), and every policy of the pack is named by a rule."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from policies.endpoints import RULES as ENDPOINT_RULES
from policies.gateway import RULES as GATEWAY_RULES
from policies.inference import RULES as INFERENCE_RULES
from policies.kubernetes import RULES as KUBERNETES_RULES
from tests.support.stack_files import REPO

RULES_DOC = REPO / "docs" / "RULES.md"
# `path` or `path::name` inside backticks, where path is a file of this repository.
_REFERENCE = re.compile(r"`([\w./-]+\.(?:py|sh|service|yaml|md))(?:::(\w+))?`")


def _defined_names(path: Path) -> set[str]:
    """Functions, classes and module-level assignments of a Python file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def references() -> list[tuple[str, str | None]]:
    return _REFERENCE.findall(RULES_DOC.read_text())


def test_the_rules_doc_names_places():
    assert len(references()) > 40


def test_every_place_the_rules_doc_names_exists():
    missing = []
    for path, name in references():
        file = REPO / path
        if not file.is_file():
            missing.append(path)
        elif name and file.suffix == ".py" and name not in _defined_names(file):
            missing.append(f"{path}::{name}")
        elif name and file.suffix != ".py" and name not in file.read_text():
            missing.append(f"{path}::{name}")
    assert missing == []


def test_every_policy_of_the_pack_is_named_by_a_rule():
    named = {path for path, _ in references() if path.startswith("policies/")}
    rules = [*INFERENCE_RULES, *ENDPOINT_RULES, *GATEWAY_RULES, *KUBERNETES_RULES]
    modules = {f"policies/{m.__name__.split('.', 1)[1].replace('.', '/')}.py" for m in rules}
    assert modules - named == set()
