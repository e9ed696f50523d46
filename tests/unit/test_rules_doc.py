"""docs/RULES.md stays true: every place it names exists (a file, or a file and a name defined in
it), every policy of the pack is named by a rule, and where a rule has a predicate in spear/, every
config section and policy its row names calls that predicate."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from policies.pack import RULES as PACK_RULES
from tests.support.stack_files import REPO

RULES_DOC = REPO / "docs" / "RULES.md"
# `path` or `path::name` inside backticks, where path is a file of this repository.
_REFERENCE = re.compile(r"`([\w./-]+\.(?:py|sh|service|yaml|md))(?:::(\w+))?`")
# A table cell's border (a cell may hold an escaped \|).
_CELL = re.compile(r"(?<!\\)\|")
# Where the config declares and checks: its sections, and the typed values and kinds they declare.
CONFIG_SECTIONS = ("config/schema/", "config/types.py", "config/options.py")


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


def policy_files() -> set[str]:
    return {f"policies/{m.__name__.split('.', 1)[1].replace('.', '/')}.py" for m in PACK_RULES}


def rows() -> list[dict[str, str]]:
    """Every rule's row, by column name."""
    found: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in RULES_DOC.read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in _CELL.split(line)[1:-1]]
        if header is None:
            header = cells
        elif set("".join(cells)) != {"-"}:
            found.append(dict(zip(header, cells)))
    return found


def predicates(row: dict[str, str]) -> list[tuple[str, str]]:
    """(spear module, function) of each predicate the row names."""
    return [(path.removesuffix(".py").replace("/", "."), name)
            for path, name in _REFERENCE.findall(row["Predicate"]) if path.startswith("spear/")]


def checkers(row: dict[str, str]) -> tuple[set[str], set[str]]:
    """The config sections and the policies a row names, anywhere in it."""
    named = {path for path, _ in _REFERENCE.findall(" ".join(row.values()))}
    return {p for p in named if p.startswith(CONFIG_SECTIONS)}, named & policy_files()


def calls(source: str, module: str, name: str) -> bool:
    """Whether the code imports `name` from `module` (or the module itself) and calls it."""
    package, _, leaf = module.rpartition(".")
    tree = ast.parse(source)
    functions, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if (node.module, alias.name) == (module, name):
                    functions.add(alias.asname or name)
                elif (node.module, alias.name) == (package, leaf):
                    modules.add(alias.asname or leaf)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in functions:
            return True
        if isinstance(func, ast.Attribute) and func.attr == name \
                and isinstance(func.value, ast.Name) and func.value.id in modules:
            return True
    return False


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
    assert policy_files() - named == set()


def test_every_config_section_and_policy_a_predicates_row_names_imports_and_calls_it():
    not_calling, one_sided, checked = [], [], 0
    for row in rows():
        sections, policies = checkers(row)
        if predicates(row) and not (sections and policies):
            one_sided.append(row["Rule"][:60])
        for module, name in predicates(row):
            for place in sorted(sections | policies):
                checked += 1
                if not calls((REPO / place).read_text(), module, name):
                    not_calling.append(f"{place} does not call {module}.{name}")
    assert checked > 20
    assert one_sided == []
    assert not_calling == []


def test_a_rule_both_the_config_and_a_policy_check_has_its_predicate_or_says_why_not():
    unexplained = [row["Rule"][:60] for row in rows()
                   if all(checkers(row)) and not predicates(row)
                   and not row["Predicate"].startswith("— (")]
    assert unexplained == []


def test_calls_sees_a_predicate_imported_by_name_or_through_its_module_and_nothing_less():
    module, name = "spear.rules", "is_commit"
    assert calls("from spear.rules import is_commit as pinned\npinned(x)", module, name)
    assert calls("from spear import rules\nrules.is_commit(x)", module, name)
    assert not calls("from spear.rules import is_commit\n", module, name)
    assert not calls("from spear.vllm import is_commit\nis_commit(x)", module, name)
    assert not calls("from spear.rules import COMMIT\nCOMMIT.fullmatch(x)", module, name)
