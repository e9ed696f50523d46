"""The gateway host's migrations as pulumi-command runs them (components/gateway/database.py):
the command writes migrate.sh and runs it with the env files sourced, so the database URL is on
no command line; the summary line gives the count the stack exports."""

from __future__ import annotations

import subprocess

import pytest

from components.gateway.database import MIGRATE_SH, applied, migrations_command

FAKE_MIGRATE = """#!/bin/sh
# Stands in for migrate.sh: says what it was given and what it found in its environment.
echo "args: $*"
echo "url: $DATABASE_URL"
echo "migrate: applied 2, skipped 5"
"""


def test_the_command_writes_the_script_and_runs_it_with_the_env_files_sourced(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "gateway.env").write_text("LITELLM_MASTER_KEY=sk-m\n")
    (tmp_path / "config" / "database.env").write_text("DATABASE_URL=postgresql://l:pw@x/db\n")
    command = migrations_command(str(tmp_path), FAKE_MIGRATE)
    assert "pw@" not in command
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert (tmp_path / "bin" / "migrate.sh").read_text() == FAKE_MIGRATE
    assert f"args: --venv {tmp_path}/venv" in out
    assert "url: postgresql://l:pw@x/db" in out
    assert applied(out) == 2


def test_without_the_database_env_file_the_gateway_env_alone_is_read(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "gateway.env").write_text("DATABASE_URL=postgresql://external/db\n")
    out = subprocess.run(["sh", "-c", migrations_command(str(tmp_path), FAKE_MIGRATE)],
                         capture_output=True, text=True, check=True).stdout
    assert "url: postgresql://external/db" in out


def test_a_failed_run_fails_the_command(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "gateway.env").write_text("")
    failing = "#!/bin/sh\necho 'migrate: cannot reach the database'\nexit 3\n"
    run = subprocess.run(["sh", "-c", migrations_command(str(tmp_path), failing)],
                         capture_output=True, text=True)
    assert run.returncode == 3 and applied(run.stdout) is None


def test_the_real_script_fits_the_heredoc_and_a_script_that_would_not_is_refused():
    assert MIGRATE_SH.read_text() in migrations_command("/opt/spear-gateway", MIGRATE_SH.read_text())
    with pytest.raises(ValueError, match="end with a newline"):
        migrations_command("/opt/g", "#!/bin/sh\necho no newline")
    with pytest.raises(ValueError, match="SPEAR_MIGRATE_SH"):
        migrations_command("/opt/g", "#!/bin/sh\nSPEAR_MIGRATE_SH\necho\n")
