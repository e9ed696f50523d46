"""One run of the rollout gate against the live path (seed 001 step 8), and its CLI.

Everything goes through the gateway's OpenAI-compatible API: stable and candidate are each a
track, a key and a route (the model name the gateway routes). Behind a spear-fleet gateway both
are `coder`, with a key in the general ring for stable and one in the pilot ring for the
candidate, as the gateway serves the pilot ring from the fleet's canary; any other gateway may
give the candidate a route of its own. The three steps:
1. tool calls: `toolCallSamples` requests offering the tool registry's tools to the candidate,
   at the policy's concurrency;
2. the paired eval: every task of the task set against stable and against the candidate;
3. latency: the trace replayed against the candidate (arrivals at their offsets, at most
   `concurrency` in flight), streamed, with the arrival time of every chunk that carries output.
Every request and answer goes to the evidence file (JSON lines), with the receipt the gateway
signed it with (spear/receipts.py: every request asks for one) and, for a stream, the receipt
that closed it (its text and when the gateway sent each chunk); the record beside it carries
the evidence's sha256 and the results spear/rollout_gate.py computes from it, which is also
what the config check and the policy pack recompute. Nothing here judges: it only measures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import GateError
from gate import stack as stacks  # the stack's config and outputs, read with pulumi
from spear import receipts, rollout_gate
from spear import trace as traces
from spear.fleet import CANARY, STABLE
from spear.probes import TOOL_REGISTRY
from spear.rules import CODER_MODEL

# The tool-call step's prompts, cycled: coding requests one of the registry's tools answers.
TOOL_PROMPTS = (
    "Read src/app.py and summarise it.",
    "Run the tests in tests/test_app.py and tell me what fails.",
    "Open src/app.py: where is the config parsed?",
    "Which function in src/app.py handles a missing key? Read it.",
)
MAX_TOKENS = 128
REQUEST_TIMEOUT = 120.0
# One word per token in the qwen2 tokenizer, so promptWords is close to prompt tokens.
FILLER = " the"


class _AtAddress(urllib.request.HTTPSHandler):
    """HTTPS to a URL's name at a given address (curl's --resolve): the connection goes to the
    address, the TLS handshake and the Host header keep the name."""

    def __init__(self, context: ssl.SSLContext | None, address: str) -> None:
        super().__init__(context=context)
        self.address = address

    def https_open(self, req: urllib.request.Request):
        def connection(host: str, **kwargs: Any) -> http.client.HTTPSConnection:
            conn = http.client.HTTPSConnection(host, **kwargs)
            conn._create_connection = (  # the one place http.client opens its socket
                lambda where, *args, **kw: socket.create_connection((self.address, where[1]),
                                                                    *args, **kw))
            return conn
        return self.do_open(connection, req, context=self._context)


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # up to and without /v1
    key: str
    # The root a TLS gateway's certificate chains to (its `gateway` output's tls.root): trusted
    # instead of the system's, which do not sign a private one. None: the system's roots.
    root_pem: str | None = None
    # A gateway host's HTTPS listener (its `gateway` output's tls.address): where its TLS name
    # is reached, as the seats' host aliases reach it, when this machine's DNS does not know the
    # name. The certificate is still checked against the name.
    address: str | None = None

    def _open(self, request: urllib.request.Request, timeout: float):
        context = ssl.create_default_context(cadata=self.root_pem) if self.root_pem else None
        if self.address is None:
            return urllib.request.urlopen(request, timeout=timeout, context=context)
        return urllib.request.build_opener(_AtAddress(context, self.address)).open(
            request, timeout=timeout)

    def _request(self, path: str, body: dict[str, Any] | None) -> urllib.request.Request:
        data = None if body is None else json.dumps(body).encode()
        return urllib.request.Request(f"{self.base_url}{path}", data=data, headers={
            "Authorization": f"Bearer {self.key}", "Content-Type": "application/json",
            receipts.HEADER: "1"})

    def post(self, body: dict[str, Any]) -> tuple[int, Any, Any]:
        """(status, the JSON answer or its text when it is not JSON, the gateway's receipt as
        JSON or None)."""
        try:
            with self._open(self._request("/v1/chat/completions", body),
                            REQUEST_TIMEOUT) as resp:
                status, raw = resp.status, resp.read()
                receipt = _json(resp.headers.get(receipts.HEADER))
        except urllib.error.HTTPError as error:
            status, raw, receipt = error.code, error.read(), None
        try:
            return status, json.loads(raw), receipt
        except ValueError:
            return status, raw.decode("utf-8", "replace"), receipt

    def stream(self, body: dict[str, Any]) -> tuple[int, list[float], str, Any, Any]:
        """(status, seconds after sending at which each chunk carrying output arrived, the text,
        the header's receipt, the stream's closing receipt: both as JSON or None)."""
        sent = time.monotonic()
        chunks, text, closing = [], [], None
        try:
            with self._open(self._request("/v1/chat/completions", {**body, "stream": True}),
                            REQUEST_TIMEOUT) as resp:
                for raw in resp:
                    line = raw.decode().strip()
                    if line.startswith(receipts.STREAM_COMMENT):
                        closing = _json(line[len(receipts.STREAM_COMMENT):])
                    if not line.startswith("data:"):
                        continue
                    if line[5:].strip() == "[DONE]":
                        break
                    delta = (json.loads(line[5:]).get("choices") or [{}])[0].get("delta") or {}
                    if receipts.carries_output(delta):
                        chunks.append(time.monotonic() - sent)
                        text.append(delta.get("content") or "")
                receipt = _json(resp.headers.get(receipts.HEADER))
                return resp.status, chunks, "".join(text), receipt, closing
        except urllib.error.HTTPError as error:
            return error.code, [], error.read().decode("utf-8", "replace")[:300], None, None

    def gateway_version(self) -> str | None:
        """LiteLLM's version as the gateway reports it (None when it is not a LiteLLM gateway or
        the key may not read it). Newer releases say it only on the authenticated details path."""
        for path in ("/health/readiness/details", "/health/readiness"):
            try:
                with self._open(self._request(path, None), 10) as resp:
                    version = json.load(resp).get("litellm_version")
            except (OSError, ValueError):
                continue
            if version:
                return version
        return None


def _json(value: str | None) -> Any:
    """A receipt's JSON as the gateway sent it (checked later, by the config check)."""
    try:
        return None if value is None else json.loads(value)
    except ValueError:
        return value


