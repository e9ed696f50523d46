"""Every command block of README.md is run as written: scripts/test by CI (.ci/run execs it),
the others by tests/integration/test_readme_commands.py on the local stack."""

from __future__ import annotations

import re

from tests.integration import test_readme_commands as readme_test
from tests.support.readme import block_starting, command_blocks
from localhosts.engine import REPO

TESTS = block_starting(command_blocks((REPO / "README.md").read_text()), "scripts/test")


def test_only_sh_fences_are_commands_and_each_keeps_its_lines():
    text = "intro\n\n```sh\nscripts/up-local\n```\n\n```text\nsmoke test (local): ok\n```\n\n" \
           "```sh\na --b c   # why\nd\n```\n"
    assert command_blocks(text) == ["scripts/up-local\n", "a --b c   # why\nd\n"]


def test_every_readme_block_is_run_by_the_readme_test_or_by_ci():
    run = {readme_test.UP_LOCAL, readme_test.CANARY, readme_test.PROMOTE, readme_test.ROLLBACK,
           readme_test.SEAT_TURN, readme_test.SEAT_EDIT, TESTS}
    assert sorted(command_blocks((REPO / "README.md").read_text())) == sorted(run)


def test_ci_runs_the_readmes_test_command_exactly():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == f"exec {TESTS.strip()}"


# Issue 19 asked for two screens; README grew back to 239 lines with nothing to stop it.
README_MAX_LINES = 120


def test_the_readme_fits_two_screens_and_every_doc_it_names_exists():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    named = set(re.findall(r"\bdocs/[A-Z]+\.md\b", text))
    assert named and {name for name in named if not (REPO / name).is_file()} == set()
