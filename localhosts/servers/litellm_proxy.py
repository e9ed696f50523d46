"""Real LiteLLM proxies on this machine for tests and benchmarks: installed through
hosts/gateway/install-litellm.sh from the wheelhouse the gateway hosts get
(localhosts/servers/litellm_venv.py: one venv per version, cached under $SPEAR_CACHE/litellm/), migrated
with hosts/gateway/migrate.sh, and run with a given config.yaml.

Two modes: config-only (no database: routing, master key, fallbacks, metrics) and database mode
(PostgreSQL through Prisma's WebAssembly query engine, the offline engine the local stack uses).

    venv = litellm_venv("1.91.1").path          # localhosts.servers.litellm_venv
    migrate(venv, db.url)                       # database mode only
    with LitellmProxy(venv, config_yaml, port=4100, log_dir=tmp_path,
                      database_url=db.url) as proxy:   # no database_url: config-only
        proxy.post("/key/generate", {...})

A start costs 40-70 s on two cores (mostly imports): share one proxy per test module.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localhosts.servers.litellm_venv import offline_bundle_dir

REPO = Path(__file__).resolve().parents[2]
GATEWAY_DIR = REPO / "hosts" / "gateway"
MIGRATE_SH = GATEWAY_DIR / "migrate.sh"
READY_WITHIN = 240.0


@dataclass(frozen=True)
class Migrated:
    applied: int
    skipped: int
    seconds: float


def migrate(venv: Path, database_url: str) -> Migrated:
    """Run migrate.sh for the venv's LiteLLM; the URL goes through the environment."""
    start = time.monotonic()
    out = subprocess.run([str(MIGRATE_SH), "--venv", str(venv)], capture_output=True, text=True,
                         env={**os.environ, "DATABASE_URL": database_url})
    if out.returncode:
        raise RuntimeError(f"migrate.sh failed ({out.returncode}):\n{out.stderr[-3000:]}")
    summary = out.stdout.strip().splitlines()[-1].split()  # migrate: applied N, skipped M in S s
    return Migrated(int(summary[2].rstrip(",")), int(summary[4]), time.monotonic() - start)


class ProxyError(RuntimeError):
    """An HTTP error answer from the proxy: the status and the decoded body."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class LitellmProxy:
    """`litellm --config` from `venv` on 127.0.0.1:`port`; a context manager that waits for
    /health/readiness and stops the proxy (and its query engine) afterwards. `start()` and
    `stop()` restart it in place."""

    def __init__(self, venv: Path, config_yaml: str, *, port: int, log_dir: Path,
                 master_key: str = "sk-spear-test-master", database_url: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.venv = venv
        self.port = port
        self.master_key = master_key
        self.database_url = database_url
        self.log_dir = log_dir
        self.config_path = log_dir / f"litellm-{port}.yaml"
        self.config_path.write_text(config_yaml)
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.last_start_seconds = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"litellm-{self.port}-{self.starts}.log"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k != "DATABASE_URL" and not k.startswith(("PRISMA_", "LITELLM_"))}
        env.update(LITELLM_MASTER_KEY=self.master_key, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   # No schema engine offline: migrate.sh applied the migrations.
                   DISABLE_SCHEMA_UPDATE="true")
        # The venv's bin stays off PATH, as in the gateway's unit: with `prisma` on PATH LiteLLM
        # would run `prisma migrate diff` at start, which needs the schema engine.
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if Path(p).resolve() != (self.venv / "bin").resolve())
        if self.database_url is not None:
            env["DATABASE_URL"] = self.database_url
            env["PRISMA_QUERY_ENGINE_BINARY"] = str(offline_bundle_dir() / "query-engine")
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        assert self.process is None, "already running"
        self.starts += 1
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            # Its own session, so stop() reaches the query engine it spawns too.
            self.process = subprocess.Popen(
                [str(self.venv / "bin" / "litellm"), "--config", str(self.config_path),
                 "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                cwd=self.log_dir, start_new_session=True)
        deadline = began + READY_WITHIN
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"litellm exited with {code}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, ProxyError):
                if self.get("/health/readiness", timeout=5).get("status") == "healthy":
                    break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"litellm not ready after {READY_WITHIN:.0f} s:\n{self.log_tail()}")
            time.sleep(1)
        self.last_start_seconds = time.monotonic() - began

    def stop(self) -> None:
        if self.process is None:
            return
        pgid = self.process.pid  # the session leader: its group is the proxy and its engine
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def __enter__(self) -> LitellmProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    # -- HTTP ------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None, *,
                key: str | None = None, timeout: float = 60) -> Any:
        """JSON in and out, authorised with `key` (default the master key); an error answer
        raises ProxyError with its status and body."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method, headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {key or self.master_key}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            raw = e.read().decode(errors="replace")
            try:
                parsed: Any = json.loads(raw)
            except json.JSONDecodeError:
                parsed = raw
            raise ProxyError(e.code, parsed) from None

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: dict, **kw: Any) -> Any:
        return self.request("POST", path, body, **kw)
