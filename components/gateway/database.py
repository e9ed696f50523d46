"""The gateway's PostgreSQL: LiteLLM's keys, budgets and spend, and spear-fleet's own ledger.

`LocalDatabase` makes a cluster of Debian's PostgreSQL on the gateway host (its own cluster,
`15/spear`, on the configured port and loopback only), a role and a database, and writes the
database URL into `<runtime>/config/database.env` (0600). The password is made on the host and
never leaves it: it is in no state, log or preview.

`run_migrations` applies LiteLLM's migrations with hosts/gateway/migrate.sh, which records each
one, so a LiteLLM upgrade applies only the new ones; its output says how many were applied.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult
from pulumi_command import remote

from components.gateway.backup import key_file, restore_script
from components.gateway.render import HOSTS_DIR
from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.remote_file import content_digest
from components.hostops.ssh import Session, resolve_connection
from review.kinds import CONFIG_ONLY, CREATE, IN_PLACE, REPLACE, Change, Kind, updates_only
from spear import tokens

PG_VERSION = "15"
CLUSTER = "spear"
DATABASE = "litellm"
ROLE = "litellm"
MIGRATE_SH = HOSTS_DIR / "migrate.sh"


@dataclass
class LocalDatabaseArgs:
    connection: pulumi.Input[dict]
    runtime_dir: str
    port: int
    restore_from: str | None = None  # a dump's path, loaded only into a database made anew
    restore_key: pulumi.Input[str] | None = None  # gatewayBackupKey (secret), which decrypts it


class LocalDatabaseProvider(HostProvider):
    replace_fields = ("port", "runtime_dir")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:postgresql-{PG_VERSION}-{CLUSTER}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        port = int(props["port"])
        env_file = posixpath.join(props["runtime_dir"], "config", "database.env")
        script = f"""set -eu
cd /  # psql as postgres from root's home would complain it cannot enter it
if ! command -v pg_createcluster >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-{PG_VERSION} >/dev/null
fi
# UTF-8 whatever the host's locale: a minimal host has none, and initdb would then pick
# SQL_ASCII, whose text the hooks' driver can only read as bytes.
if [ ! -f /etc/postgresql/{PG_VERSION}/{CLUSTER}/postgresql.conf ]; then
  rm -rf /etc/postgresql/{PG_VERSION}/{CLUSTER}  # what a dropped cluster leaves (our conf.d)
  pg_createcluster {PG_VERSION} {CLUSTER} --port {port} --locale C.UTF-8 --encoding UTF8 \
    -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
fi
conf=/etc/postgresql/{PG_VERSION}/{CLUSTER}
# Loopback only, on the stack's port (conf.d is read after postgresql.conf, so it wins).
sed -i "/^listen_addresses *=/d; s/^port *=.*/port = {port}/" $conf/postgresql.conf
mkdir -p $conf/conf.d
printf "listen_addresses = '127.0.0.1'\\nport = {port}\\n" > $conf/conf.d/spear.conf
systemctl enable --quiet postgresql@{PG_VERSION}-{CLUSTER}
# Its socket folder comes from systemd-tmpfiles at boot: a host just booted may not have it yet.
install -d -o postgres -g postgres -m 2775 /run/postgresql
if ! systemctl restart postgresql@{PG_VERSION}-{CLUSTER}; then
  sleep 2  # once more, then say why
  systemctl restart postgresql@{PG_VERSION}-{CLUSTER} || {{
    journalctl -u postgresql@{PG_VERSION}-{CLUSTER} -n 20 --no-pager -o cat >&2
    tail -n 20 /var/log/postgresql/postgresql-{PG_VERSION}-{CLUSTER}.log >&2
    exit 1
  }}
fi
for i in $(seq 60); do pg_isready -q -h 127.0.0.1 -p {port} && break; sleep 0.5; done
pg_isready -q -h 127.0.0.1 -p {port}
mkdir -p {shlex.quote(posixpath.dirname(env_file))}
if [ ! -s {shlex.quote(env_file)} ]; then
  password=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n')
  umask 077
  printf 'DATABASE_URL="postgresql://{ROLE}:%s@127.0.0.1:{port}/{DATABASE}"\\n' "$password" \\
    > {shlex.quote(env_file)}.tmp
  mv {shlex.quote(env_file)}.tmp {shlex.quote(env_file)}
