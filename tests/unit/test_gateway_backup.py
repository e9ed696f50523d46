"""The backup's units, as the gateway host gets them: the timer catches up a run missed while the
host was down, and the service dumps the stack's database into the stack's folder."""

from __future__ import annotations

from components.gateway.backup import DUMP_NAME, render_units
from config.types import DatabaseBackupPlan
from spear.rules import BACKUP_DUMP

PLAN = DatabaseBackupPlan(folder="/mnt/backups/spear-gateway", on_calendar="*-*-* 03:00:00", keep=14)


def test_the_timer_runs_at_the_stacks_calendar_and_catches_up_after_downtime():
    timer = render_units(PLAN, "/opt/spear-gateway", 5432, "postgresql@15-spear.service")[
        "spear-gateway-backup.timer"]
    assert "OnCalendar=*-*-* 03:00:00\n" in timer and "Persistent=true\n" in timer
    assert "WantedBy=timers.target" in timer


def test_the_service_dumps_the_stacks_database_into_its_folder_after_the_cluster_is_up():
    service = render_units(PLAN, "/opt/spear-gateway", 5433, "postgresql@15-spear.service")[
        "spear-gateway-backup.service"]
    assert ("Environment=SPEAR_BACKUP_FOLDER=/mnt/backups/spear-gateway SPEAR_BACKUP_PORT=5433"
            " SPEAR_BACKUP_KEEP=14\n") in service
    assert "ExecStart=/opt/spear-gateway/bin/backup-database.sh\n" in service
    assert "Requires=postgresql@15-spear.service" in service and "Type=oneshot" in service


def test_dump_names_are_the_scripts_and_nothing_else():
    assert BACKUP_DUMP.fullmatch("litellm-20261201T030000Z.dump")
    for other in ("litellm-latest.dump", "../litellm-20261201T030000Z.dump",
                  ".litellm-20261201T030000Z.dump.part"):
        assert not BACKUP_DUMP.fullmatch(other)
    assert DUMP_NAME == "^litellm-[0-9]{8}T[0-9]{6}Z\\.dump$"
