#!/usr/bin/python3
"""vllm: a stand-in for vLLM v0.24.0's `vllm serve`, where vLLM cannot run (no GPU): on the
RunPod test pods (tests/support/runpod_api_standin.py installs this file) and as /usr/local/bin/vllm
in the local stack's serving image (localhosts/images/serving_image/build.py). Standard library only.

It checks the exact command line it was given against the cookbook's serve command (seed 001
step 3) and refuses, exiting 2 with the reason: a flag it does not know, a flag given twice, a
required flag missing, a value of the wrong form, one of the flags the cookbook forbids, and the
API key on the command line; VLLM_API_KEY must be in its environment.

Then it serves like vLLM where the fleet depends on it: a front HTTP server on --port answers
/health (200 once the model is loaded), /v1/models, and forwards /v1/chat/completions and
/v1/completions (streamed chunk by chunk or not) to llama-server, its child on 127.0.0.1, which
serves a tiny model under the served model name with the chat template (--jinja). Like vLLM, /v1/*
needs `Authorization: Bearer $VLLM_API_KEY`; a non-zero `priority` is refused unless started with
`--scheduling-policy priority`; `cache_salt` must be a non-empty string; both are stripped before
llama-server sees the request. /metrics speaks Prometheus under vLLM's names, measured by the
front (llama-server cannot preempt, so preemptions stay 0).

Scripted, for the local stack's diff-producing seat turn (the tiny model cannot call tools): a
chat request whose last user message asks "Create <absolute path> that prints a greeting." and
that offers a tool named Write (Claude Code's) is answered with one Write call creating that file
with SCRIPTED_CONTENT; the request that brings the call's result back is answered "Wrote <path>.".
Every other request goes to llama-server.

Stand-in only, for tests: every response carries `x-spear-standin-pod: <hostname>`, and
GET /standin/requests (with the key) lists the last requests as
{"pod", "model", "cache_salt", "priority", "stream", "status"}.

/etc/vllm-standin.json says where llama-server is and which models it can serve:
  {"llama_server": path, "host": "0.0.0.0" (the pod's address; 127.0.0.1 where pods share the
   machine's network), "llama_port": optional (default --port + 1),
   "models": {repo id: {"gguf": path, "flags": [extra llama-server flags], "max_ctx": n,
                        "native_ctx": trained length, "arch": GGUF architecture}}}
A model id it has no entry for is refused with the ids it knows.
"""

import bisect
import collections
import ctypes
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONFIG = "/etc/vllm-standin.json"
POD = socket.gethostname()
POD_HEADER = "x-spear-standin-pod"
# llama-server's slots: requests beyond them wait in its queue, which /metrics reports as waiting.
PARALLEL = 2
RECENT_REQUESTS = 200
HEALTH_POLL_SECONDS = 0.2


def stretched(native, window, arch):
    """llama-server's flags for a window past the model's trained length, as
    hosts/inference/serve.sh stretches it (a real model's config carries its own rope scaling,
    which vLLM reads)."""
    return ["--rope-scaling", "yarn", "--rope-scale", str(window / native),
            "--yarn-orig-ctx", str(native), "--override-kv", f"{arch}.context_length=int:{window}"]


def positive_int(value):
    return value.isdigit() and int(value) >= 1


def fraction(value):
    try:
        return 0 < float(value) <= 1
    except ValueError:
        return False