fi
password=$(sed -n 's|^DATABASE_URL="postgresql://{ROLE}:\\([^@]*\\)@.*|\\1|p' {shlex.quote(env_file)})
runuser -u postgres -- psql -q -p {port} -v ON_ERROR_STOP=1 -v pw="$password" <<'SQL'
SELECT format('CREATE ROLE {ROLE} LOGIN PASSWORD %L', :'pw')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') \\gexec
SELECT format('ALTER ROLE {ROLE} PASSWORD %L', :'pw') \\gexec
SELECT 'CREATE DATABASE {DATABASE} OWNER {ROLE} ENCODING ''UTF8'' TEMPLATE template0'
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{DATABASE}') \\gexec
SQL
encoding=$(runuser -u postgres -- psql -p {port} -d {DATABASE} -Atc 'SHOW server_encoding')
if [ "$encoding" != UTF8 ]; then
  echo "the database {DATABASE} in cluster {PG_VERSION}/{CLUSTER} is $encoding, not UTF8 (made" \
       "by an earlier version); keep its data with pg_dump, then pg_dropcluster --stop" \
       "{PG_VERSION} {CLUSTER} and run up again" >&2
  exit 1
fi
{_restore(props.get("restore_from"), port, key_file(props["runtime_dir"]))}
# Which records these are: the cluster's id when they were first made (a new cluster is new
# records: new keys); a restored dump brings its own back, and with it the keys it holds.
runuser -u postgres -- psql -q -p {port} -d {DATABASE} -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE IF NOT EXISTS spear_records (id text NOT NULL);
ALTER TABLE spear_records OWNER TO {ROLE};
INSERT INTO spear_records SELECT system_identifier::text FROM pg_control_system()
  WHERE NOT EXISTS (SELECT FROM spear_records);
SQL
echo "restored=$restored"
runuser -u postgres -- psql -p {port} -Atc 'SELECT system_identifier FROM pg_control_system()'
runuser -u postgres -- psql -p {port} -d {DATABASE} -Atc 'SELECT id FROM spear_records'
"""
        with Session(props["connection"]) as host:
            if props.get("restore_from"):
                host.write(key_file(props["runtime_dir"]), props["restore_key"], 0o600)
            *_, restored, system_id, records_id = host.run(script).stdout.split()
        return {**props, "cluster": f"{PG_VERSION}/{CLUSTER}", "database": DATABASE,
                "env_file": env_file, "system_id": system_id, "records_id": records_id,
                "restored": restored.removeprefix("restored=") or None}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with Session(props["connection"]) as host:
            found = host.run(f"cd / && runuser -u postgres -- psql -p {int(props['port'])} -Atc"
                             " 'SELECT system_identifier FROM pg_control_system()'", check=False)
            records = host.run(f"cd / && runuser -u postgres -- psql -p {int(props['port'])}"
                               f" -d {DATABASE} -Atc 'SELECT id FROM spear_records'", check=False)
        if found.code != 0:
            return ReadResult(id_=None, outs={})  # gone or down: `up` makes or starts it again
        return ReadResult(id_=id_, outs={**props, "system_id": found.stdout.strip(),
                                         "records_id": records.stdout.strip() or None})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # The keys, budgets and spend are the developers' records: a destroy stops the cluster
        # and keeps its data (pg_dropcluster by hand, deliberately).
        with Session(props["connection"]) as host:
            host.run(f"systemctl disable --now --quiet postgresql@{PG_VERSION}-{CLUSTER}"
                     " 2>/dev/null; true")


def _restore(dump: str | None, port: int, key: str) -> str:
    """The script's part that loads `dump` into the local database if it holds no table yet (a
    database made anew); pg_restore reads it on stdin, since the dump is root's (0600)."""
    if not dump:
        return "restored="
    as_postgres = "runuser -u postgres --"
    return restore_script(dump, key, f"{as_postgres} psql -p {port} -d {DATABASE}",
                          f"{as_postgres} pg_restore -p {port} -d {DATABASE} --no-owner"
                          f" --role={ROLE}", "on the gateway host")


