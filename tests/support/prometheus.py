"""A real Prometheus for a test (Debian's server binary, which scripts/setup.sh installs beside
promtool): the given rule file loaded, scrapes and rule evaluations every second, its data in a
temporary folder; stopped and removed afterwards."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from components.hostops.waiting import wait_until
from localhosts.servers.processes import stop

READY_WITHIN = 30.0


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}"

    def api(self, path: str, **query: str) -> Any:
        url = f"{self.base_url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())["data"]

    def alerts(self) -> dict[str, dict[str, Any]]:
        """The alerts Prometheus holds, pending or firing, by name."""
        return {a["labels"]["alertname"]: a for a in self.api("alerts")["alerts"]}

    def targets_up(self) -> list[bool]:
        return [t["health"] == "up" for t in self.api("targets")["activeTargets"]]

    def value(self, expr: str) -> float | None:
        result = self.api("query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None


@contextlib.contextmanager
def prometheus(rules: str, scrape_configs: list[dict[str, Any]], port: int,
               workdir: Path) -> Iterator[Prometheus]:
    assert shutil.which("prometheus"), "prometheus is missing: scripts/setup.sh installs it"
    (workdir / "rules.yaml").write_text(rules)
    (workdir / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"], "scrape_configs": scrape_configs}))
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
         f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    server = Prometheus(port)

    def ready() -> bool:
        assert process.poll() is None, (workdir / "prometheus.log").read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{server.base_url}/-/ready", timeout=2):
                return True
        except OSError:
            return False

    try:
        assert wait_until(ready, READY_WITHIN, interval=0.3), \
            (workdir / "prometheus.log").read_text()[-3000:]
        yield server
    finally:
        stop(process, timeout=20)
        log.close()