# Every flag the cookbook's command gives, each required, with the form of its value.
VALUES = {
    "--revision": lambda v: re.fullmatch(r"[0-9a-f]{40}", v) is not None,
    "--served-model-name": lambda v: bool(v) and not v.startswith("-"),
    "--tensor-parallel-size": positive_int,
    "--max-model-len": positive_int,
    "--gpu-memory-utilization": fraction,
    # v0.24.0 registers both names for the Qwen3-Coder parser.
    "--tool-call-parser": lambda v: v in ("qwen3_coder", "qwen3_xml"),
    "--port": lambda v: positive_int(v) and int(v) <= 65535,
}
OPTIONAL = {"--scheduling-policy": lambda v: v in ("fcfs", "priority")}
SWITCHES = ("--enable-auto-tool-choice",)
REFUSED = {
    "--api-key": "the API key belongs in VLLM_API_KEY, not on a command line anyone can list",
    "--reasoning-parser": "the cookbook forbids it: the model has no thinking mode",
    "--quantization": "the cookbook forbids it: the checkpoint declares its FP8 scheme",
    "--enable-prefix-caching": "the cookbook forbids it: prefix caching is on by default",
    "--no-enable-prefix-caching": "spear-fleet forbids it: agent turns need the prefix cache",
}


def refuse(reason):
    print(f"vllm (stand-in): refused: {reason}", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    """{flag: value (None for a switch)} and the model, or refuse."""
    if len(argv) < 2 or argv[0] != "serve" or argv[1].startswith("-"):
        refuse(f"expected `vllm serve <model> --flag ...`, got {argv[:2]}")
    checks = {**VALUES, **OPTIONAL}
    given = {}
    rest = argv[2:]
    while rest:
        arg = rest.pop(0)
        name, eq, inline = arg.partition("=")
        if name in REFUSED:
            refuse(f"{name}: {REFUSED[name]}")
        if name not in checks and name not in SWITCHES:
            refuse(f"unknown argument {arg!r}")
        if name in given:
            refuse(f"{name} given twice")
        if name in SWITCHES:
            if eq:
                refuse(f"{name} takes no value")
            given[name] = None
            continue
        value = inline if eq else (rest.pop(0) if rest else "")
        if not checks[name](value):
            refuse(f"{name} {value!r}: not a valid value")
        given[name] = value
    missing = [flag for flag in (*VALUES, *SWITCHES) if flag not in given]
    if missing:
        refuse(f"missing {', '.join(missing)}")
    return argv[1], given


# ---------------------------------------------------------------------------------------------
# Requests, as vLLM's OpenAI server validates them


class RequestError(Exception):
    """An answer vLLM gives instead of running the request, in its error body's terms."""

    def __init__(self, status, message, kind="BadRequestError", param=None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def body(self):
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.status}}


def forwarded_body(body, served_model_name, priority_scheduling):
    """The request llama-server gets (without vLLM's own fields), or RequestError as vLLM's."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if model is not None and model != served_model_name:
        raise RequestError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    priority = body.get("priority", 0)
    if type(priority) is not int:  # bool is not an integer here
        raise RequestError(400, "priority: Input should be a valid integer", param="priority")
    if priority != 0 and not priority_scheduling:
        # vLLM's engine processor refuses it in these words.
        raise RequestError(400, f"Got priority {priority} but Priority scheduling is not enabled.")
    salt = body.get("cache_salt")
    if salt is not None and not (isinstance(salt, str) and salt):
        raise RequestError(400, "Parameter 'cache_salt' must be a non-empty string if provided.",
                           param="cache_salt")
    return {k: v for k, v in body.items() if k not in ("priority", "cache_salt")}


# ---------------------------------------------------------------------------------------------
# The scripted task (the module's docstring)

SCRIPTED_TASK = re.compile(r"Create (/\S+) that prints a greeting\.")
SCRIPTED_CONTENT = "print('hello from the fleet')\n"
SCRIPTED_CALL = "spear-scripted-"  # the call's id prefix: its result is recognised by it


def _text(message):
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def scripted_answer(body):
    """The assistant message the scripted task gets at this point of its conversation, or None
    (the request is llama-server's)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []
               if isinstance(t, dict)}
    if not messages or "Write" not in offered:
        return None
    last = messages[-1]
    if last.get("role") == "tool" and str(last.get("tool_call_id", "")).startswith(SCRIPTED_CALL):
        asked = next((SCRIPTED_TASK.search(_text(m)) for m in reversed(messages)
                      if m.get("role") == "user" and SCRIPTED_TASK.search(_text(m))), None)
        return {"role": "assistant", "content": f"Wrote {asked[1] if asked else 'the file'}."}
    asked = SCRIPTED_TASK.search(_text(last)) if last.get("role") == "user" else None
    if asked is None:
        return None
    arguments = json.dumps({"file_path": asked[1], "content": SCRIPTED_CONTENT})
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"{SCRIPTED_CALL}{int(time.time() * 1000)}", "type": "function",
         "function": {"name": "Write", "arguments": arguments}}]}