def tool_call_bodies(route: str, samples: int) -> list[dict[str, Any]]:
    """The tool-call step's requests, each offering every tool of the registry: a candidate
    must pick the right one and fill its arguments as the validator admits them."""
    tools = [rollout_gate.tool_definition(name) for name in sorted(TOOL_REGISTRY)]
    return [{"model": route, "max_tokens": MAX_TOKENS, "temperature": 0, "tools": tools,
             "messages": [{"role": "user", "content": TOOL_PROMPTS[i % len(TOOL_PROMPTS)]}]}
            for i in range(samples)]


def trace_body(route: str, arrival: traces.Arrival) -> dict[str, Any]:
    return {"model": route, "max_tokens": arrival.max_tokens,
            "messages": [{"role": "user", "content": "Summarise:" + FILLER * arrival.prompt_words}]}


def replay(arrivals: tuple[traces.Arrival, ...], concurrency: int,
           send: Callable[[traces.Arrival], dict[str, Any]]) -> list[dict[str, Any]]:
    """Each arrival sent at its offset after the start, or as soon as fewer than `concurrency`
    are in flight; each result gains `offset` and `sent` (seconds after the start)."""
    slots = threading.Semaphore(concurrency)
    start = time.monotonic()

    def one(arrival: traces.Arrival) -> dict[str, Any]:
        time.sleep(max(0.0, start + arrival.offset - time.monotonic()))
        with slots:
            sent = time.monotonic() - start
            return {"offset": arrival.offset, "sent": round(sent, 6), **send(arrival)}

    with ThreadPoolExecutor(max_workers=len(arrivals)) as pool:
        return list(pool.map(one, arrivals))


