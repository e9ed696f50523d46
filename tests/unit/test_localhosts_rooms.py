"""localhosts/ is in rooms (its __init__.py names them): each a package whose docstring says what
it stands in for or builds, and nothing in the product imports any of it."""

from __future__ import annotations

import ast

from tests.support.checkout import clone_files
from tests.support.stack_files import REPO

LOCALHOSTS = REPO / "localhosts"
ROOMS = {"hosts", "kube", "images", "standins", "servers", "bench"}
# What ships or deploys: the program and everything it, the pack or the gateway hosts import.
PRODUCT = ("__main__.py", "config", "components", "spear", "policies", "gate", "review", "hosts")


def imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module or "")
    return found


def test_localhosts_holds_only_its_rooms_and_the_few_modules_beside_them():
    packages = {p.parent.name for p in LOCALHOSTS.glob("*/__init__.py")}
    assert packages == ROOMS
    beside = {p.name for p in LOCALHOSTS.glob("*.py")}
    assert beside == {"__init__.py", "engine.py", "local_stack.py", "prefetch.py", "progress.py",
                      "report.py"}


def test_each_room_says_what_it_stands_in_for_or_builds():
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((LOCALHOSTS / room / "__init__.py").read_text()))
        assert doc and len(doc) > 80, room
        assert f"- {room}/" in ast.get_docstring(ast.parse((LOCALHOSTS / "__init__.py").read_text()))


def test_nothing_in_the_product_imports_localhosts():
    # What a clone holds, not whatever is on disk: the pack's virtualenv (policies/.venv, 1626
    # modules) took 45 s of a cold run to parse.
    files = [REPO / name for name in clone_files(REPO)
             if name.endswith(".py") and name.split("/")[0] in PRODUCT]
    assert len(files) > 100
    importing = sorted(str(path.relative_to(REPO)) for path in files
                       if any(m.partition(".")[0] == "localhosts"
                              for m in imported_modules(path.read_text())))
    assert importing == []


def test_the_import_check_sees_both_forms():
    assert imported_modules("import localhosts.kube.kubebuild\nfrom localhosts.hosts import host\n"
                            "from . import x\n") == {"localhosts.kube.kubebuild", "localhosts.hosts"}