def scripted_events(answer, model):
    """`answer` as OpenAI's server-sent events: role, the text or the call, finish, DONE."""
    base = {"id": f"chatcmpl-{SCRIPTED_CALL}{POD}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    delta = ({"tool_calls": [{"index": 0, **call} for call in answer["tool_calls"]]}
             if answer.get("tool_calls") else {"content": answer["content"]})
    reason = "tool_calls" if answer.get("tool_calls") else "stop"
    chunks = [{"role": "assistant", "content": ""}, delta]
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in chunks]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    return b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"


# ---------------------------------------------------------------------------------------------
# Metrics, under vLLM v0.24.0's names and buckets (vllm/v1/metrics/loggers.py)

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
               120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
COUNTERS = {
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    # From llama-server's `timings`: cache_n prompt tokens reused from its slot's cache (hits)
    # out of cache_n + prompt_n (queries).
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
}
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("Histogram of time to first token in seconds.",
                                         TTFT_BUCKETS),
    "vllm:inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.",
                                         ITL_BUCKETS),
    "vllm:e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.",
                                         E2E_BUCKETS),
}
FINISHED_REASONS = ("stop", "length", "abort")


def label_value(text):
    return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


class Metrics:
    """What /metrics shows; every method is safe to call from the server's threads."""

    def __init__(self, served_model_name, slots=PARALLEL):
        self.model = served_model_name
        self.slots = slots
        self.lock = threading.Lock()
        self.in_flight = 0
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.success = dict.fromkeys(FINISHED_REASONS, 0)
        # name -> (count per bucket, the last one +Inf; sum)
        self.histograms = {name: [[0] * (len(buckets) + 1), 0.0]
                           for name, (_, buckets) in HISTOGRAMS.items()}

    def started(self):
        with self.lock:
            self.in_flight += 1

    def ended(self):
        with self.lock:
            self.in_flight -= 1

    def observe(self, name, seconds):
        buckets = HISTOGRAMS[name][1]
        with self.lock:
            counts, _ = self.histograms[name]
            counts[bisect.bisect_left(buckets, seconds)] += 1
            self.histograms[name][1] += seconds

    def finished(self, reason, prompt_tokens, generation_tokens, cache_queries, cache_hits):
        with self.lock:
            # The engine finishes a tool call as any other stop.
            key = reason if reason in self.success else "stop"
            self.success[key] += 1
            for name, n in (("vllm:prompt_tokens", prompt_tokens),
                            ("vllm:generation_tokens", generation_tokens),
                            ("vllm:prefix_cache_queries", cache_queries),
                            ("vllm:prefix_cache_hits", cache_hits)):
                self.counters[name] += n

    def aborted(self):
        with self.lock:
            self.success["abort"] += 1

    def render(self):
        """The Prometheus text exposition (format 0.0.4), as prometheus_client writes it."""
        labels = f'model_name="{label_value(self.model)}"'
        with self.lock:
            running = min(self.in_flight, self.slots)
            gauges = {"vllm:num_requests_running": ("Number of requests in model execution"
                                                    " batches.", running),
                      "vllm:num_requests_waiting": ("Number of requests waiting to be processed.",
                                                    self.in_flight - running)}
            lines = []
            for name, (text, value) in gauges.items():
                lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge",
                          f"{name}{{{labels}}} {float(value)}"]
            # Counters are named with their _total in format 0.0.4, HELP and TYPE included.
            for name, text in COUNTERS.items():
                lines += [f"# HELP {name}_total {text}", f"# TYPE {name}_total counter",
                          f"{name}_total{{{labels}}} {float(self.counters[name])}"]
            name = "vllm:request_success_total"
            lines += [f"# HELP {name} Count of successfully processed requests.",
                      f"# TYPE {name} counter"]
            lines += [f'{name}{{finished_reason="{reason}",{labels}}} {float(n)}'
                      for reason, n in self.success.items()]
            for name, (text, buckets) in HISTOGRAMS.items():
                counts, total = self.histograms[name]
                lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
                cumulative = 0
                for bound, n in zip((*map(str, buckets), "+Inf"), counts):
                    cumulative += n
                    lines.append(f'{name}_bucket{{le="{bound}",{labels}}} {float(cumulative)}')
                lines += [f"{name}_count{{{labels}}} {float(cumulative)}",
                          f"{name}_sum{{{labels}}} {total}"]
        return "\n".join(lines) + "\n"