@dataclass(frozen=True)
class Track:
    """Where one side of the comparison is asked: a key, and the route it asks for."""
    endpoint: Endpoint
    route: str
    who: str  # for the evidence: the key's owner or alias, never the key

    def describe(self) -> str:
        return f"{self.route} as {self.who}"


def run(stable: Track, candidate: Track, policy: rollout_gate.Policy,
        pin: rollout_gate.Pin, tasks: tuple[rollout_gate.Task, ...],
        arrivals: tuple[traces.Arrival, ...], log: Callable[[str], None] = lambda _: None) -> bytes:
    """The evidence of one gate run, as JSON lines."""
    lines: list[dict[str, Any]] = [{"kind": rollout_gate.RUN, "pin": pin.to_json(),
                                    "policy": policy.digest, "stable": stable.describe(),
                                    "candidate": candidate.describe()}]
    with ThreadPoolExecutor(max_workers=policy.concurrency) as pool:
        log(f"tool calls: {policy.tool_call_samples} requests to {candidate.describe()}")
        bodies = tool_call_bodies(candidate.route, policy.tool_call_samples)
        for body, (status, answer, receipt) in zip(bodies, pool.map(candidate.endpoint.post, bodies)):
            lines.append({"kind": rollout_gate.TOOL_CALL, "request": body, "status": status,
                          "answer": answer, "receipt": receipt})
        log(f"paired eval: {len(tasks)} tasks, each to {stable.describe()} and {candidate.describe()}")
        jobs = [(task.id, name, track, rollout_gate.task_request(task, track.route, MAX_TOKENS))
                for task in tasks for name, track in ((rollout_gate.STABLE_TRACK, stable),
                                                      (rollout_gate.CANDIDATE_TRACK, candidate))]
        answers = pool.map(lambda job: job[2].endpoint.post(job[3]), jobs)
        for (task_id, name, _, body), (status, answer, receipt) in zip(jobs, answers):
            lines.append({"kind": rollout_gate.TASK, "task": task_id, "track": name,
                          "request": body, "status": status, "answer": answer,
                          "receipt": receipt})
    log(f"latency: {len(arrivals)} streamed requests to {candidate.describe()} at concurrency"
        f" {policy.concurrency}")

    def send(arrival: traces.Arrival) -> dict[str, Any]:
        body = trace_body(candidate.route, arrival)
        status, chunks, text, receipt, closing = candidate.endpoint.stream(body)
        return {"promptWords": arrival.prompt_words, "maxTokens": arrival.max_tokens,
                "request": body, "status": status, "chunks": [round(c, 6) for c in chunks],
                "text": text, "receipt": receipt, "closing": closing}

    lines += [{"kind": rollout_gate.STREAM, **result}
              for result in replay(arrivals, policy.concurrency, send)]
    return rollout_gate.evidence_bytes(lines)


