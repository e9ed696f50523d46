"""README.md's command blocks (its fenced `sh` blocks), which tests run exactly as written, and a
copy of the project to run them in: `pulumi config set --stack local` writes the stack file and
`scripts/gate` its records folder, which the checkout under test must not keep."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.support.checkout import working_tree_copy

FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def command_blocks(markdown: str) -> list[str]:
    """The text of each fenced block marked `sh`, in order (a block marked otherwise, such as
    `text` for output, is not a command)."""
    return [body for language, body in FENCE.findall(markdown) if language == "sh"]


def block_starting(blocks: list[str], first_line: str) -> str:
    """The one block whose first line starts with `first_line`."""
    [block] = [b for b in blocks if b.startswith(first_line)]
    return block


def project_copy(repo: Path, dest: Path) -> Path:
    """The working tree copied to `dest`, with its virtualenvs linked, not rebuilt: what a
    newcomer's clone holds once set up."""
    working_tree_copy(repo, dest)
    for venv in (".venv", "policies/.venv"):
        if (repo / venv).is_dir():
            os.symlink(repo / venv, dest / venv)
    return dest
