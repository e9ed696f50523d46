"""A throwaway PostgreSQL 15 cluster on this machine for a test or a benchmark: initdb as the
postgres user in a temporary folder, one database and one password role, stopped and removed
afterwards.

The server binaries come from Debian's `postgresql-15` (installed with apt-get when missing), the
same PostgreSQL the gateway host runs."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")
# This helper's own range, below Linux's ephemeral ports (ip_local_port_range starts at 32768)
# so that no client connection can be holding one when the server binds it.
PORTS = range(25441, 25450)


@dataclass(frozen=True)
class Database:
    url: str          # postgresql://user:password@127.0.0.1:port/name (holds the password)
    port: int
    name: str
    user: str
    password: str
    data_dir: Path

    def psql(self, sql: str) -> str:
        """Run `sql` as the role (-At: bare values, one row a line); the password goes through
        the environment, never the command line."""
        env = {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(self.port),
               "PGUSER": self.user, "PGPASSWORD": self.password, "PGDATABASE": self.name}
        out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"psql failed: {out.stderr}")
        return out.stdout.strip()


def ensure_server_installed() -> None:
    if (PG_BIN / "initdb").exists() and (PG_BIN / "postgres").exists():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                    "postgresql-15", "postgresql-client-15"], env=env, check=True)


def _free_port_in_range() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port for PostgreSQL in {PORTS.start}-{PORTS.stop - 1}")


def _start(data: Path, log: Path, listen: str, top: Path) -> int:
    """Start the server on the first free port of PORTS; its port. Another cluster starting at
    the same moment (another test session on the machine) may bind the port between the check
    and the start: the server then fails to bind it, and the next free one is tried."""
    for _ in PORTS:
        port = _free_port_in_range()
        try:
            _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
                         f"-c listen_addresses={listen} -p {port} -k {data} -c fsync=off", "start",
                         cwd=top)
            return port
        except subprocess.CalledProcessError as error:
            said = log.read_text() if log.exists() else ""
            if "Address already in use" not in said:
                raise RuntimeError(f"PostgreSQL did not start: {error.stderr}\n{said}") from None
    raise RuntimeError(f"PostgreSQL found no port in {PORTS.start}-{PORTS.stop - 1} it could bind")


def _as_postgres(*cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    # initdb and postgres refuse to run as root.
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], cwd=cwd, check=True,
                          capture_output=True, text=True)


@contextlib.contextmanager
def postgres_database(name: str = "litellm", user: str = "litellm", also_listen: str | None = None,
                      clients: str | None = None) -> Iterator[Database]:
    """A fresh cluster with database `name` owned by the password role `user`; `also_listen`: an
    address besides 127.0.0.1 (the local cluster's node IP, for pods), `clients`: the network
    allowed to log in there (with the password)."""
    ensure_server_installed()
    top = Path(tempfile.mkdtemp(prefix="spear-pg-"))
    top.chmod(0o755)
    data = top / "data"
    data.mkdir()
    shutil.chown(data, "postgres", "postgres")
    password = secrets.token_hex(12)
    _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "--auth-local=trust", "--auth-host=scram-sha-256",
                 "-U", "postgres",
                 "--no-sync", "-E", "UTF8", "--locale", "C.UTF-8", cwd=top)
    if clients:
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {clients} scram-sha-256\n")
    listen = ",".join(["127.0.0.1", *([also_listen] if also_listen else [])])
    log = data / "server.log"
    port = _start(data, log, listen, top)
    try:
        # The admin connects through the socket (trust); the role over TCP with its password.
        admin = {"PGHOST": str(data), "PGPORT": str(port), "PGUSER": "postgres",
                 "PGDATABASE": "postgres"}
        for sql in (f"CREATE ROLE {user} LOGIN PASSWORD '{password}'",
                    f"CREATE DATABASE {name} OWNER {user}"):
            out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
                                 env={**os.environ, **admin},
                                 capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(f"psql as postgres failed: {out.stderr}\n{log.read_text()}")
        yield Database(url=f"postgresql://{user}:{password}@127.0.0.1:{port}/{name}",
                       port=port, name=name, user=user, password=password, data_dir=data)
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop",
                         cwd=top)
        shutil.rmtree(top, ignore_errors=True)
