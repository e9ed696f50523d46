"""Backups of the gateway's local PostgreSQL, the ledger budgets are enforced from.

`DatabaseBackup` installs spear-gateway-backup.timer on the gateway host: at each
`gateway.database.backup.onCalendar` it runs hosts/gateway/backup-database.sh, a pg_dump
encrypted with the stack's `gatewayBackupKey` (openssl, AES-256 with a PBKDF2-derived key: no
dump is ever plain on disk) into `backup.folder`, keeping the newest `backup.keep` dumps. The folder must outlive the host (a
mounted volume; the local stack binds one of this machine's folders): a dump on the lost disk
restores nothing. The first `up` takes a dump at once, so a backup exists from the start.

Restoring is `gateway.database.restoreFrom` (components/gateway/database.py): a database made
anew loads that dump before anything else uses it, so keys and spend come back as they were.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.gateway.render import HOSTS_DIR
from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session
from config.types import DatabaseBackupPlan
from review.kinds import CREATE, DELETE, IN_PLACE, Kind
from spear import tokens
from spear.rules import BACKUP_DUMP, SYSTEM_UNIT_DIR

UNIT = "spear-gateway-backup"
SCRIPT = HOSTS_DIR / "backup-database.sh"
DUMP_NAME = f"^{BACKUP_DUMP.pattern}$"  # backup-database.sh's names, for grep -E


# The dumps' cipher, as backup-database.sh runs it and a restore reverses it.
CIPHER = ("-aes-256-cbc", "-pbkdf2", "-iter", "200000")


def rendered_script() -> str:
    """backup-database.sh with the cipher it encrypts with, for a host and for the cluster."""
    return SCRIPT.read_text().replace("@CIPHER@", " ".join(CIPHER))


def key_file(runtime_dir: str) -> str:
    """Where the host keeps the passphrase the dumps are encrypted with (root's, 0600)."""
    return posixpath.join(runtime_dir, "config", "backup.key")


def restore_script(dump: str, key: str, psql: str, pg_restore: str, where: str) -> str:
    """Shell that loads the encrypted `dump` into the database that `psql` and `pg_restore` (their
    command lines, up to their own options) reach, only if it holds no table yet (a database
    made anew); it sets `restored` to the dump's path when it did. Decrypted with the key file
    into pg_restore's stdin; a wrong key fails it, naming the key. `where`: where the dump was
    looked for, for the error."""
    q, k = shlex.quote(dump), shlex.quote(key)
    return f"""restored=
tables=$({psql} -Atc "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
if [ "$tables" = 0 ]; then
  [ -f {q} ] || {{ echo "gateway.database.restoreFrom: there is no {q} {where}" >&2; exit 1; }}
  status=$(mktemp)
  {{ openssl enc -d {" ".join(CIPHER)} -pass file:{k} < {q}; echo $? > "$status"; }} \
    | {pg_restore} --exit-on-error
  decrypted=$(cat "$status"); rm -f "$status"
  [ "$decrypted" = 0 ] || {{ echo "gateway.database.restoreFrom: {q} does not decrypt with" \
    "gatewayBackupKey" >&2; exit 1; }}
  restored={q}
fi"""


def render_units(plan: DatabaseBackupPlan, runtime_dir: str, port: int, cluster_unit: str
                 ) -> dict[str, str]:
    """The service (one dump) and the timer that starts it, by file name."""
    service = f"""[Unit]
Description=spear-fleet: one backup of the gateway database
Requires={cluster_unit}
After={cluster_unit}
# A dump taken by hand right after others is never refused by systemd's start limit.
StartLimitIntervalSec=0

[Service]
Type=oneshot
Environment=SPEAR_BACKUP_FOLDER={plan.folder} SPEAR_BACKUP_PORT={port} SPEAR_BACKUP_KEEP={plan.keep}
Environment=SPEAR_BACKUP_KEY_FILE={key_file(runtime_dir)}
ExecStart={posixpath.join(runtime_dir, "bin", SCRIPT.name)}
"""
    # Persistent: a run missed while the host was down happens at its next boot.
    timer = f"""[Unit]
Description=spear-fleet: backups of the gateway database

[Timer]
OnCalendar={plan.on_calendar}
Persistent=true

[Install]
WantedBy=timers.target
"""
    return {f"{UNIT}.service": service, f"{UNIT}.timer": timer}


@dataclass
class DatabaseBackupArgs:
    connection: pulumi.Input[dict]
    runtime_dir: str
    units: dict[str, str]  # render_units'
    on_calendar: str
    folder: str
    key: pulumi.Input[str]  # gatewayBackupKey (secret)


class DatabaseBackupProvider(HostProvider):
    update_fields = ("units", "script", "on_calendar", "folder", "runtime_dir", "key")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:{UNIT}.timer"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        q = shlex.quote
        with Session(props["connection"]) as host:
            # The host's systemd decides what a calendar expression means: ask it first.
            checked = host.run(f"systemd-analyze calendar {q(props['on_calendar'])}", check=False)
            if checked.code != 0:
                raise RemoteError(f"gateway.database.backup.onCalendar: systemd on the gateway host"
                                 f" refuses {props['on_calendar']!r}: {checked.stderr.strip()}")
            host.write(posixpath.join(props["runtime_dir"], "bin", SCRIPT.name), props["script"], 0o755)
            host.write(key_file(props["runtime_dir"]), props["key"], 0o600)
            for name, text in props["units"].items():
                host.write(f"{SYSTEM_UNIT_DIR}/{name}", text)
            host.run(f"systemctl daemon-reload && systemctl enable --quiet --now {UNIT}.timer")
            if not olds:
                host.run(f"systemctl start {UNIT}.service")
            dumps = host.run(f"ls -1 {q(props['folder'])} | grep -E '{DUMP_NAME}' | sort",
                             check=False).stdout.split()
        if not dumps:
            raise RemoteError(f"no dump in {props['folder']} on the gateway host after a backup")
        return {**props, "first_dump": (olds or {}).get("first_dump") or dumps[-1],
                "dumps": len(dumps)}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with Session(props["connection"]) as host:
            enabled = host.run(f"systemctl is-enabled {UNIT}.timer", check=False).stdout.strip()
            units = {name: host.read(f"{SYSTEM_UNIT_DIR}/{name}") for name in props["units"]}
        if enabled != "enabled" or None in units.values():
            return ReadResult(id_=None, outs={})  # gone (a re-created host): `up` installs it
        return ReadResult(id_=id_, outs={**props, "units": units})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # The dumps stay: they are the records, and a destroy is no reason to lose them.
        names = " ".join(shlex.quote(f"{SYSTEM_UNIT_DIR}/{n}") for n in props["units"])
        with Session(props["connection"]) as host:
            host.run(f"systemctl disable --now --quiet {UNIT}.timer 2>/dev/null; rm -f {names};"
                     " systemctl daemon-reload")


KIND = Kind.of(tokens.GATEWAY_BACKUP, "gateway database backups", IN_PLACE, meanings={
    IN_PLACE: "rewrites the backup timer, script or key; the dumps are kept (each stays under the"
              " key it was written with)",
    CREATE: "a timer that dumps the database, encrypted, into the backup folder; one dump is"
            " taken at once",
    DELETE: "the timer is removed; the dumps stay in the folder",
})

class DatabaseBackup(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_BACKUP.name):
    first_dump: pulumi.Output[str]  # the dump the first `up` took
    dumps: pulumi.Output[int]  # how many the folder held after the last `up`

    def __init__(self, name: str, args: DatabaseBackupArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(DatabaseBackupProvider(), name, {
            "connection": args.connection,
            "runtime_dir": args.runtime_dir,
            "units": args.units,
            "on_calendar": args.on_calendar,
            "folder": args.folder,
            "script": rendered_script(),
            "key": args.key,
        }, opts, outputs=("first_dump", "dumps"), secret_inputs=("key",))