def token_counts(answer):
    """(prompt tokens, generation tokens, prefix-cache queries, hits) from llama-server's
    `timings` (its final streamed chunk has them too) or, failing that, `usage`."""
    timings = answer.get("timings") or {}
    usage = answer.get("usage") or {}
    cached = timings.get("cache_n", 0)
    queried = cached + timings.get("prompt_n", 0)
    prompt = usage.get("prompt_tokens", queried)
    generated = usage.get("completion_tokens", timings.get("predicted_n", 0))
    return prompt, generated, queried, cached


# ---------------------------------------------------------------------------------------------
# The front server


class Front(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, *, key, model, served_model_name, max_model_len,
                 priority_scheduling, llama_port):
        super().__init__(address, Handler)
        self.key = key
        self.model = model
        self.served = served_model_name
        self.max_model_len = max_model_len
        self.priority_scheduling = priority_scheduling
        self.llama_port = llama_port
        self.ready = threading.Event()
        self.metrics = Metrics(served_model_name)
        self.recent = collections.deque(maxlen=RECENT_REQUESTS)
        self.created = int(time.time())

    def model_list(self):
        return {"object": "list", "data": [{
            "id": self.served, "object": "model", "created": self.created, "owned_by": "vllm",
            "root": self.model, "parent": None, "max_model_len": self.max_model_len}]}

    def llama(self):
        return http.client.HTTPConnection("127.0.0.1", self.llama_port, timeout=600)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Front

    def end_headers(self):
        self.send_header(POD_HEADER, POD)
        super().end_headers()

    def reply(self, status, body=b"", content_type="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def authorised(self):
        """vLLM's --api-key check: every /v1 path (and the stand-in's own) needs the key."""
        if self.headers.get("Authorization") == f"Bearer {self.server.key}":
            return True
        self.reply(401, {"error": "Unauthorized"})
        return False

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/health":
            self.reply(200 if self.server.ready.is_set() else 503)
            return None
        if path == "/metrics":
            self.reply(200, self.server.metrics.render().encode(),
                       "text/plain; version=0.0.4; charset=utf-8")
            return None
        if (path.startswith("/v1/") or path.startswith("/standin/")) and not self.authorised():
            return None
        if path.startswith("/v1/") and not self.server.ready.is_set():
            self.reply(503, RequestError(503, "The model is still loading.",
                                         "ServiceUnavailableError").body())
            return None
        return path

    def do_GET(self):
        path = self.route()
        if path == "/v1/models":
            self.reply(200, self.server.model_list())
        elif path == "/standin/requests":
            self.reply(200, list(self.server.recent))
        elif path is not None:
            self.reply(404, {"detail": "Not Found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)  # read before any answer, so keep-alive stays in step
        path = self.route()
        if path in ("/v1/chat/completions", "/v1/completions"):
            self.completion(path, raw)
        elif path is not None:
            self.reply(404, {"detail": "Not Found"})

    def completion(self, path, raw):
        front = self.server
        record = {"pod": POD, "model": None, "cache_salt": None, "priority": None,
                  "stream": False, "status": None}
        try:
            try:
                body = json.loads(raw)
            except ValueError as err:
                raise RequestError(400, f"The request body is not JSON: {err}") from None
            if isinstance(body, dict):
                record.update(model=body.get("model"), cache_salt=body.get("cache_salt"),
                              priority=body.get("priority"), stream=body.get("stream") is True)
            forwarded = forwarded_body(body, front.served, front.priority_scheduling)
        except RequestError as err:
            record["status"] = err.status
            front.recent.append(record)
            self.reply(err.status, err.body())
            return
        front.metrics.started()
        finished = []
        self.streaming = False  # whether the answer's status line is out

        def finish(status):
            """Counts the request before the last of its answer is sent, so that whoever has
            read the answer finds it in /metrics and /standin/requests."""
            if not finished:
                finished.append(status)
                record["status"] = status
                front.recent.append(record)
                front.metrics.ended()

        try:
            self.forward(path, forwarded, record["stream"], finish)
        except (BrokenPipeError, ConnectionResetError):
            front.metrics.aborted()  # the client went away; closing llama's side stops it
            self.close_connection = True
            finish(499)
        except (OSError, http.client.HTTPException) as err:
            finish(500)
            self.close_connection = True
            if not self.streaming:
                self.reply(500, RequestError(500, f"llama-server failed: {err}",
                                             "InternalServerError").body())
        finally:
            finish(500)  # whatever else went wrong, the gauges and the record stay right

    def forward(self, path, body, stream, finish):
        """Sends the request to llama-server and its answer back (the scripted task's, itself)."""
        front = self.server
        started = time.monotonic()
        scripted = scripted_answer(body) if path == "/v1/chat/completions" else None
        if scripted is not None:
            front.metrics.finished("stop", 1, 1, 0, 0)
            finish(200)
            if stream:
                self.reply(200, scripted_events(scripted, front.served), "text/event-stream")
            else:
                self.reply(200, {
                    "id": f"chatcmpl-{SCRIPTED_CALL}{POD}", "object": "chat.completion",
                    "created": int(time.time()), "model": front.served,
                    "choices": [{"index": 0, "message": scripted, "finish_reason":
                                 "tool_calls" if scripted.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            return
        llama = front.llama()
        try:
            llama.request("POST", path, json.dumps(body),
                          {"Content-Type": "application/json",
                           "Authorization": f"Bearer {front.key}"})
            answer = llama.getresponse()
            if answer.status == 200 and stream:
                self.stream(answer, started, finish)
                return
            data = answer.read()
            if answer.status == 200:
                elapsed = time.monotonic() - started
                parsed = json.loads(data)
                front.metrics.observe("vllm:time_to_first_token_seconds", elapsed)
                front.metrics.observe("vllm:e2e_request_latency_seconds", elapsed)
                front.metrics.finished(finish_reason(parsed), *token_counts(parsed))
            finish(answer.status)
            self.reply(answer.status, data, answer.getheader("Content-Type", "application/json"))
        finally:
            llama.close()

    def stream(self, answer, started, finish):
        """Server-sent events passed through one event per chunk, flushed as they come."""
        metrics = self.server.metrics
        self.streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        last = None
        reason, counts = "stop", (0, 0, 0, 0)
        event = b""
        counted = []

        def done():
            if not counted:
                counted.append(True)
                metrics.observe("vllm:e2e_request_latency_seconds", time.monotonic() - started)
                metrics.finished(reason, *counts)
                finish(200)

        while True:
            line = answer.readline()
            event += line
            if line.strip():  # an event ends at a blank line (or at the end)
                continue
            if event.strip():
                chunk = sse_data(event)
                if chunk is not None:
                    reason = finish_reason(chunk) or reason
                    if "timings" in chunk or "usage" in chunk:
                        counts = token_counts(chunk)
                elif b"[DONE]" in event:
                    done()  # SSE clients stop reading here
                now = time.monotonic()
                if last is None:
                    metrics.observe("vllm:time_to_first_token_seconds", now - started)
                elif b"[DONE]" not in event:
                    metrics.observe("vllm:inter_token_latency_seconds", now - last)
                last = now
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            event = b""
            if not line:
                break
        done()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def sse_data(event):
    """The JSON object an SSE event's `data:` carries, or None ([DONE], comments)."""
    data = b"".join(line[5:].strip() for line in event.splitlines() if line.startswith(b"data:"))
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def finish_reason(answer):
    choices = answer.get("choices") or [{}]
    return choices[0].get("finish_reason") if isinstance(choices[0], dict) else None


# ---------------------------------------------------------------------------------------------
# Start-up


def model_entry(config, model):
    entry = config["models"].get(model)
    if entry is None:
        known = ", ".join(sorted(config["models"]))
        refuse(f"unknown model {model!r}: this stand-in serves {known}")
    return entry


def die_with_parent():
    """In llama-server before exec: SIGTERM when the stand-in dies, even by SIGKILL."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def wait_healthy(front, llama):
    while llama.poll() is None:
        try:
            connection = front.llama()
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                front.ready.set()
                print("vllm (stand-in): llama-server is ready", file=sys.stderr, flush=True)
                return
        except OSError:
            pass  # not listening yet
        time.sleep(HEALTH_POLL_SECONDS)


def main(argv):
    model, flags = parse(argv)
    key = os.environ.get("VLLM_API_KEY")
    if not key:
        refuse("VLLM_API_KEY is not set: vLLM would serve without a key")
    if key in argv:
        refuse("the API key is on the command line")
    with open(CONFIG) as handle:
        config = json.load(handle)
    entry = model_entry(config, model)
    port = int(flags["--port"])
    llama_port = int(config.get("llama_port", port + 1))
    max_model_len = int(flags["--max-model-len"])
    served = flags["--served-model-name"]
    front = Front((config.get("host", "0.0.0.0"), port), key=key, model=model,
                  served_model_name=served, max_model_len=max_model_len,
                  priority_scheduling=flags.get("--scheduling-policy") == "priority",
                  llama_port=llama_port)
    # vLLM serves max_model_len to each request; llama-server splits its window among its slots.
    ctx = min(max_model_len * PARALLEL, int(entry.get("max_ctx", max_model_len * PARALLEL)))
    command = [config["llama_server"], "--model", entry["gguf"], "--alias", served, "--jinja",
               "--host", "127.0.0.1", "--port", str(llama_port), "--ctx-size", str(ctx),
               "--parallel", str(PARALLEL), *entry.get("flags", ())]
    native = entry.get("native_ctx")
    if native and max_model_len > native:
        command += stretched(native, max_model_len, entry["arch"])
    print(f"vllm (stand-in): serving {model} at {flags['--revision']} as {served} on"
          f" {front.server_address[0]}:{port} through llama-server on 127.0.0.1:{llama_port}",
          file=sys.stderr, flush=True)
    llama = subprocess.Popen(command, env={**os.environ, "LLAMA_API_KEY": key},
                             preexec_fn=die_with_parent)
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)
        llama.terminate()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    threading.Thread(target=wait_healthy, args=(front, llama), daemon=True).start()
    code = llama.wait()
    if stopping:
        return 0
    print(f"vllm (stand-in): llama-server exited with {code}", file=sys.stderr, flush=True)
    return code or 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