def write(folder: Path, name: str, pin: rollout_gate.Pin, policy: rollout_gate.Policy,
          evidence: bytes, tasks: tuple[rollout_gate.Task, ...]) -> dict[str, Any]:
    """Write `<name>.evidence.jsonl` and `<name>.json` (the record) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    evidence_file = f"{name}.evidence.jsonl"
    (folder / evidence_file).write_bytes(evidence)
    record = rollout_gate.record_json(name, pin, policy, evidence, tasks, evidence_file)
    (folder / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def table(record: dict[str, Any], policy: rollout_gate.Policy,
          verdict: rollout_gate.Record | rollout_gate.Refused) -> str:
    """The verdict table a person reads; the verdict is the stack's own (rollout_gate.judge)."""
    calls, paired, latency = (record["results"][k] for k in ("toolCalls", "pairedEval", "latency"))
    reasons = ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in calls.items() if k.startswith("reason:"))
    rows = [
        ("tool calls", f"{calls['passed']}/{calls['total']} admitted ({reasons})",
         f">= {policy.tool_call_pass_rate_min:g} of >= {policy.tool_call_samples}"),
        ("paired eval", f"{paired['tasks']} tasks: stable {paired['stablePassed']}, candidate"
                        f" {paired['candidatePassed']}; b={paired['b']} c={paired['c']}"
                        f" p={paired['p']:.4g}",
         f"no regression at alpha {policy.alpha:g}; candidate >= {policy.candidate_pass_rate_min:g}"),
        ("TTFT", " ".join(f"p{q} {latency[f'ttftP{q}'] * 1000:.1f} ms" for q in rollout_gate.PERCENTILES)
         + f" ({latency['requests']} streamed, {latency['failed']} failed)",
         f"p95 <= {policy.ttft_p95_seconds * 1000:g} ms"),
        ("ITL", " ".join(f"p{q} {latency[f'itlP{q}'] * 1000:.1f} ms" for q in rollout_gate.PERCENTILES),
         f"p95 <= {policy.itl_p95_seconds * 1000:g} ms"),
        ("at the gateway", f"TTFT p95 {latency['gatewayTtftP95'] * 1000:.1f} ms, ITL p95"
                           f" {latency['gatewayItlP95'] * 1000:.1f} ms",
         "signed; the client's are no lower"),
    ]
    width = max(len(r[0]) for r in rows)
    out = [f"gate {record['name']}: {rollout_gate.describe(rollout_gate.pin_from_json(record['pin']).pair)}"]
    out += [f"  {label:<{width}}  {found}  [{wanted}]" for label, found, wanted in rows]
    if isinstance(verdict, rollout_gate.Refused):
        out.append("  verdict: REFUSED (the stack would not promote on this record)\n"
                   + "\n".join(f"    - {p}" for p in verdict.problems))
    else:
        out.append("  verdict: " + ("PASS" if verdict.passed else
                                    "FAIL\n" + "\n".join(f"    - {f}" for f in verdict.failures)))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gate", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="the stack whose rolloutGate applies")
    parser.add_argument("--candidate", default=CODER_MODEL,
                        help=f"the candidate's route (default {CODER_MODEL}, asked with the pilot"
                             " ring's key: the fleet's canary)")
    parser.add_argument("--stable", default=CODER_MODEL, help=f"stable's route (default {CODER_MODEL})")
    parser.add_argument("--name", default=None, help="the record's name (default: <tag>-<UTC time>)")
    args = parser.parse_args(argv)
    try:
        stack = stacks.load(args.stack)

        def endpoint(track: str) -> Endpoint:
            return Endpoint(stack.gateway_url, stack.keys[track], stack.gateway_root,
                            stack.gateway_address)

        stable = Track(endpoint(STABLE), args.stable, stack.key_owners[STABLE])
        candidate = Track(endpoint(CANARY), args.candidate, stack.key_owners[CANARY])
        pin = stack.candidate_pin(candidate.endpoint.gateway_version())
        name = args.name or f"{pin.engine_version}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        evidence = run(stable, candidate, stack.policy, pin, stack.tasks, stack.arrivals,
                       log=lambda m: print(m, file=sys.stderr))
        record = write(stack.records, name, pin, stack.policy, evidence, stack.tasks)
    except (GateError, OSError, ValueError) as error:
        print(f"scripts/gate: {error}", file=sys.stderr)
        return 2
    verdict = rollout_gate.judge(name, record, evidence, stack.tasks, stack.policy,
                                 stack.receipt_key)
    print(table(record, stack.policy, verdict))
    print(f"wrote {stack.records / (name + '.json')} and its evidence", file=sys.stderr)
    return 0 if isinstance(verdict, rollout_gate.Record) and verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
