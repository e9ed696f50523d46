"""What the gateway itself costs: one trace replayed, at concurrency 1 to 64, against an upstream
that answers at once (localhosts/standins/openai_upstream.py), three ways in one run:
- direct: the upstream alone (the floor);
- stock LiteLLM: the pinned version with the same PostgreSQL and a virtual key with a budget,
  no spear-fleet hooks (its own budget check only);
- spear-fleet: the same with the gateway's hooks (budget reserve and settle, the hatch's
  classifier, cache_salt/priority stamping, and the receipt every request here asks for, as
  scripts/gate's do and a harness's do not), as a gateway host runs them.
Prints, per concurrency, each way's latency p50/p99 and sustained requests/s, the latency each
gateway adds over direct, and the ratios of spear-fleet to stock LiteLLM. Numbers, not a test:
`scripts/bench-gateway [--requests N] [--concurrency 1 4 16 64]`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from components.gateway.keys import key_metadata
from config.types import Developer
from gate import run as gate_run
from localhosts.servers.litellm_venv import litellm_venv
from spear import trace
from spear.rollout_gate import percentile
from spear.rules import CODER_MODEL
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import LitellmProxy, migrate
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database
from localhosts.servers.processes import free_port
from localhosts.servers.spear_gateway_proxy import FRONTIER_KEY, gateway_config, spear_proxy

VERSION = "1.91.1"
BENCHER = Developer(name="bench", team="bench", models=(CODER_MODEL,), max_budget=1_000_000.0,
                    budget_duration="30d", tpm_limit=None, rpm_limit=None,
                    max_parallel_requests=None, metadata={}, rotation=0, rotation_grace="24h")


def measure(endpoint: gate_run.Endpoint, requests: int, concurrency: int) -> dict[str, float]:
    """The trace's requests sent closed-loop at `concurrency`: latency percentiles (ms) and
    requests/s over the whole run."""
    arrivals = tuple(trace.Arrival(0.0, a["promptWords"], 16)
                     for a in trace.generate(requests, 1.0, (20, 200), (16, 16), 1)["requests"])
    latencies: list[float] = []

    def send(arrival: trace.Arrival) -> dict:
        began = time.monotonic()
        status, _, _ = endpoint.post(gate_run.trace_body(CODER_MODEL, arrival))
        if status != 200:
            raise RuntimeError(f"{endpoint.base_url} answered {status}")
        latencies.append(time.monotonic() - began)
        return {}

    began = time.monotonic()
    gate_run.replay(arrivals, concurrency, send)
    wall = time.monotonic() - began
    return {"p50": percentile(latencies, 50) * 1000, "p99": percentile(latencies, 99) * 1000,
            "rps": requests / wall}


def _virtual_key(proxy: LitellmProxy, metadata: dict | None) -> str:
    body = {"key_alias": "bench", "models": [CODER_MODEL], "max_budget": BENCHER.max_budget,
            "budget_duration": BENCHER.budget_duration, **({"metadata": metadata} if metadata else {})}
    return proxy.post("/key/generate", body)["key"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-gateway", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="per way and concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args(argv)
    venv = litellm_venv(VERSION).path
    with contextlib.ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gateway-")))
        upstream = stack.enter_context(OpenAIUpstream(free_port()))
        frontier = stack.enter_context(FrontierStandin(free_port(), FRONTIER_KEY))
        ways: dict[str, Callable[[], gate_run.Endpoint]] = {}
        ways["direct"] = lambda: gate_run.Endpoint(upstream.base_url.removesuffix("/v1"), "none")
        for name, hooks in (("stock LiteLLM", False), ("spear-fleet", True)):
            db = stack.enter_context(postgres_database())
            migrate(venv, db.url)
            config = gateway_config(upstream.base_url, frontier.base_url, hooks=hooks)
            folder = logs / name.replace(" ", "-")
            folder.mkdir()
            proxy = stack.enter_context(
                spear_proxy(venv, config, port=free_port(), log_dir=folder, hatch_cap_usd=100.0,
                            database_url=db.url) if hooks else
                LitellmProxy(venv, config, port=free_port(), log_dir=folder, database_url=db.url))
            key = _virtual_key(proxy, key_metadata(BENCHER) if hooks else None)
            ways[name] = lambda proxy=proxy, key=key: gate_run.Endpoint(proxy.base_url, key)
        print(f"LiteLLM {VERSION}; {args.requests} requests per way and concurrency; an upstream"
              " that answers at once")
        print(f"{'conc':>4}  {'way':<14} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}"
              f" {'+p50 ms':>8} {'+p99 ms':>8}")
        for concurrency in args.concurrency:
            found = {}
            for name, endpoint in ways.items():
                measure(endpoint(), min(20, args.requests), concurrency)  # warm the connection pools
                found[name] = measure(endpoint(), args.requests, concurrency)
            floor = found["direct"]
            for name, row in found.items():
                added = ("" if name == "direct" else
                         f" {row['p50'] - floor['p50']:>8.1f} {row['p99'] - floor['p99']:>8.1f}")
                print(f"{concurrency:>4}  {name:<14} {row['p50']:>8.1f} {row['p99']:>8.1f}"
                      f" {row['rps']:>8.1f}{added}")
            stock, spear = found["stock LiteLLM"], found["spear-fleet"]
            print(f"{'':>4}  spear-fleet vs stock: p50 {spear['p50'] - stock['p50']:+.1f} ms,"
                  f" throughput x{spear['rps'] / stock['rps']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