class LocalDatabase(HostResource, module=tokens.DYNAMIC_MODULE,
                    name=tokens.GATEWAY_DATABASE.name):
    env_file: pulumi.Output[str]
    system_id: pulumi.Output[str]  # PostgreSQL's own id of the cluster: new when re-created
    records_id: pulumi.Output[str]  # which records it holds: a restore keeps the dump's
    restored: pulumi.Output[str]  # the dump it was made from, if any

    def __init__(self, name: str, args: LocalDatabaseArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(LocalDatabaseProvider(), name, {
            "connection": args.connection,
            "runtime_dir": args.runtime_dir,
            "port": args.port,
            "restore_from": args.restore_from,
            "restore_key": args.restore_key,
        }, opts, outputs=("cluster", "database", "env_file", "system_id", "records_id", "restored"),
            secret_inputs=("restore_key",))


@dataclass
class MigrationsArgs:
    connection: pulumi.Input[dict]  # secret: the gateway host's login, with its pinned host key
    runtime_dir: str
    # The installed LiteLLM (its install key): a new one may bring new migrations.
    install_key: pulumi.Input[str]
    litellm_version: str
    # Changes when the database does (a new local cluster, another external URL): secret.
    database: pulumi.Input[Any]


_SUMMARY = re.compile(r"migrate: applied (\d+), skipped (\d+)")
_SCRIPT_END = "SPEAR_MIGRATE_SH"


def migrations_command(runtime_dir: str, script: str) -> str:
    """What runs on the gateway host: migrate.sh written to <runtime>/bin, then run with the
    gateway's env files sourced, so DATABASE_URL is never on a command line or in the state."""
    runtime = shlex.quote(runtime_dir)
    path = shlex.quote(posixpath.join(runtime_dir, "bin", "migrate.sh"))
    if not script.endswith("\n") or f"\n{_SCRIPT_END}\n" in script:
        raise ValueError("migrate.sh must end with a newline and hold no line " + _SCRIPT_END)
    return (f"set -e\ninstall -d -m 0755 {runtime}/bin\n"
            f"cat > {path}.new <<'{_SCRIPT_END}'\n{script}{_SCRIPT_END}\n"
            f"chmod 0755 {path}.new && mv {path}.new {path}\n"
            f"set -a; . {runtime}/config/gateway.env\n"
            f"[ ! -f {runtime}/config/database.env ] || . {runtime}/config/database.env\n"
            f"set +a\nexec {path} --venv {runtime}/venv 2>&1\n")


def applied(stdout: str | None) -> int | None:
    """How many migrations a run applied, from migrate.sh's summary line (None: no run yet)."""
    found = _SUMMARY.search(stdout or "")
    return int(found.group(1)) if found else None


def command_connection(connection: pulumi.Input[dict]) -> remote.ConnectionArgs:
    """The host resources' `connection` as pulumi-command's: the ssh_config entry resolved here
    (components/hostops/ssh.py), and the host key the host must present (HostKey's record)."""
    resolved = pulumi.Output.secret(pulumi.Output.from_input(connection).apply(
        lambda c: {**resolve_connection(c), "host_key": c.get("host_key")}))
    return remote.ConnectionArgs(
        host=resolved.apply(lambda c: c["host"]), port=resolved.apply(lambda c: c["port"]),
        user=resolved.apply(lambda c: c["user"]),
        private_key=resolved.apply(lambda c: c["private_key"]),
        host_key=resolved.apply(lambda c: c["host_key"]))


def run_migrations(name: str, args: MigrationsArgs,
                   opts: pulumi.ResourceOptions | None = None) -> remote.Command:
    """LiteLLM's migrations, applied by migrate.sh (which records each, so a LiteLLM upgrade
    applies only the new ones) whenever the install, the version, the database or the script
    changes: a one-shot with nothing on the host to read back, so pulumi-command's Command,
    re-run by its triggers, not a dynamic resource (DESIGN, "Resources"). Its output stays out
    of logs and is a secret in the state (Prisma's errors can name the database)."""
    script = MIGRATE_SH.read_text()
    return remote.Command(name, remote.CommandArgs(
        connection=command_connection(args.connection),
        create=migrations_command(args.runtime_dir, script),
        triggers=[{"install_key": args.install_key, "litellm_version": args.litellm_version,
                   "database": pulumi.Output.secret(args.database),
                   "script": content_digest(script)}],
        logging=remote.Logging.NONE,
    ), pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        additional_secret_outputs=["stdout", "stderr"])))


def _migrations_details(change: Change) -> list[str]:
    """What made migrate.sh run again: the install, the version, the database or the script."""
    old, new = ((state.get("triggers") or [{}])[0] for state in (change.old, change.new))
    return [f"`{key}` changed" + ("" if key == "database" else f": {old.get(key)} -> {new.get(key)}")
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


# pulumi-command runs a Command's `create` again on an update as on a replacement.
_RUN_AGAIN = "runs migrate.sh again: applies only the LiteLLM migrations not yet recorded"
KINDS = (
    Kind.of(tokens.GATEWAY_DATABASE, "gateway PostgreSQL", CONFIG_ONLY, meanings={
        CREATE: "a PostgreSQL cluster, role and database; with gateway.database.restoreFrom the"
                " dump is loaded into it first (keys and spend as dumped)"}),
    # pulumi-command's type: the only remote Command is run_migrations'.
    Kind.of(tokens.COMMAND_REMOTE, "gateway migrations", IN_PLACE,
            details=updates_only(_migrations_details), hidden=frozenset({"create", "connection"}),
            meanings={IN_PLACE: _RUN_AGAIN, REPLACE: _RUN_AGAIN}),
)
