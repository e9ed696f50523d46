"""The CI workflows pass actionlint (which also runs shellcheck on their scripts when it is on
PATH). actionlint is built from the Go module proxy with the ordinary `go` client the first
time, and kept under $SPEAR_CACHE/tools/."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint"
VERSION = "v1.7.12"


def actionlint() -> Path:
    cache = Path(os.environ.get("SPEAR_CACHE") or Path.home() / ".cache" / "spear-fleet")
    binary = cache / "tools" / f"actionlint-{VERSION}" / "actionlint"
    if binary.exists():
        return binary
    go = shutil.which("go")
    assert go, "building actionlint needs Go (the engine's build needs it too)"
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as gobin:
        # Outside any module, so `go install pkg@version` builds exactly that version.
        subprocess.run([go, "install", f"{ACTIONLINT}@{VERSION}"], cwd=gobin, check=True,
                       env={**os.environ, "GOBIN": gobin, "CGO_ENABLED": "0"}, timeout=900)
        os.replace(Path(gobin) / "actionlint", binary)  # complete binaries only
    return binary


def test_the_workflows_pass_actionlint():
    workflows = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
    assert workflows, "no workflow in .github/workflows"
    result = subprocess.run([str(actionlint()), "-no-color", *map(str, workflows)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
