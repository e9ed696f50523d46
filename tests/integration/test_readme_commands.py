"""The README's first command, as a newcomer runs it: `scripts/up-local` brings up the embedded
default and ends with the smoke test's three parts; run again, it changes nothing.

The stack's state goes to a throwaway file backend (PULUMI_BACKEND_URL, which scripts/env.sh
keeps when set), so the developer's own `local` stack is never touched.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from localhosts import local_stack
from localhosts.host import host_status
from tests.support.engine import REPO

SMOKE_LINE = "smoke test (local): end_turn | SPEAR-BACKEND-OK | ()"


@pytest.fixture
def backend(tmp_path):
    if host_status(local_stack.LOCAL_HOST) is not None:
        pytest.fail("the `local` host is already running; stop it first:"
                    " .venv/bin/python -m localhosts.local_stack down")
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"}
    yield env
    subprocess.run(["bash", "-c", "source scripts/env.sh && pulumi destroy --yes --stack local"
                    " --non-interactive"], cwd=REPO, env=env, capture_output=True, check=False)
    local_stack.stop()


def up_local(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "up-local")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)


def test_up_local_brings_up_the_embedded_default_and_prints_the_smoke_test(backend):
    first = up_local(backend)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    assert first.stdout.strip().splitlines()[-1] == SMOKE_LINE
    again = up_local(backend)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert again.stdout.strip().splitlines()[-1] == SMOKE_LINE
    assert "9 unchanged" in again.stdout
