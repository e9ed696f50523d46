"""A stand-in for the fleet's OpenAI-compatible engine, for gateway tests and benchmarks: an
HTTP server on 127.0.0.1 that answers `/v1/chat/completions` (plain and streamed) with usage and
a unique id per completion, and answers a chosen failure on demand.

The real engine (llama-server, vLLM) cannot be made to answer 401, 422 or 503 at will; the
gateway's hatch is defined by exactly those answers, so the tests choose them here:
- for every following request: `upstream.answer_with(503)` (or `"timeout"`), `answer_with(None)`
  to serve again; over HTTP `POST /control/answer {"status": 503}` for a process run as a script;
- for one request: the text `SPEAR-ANSWER-STATUS=<status>` anywhere in its messages (it passes
  through any gateway unchanged), e.g. `SPEAR-ANSWER-STATUS=timeout`.
"timeout" holds the connection open without answering for `hang_seconds` (longer than the
gateway's request timeout) and then closes it.

`tool_call=(name, arguments)` makes it answer like a model that uses a tool: a request that
offers the tool `name` and holds no tool result yet is answered with one call of it (plain and
streamed), the request after the result with the reply; a real harness then runs the tool.

Each request is recorded (`upstream.calls`) with the status it was answered with, so a test can
count what reached the upstream. `delay_seconds` delays every successful answer, which keeps
concurrent requests in flight at the same time.

Run as a script: `python -m localhosts.standins.openai_upstream --port 8150 [--delay 0.5]`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from localhosts.standins.http_standin import JsonHandler, LocalServer

DEFAULT_REPLY = "SPEAR-UPSTREAM-OK"


DEFAULT_MODEL = "spear-coder-standin"
_PER_REQUEST = re.compile(r"SPEAR-ANSWER-STATUS=(\d{3}|timeout)")
# OpenAI's error types for the statuses the hatch matrix uses.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 422: "unprocessable_entity", 429: "rate_limit_error",
                500: "server_error", 503: "service_unavailable"}


@dataclass(frozen=True)
class Call:
    """One request the upstream received and what it answered (a status, or "timeout")."""

    path: str
    body: dict[str, Any]
    answered: int | str


class OpenAIUpstream(LocalServer):
    """The server; a context manager that starts it on `port` and stops it afterwards."""

    def __init__(self, port: int, *, reply: str = DEFAULT_REPLY, model: str = DEFAULT_MODEL,
                 completion_tokens: int = 12, delay_seconds: float = 0.0,
                 hang_seconds: float = 30.0,
                 tool_call: tuple[str, dict[str, Any]] | None = None,
                 chunk_seconds: float = 0.0) -> None:
        self.port = port
        self.tool_call = tool_call
        self.reply = reply
        self.model = model
        self.completion_tokens = completion_tokens
        self.delay_seconds = delay_seconds
        self.hang_seconds = hang_seconds
        # > 0: a streamed answer is `completion_tokens` chunks this far apart, as an engine
        # streams tokens; a client that goes away stops it (counted in `streams_cut`).
        self.chunk_seconds = chunk_seconds
        self.streams_cut = 0
        self.calls: list[Call] = []
        self._answer: int | str | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """What a gateway's `api_base` names (OpenAI clients append /chat/completions)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def answer_with(self, status: int | str | None) -> None:
        """Answer every following chat completion with `status` ("timeout": no answer at all);
        None serves completions again."""
        if status is not None and status != "timeout" and status not in _ERROR_TYPES:
            raise ValueError(f"status {status!r}: allowed are {sorted(_ERROR_TYPES)} or 'timeout'")
        with self._lock:
            self._answer = status

    def completions_served(self) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c.answered == 200)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    # -- what a request gets -------------------------------------------------------------------

    def _chosen(self, body: dict[str, Any]) -> int | str | None:
        found = _PER_REQUEST.search(json.dumps(body.get("messages", [])))
        if found:
            return found.group(1) if found.group(1) == "timeout" else int(found.group(1))
        with self._lock:
            return self._answer

    def _record(self, path: str, body: dict[str, Any], answered: int | str) -> None:
        with self._lock:
            self.calls.append(Call(path, body, answered))

    def _calls_tool(self, body: dict[str, Any]) -> bool:
        if self.tool_call is None:
            return False
        offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        answered = any(m.get("role") == "tool" for m in body.get("messages") or [])
        return self.tool_call[0] in offered and not answered

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
        completion_tokens = self.completion_tokens
        if isinstance(body.get("max_tokens"), int):  # as an engine does: stop at the limit
            completion_tokens = min(completion_tokens, body["max_tokens"])
        message: dict[str, Any] = {"role": "assistant", "content": self.reply}
        finish = "stop"
        if self._calls_tool(body):
            name, arguments = self.tool_call  # type: ignore[misc]
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}]}
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


def _handler(upstream: OpenAIUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _body(self) -> dict[str, Any] | None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                return None
            return body if isinstance(body, dict) else None

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self.send_json(200, {"object": "list", "data": [
                    {"id": upstream.model, "object": "model", "owned_by": "spear-fleet-tests"}]})
            elif self.path == "/health":
                self.send_json(200, {"status": "ok"})
            else:
                self.send_json(404, _error(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            body = self._body()
            if body is None:
                self.send_json(400, _error(400, "the body is not a JSON object"))
            elif self.path == "/control/answer":
                try:
                    upstream.answer_with(body.get("status"))
                except ValueError as e:
                    self.send_json(400, _error(400, str(e)))
                else:
                    self.send_json(200, {"answer": body.get("status")})
            elif self.path.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
                self._chat(body)
            else:
                self.send_json(404, _error(404, f"no route {self.path}"))

        def _chat(self, body: dict[str, Any]) -> None:
            chosen = upstream._chosen(body)
            if chosen == "timeout":
                upstream._record(self.path, body, "timeout")
                time.sleep(upstream.hang_seconds)
                self.close_connection = True
                return
            if chosen is not None:
                upstream._record(self.path, body, chosen)
                self.send_json(chosen, _error(chosen, f"the upstream stand-in was told to answer {chosen}"))
                return
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                upstream._record(self.path, body, 400)
                self.send_json(400, _error(400, "messages: a non-empty list is required"))
                return
            time.sleep(upstream.delay_seconds)
            answer = upstream.completion(body)
            upstream._record(self.path, body, 200)
            if body.get("stream"):
                self._stream(answer, bool((body.get("stream_options") or {}).get("include_usage")))
            else:
                self.send_json(200, answer)

        def _stream(self, answer: dict[str, Any], include_usage: bool) -> None:
            """The completion as OpenAI's server-sent events: role, text (or the tool call's
            name, then its arguments), finish, (usage), DONE."""
            base = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            [choice] = answer["choices"]
            calls = choice["message"].get("tool_calls")
            if calls:
                [call] = calls
                parts = [{"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]},
                         {"tool_calls": [{"index": 0, "function": {
                             "arguments": call["function"]["arguments"]}}]}]
            elif upstream.chunk_seconds > 0:
                tokens = upstream.completion_tokens
                parts = [{"content": f"{choice['message']['content']}-{i} "} for i in range(tokens)]
            else:
                parts = [{"content": choice["message"]["content"]}]
            chunks = [
                base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}]},
                *(base | {"choices": [{"index": 0, "delta": part, "finish_reason": None}]}
                  for part in parts),
                base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
            ]
            if include_usage:
                chunks.append(base | {"choices": [], "usage": answer["usage"]})
            events = [*(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks), "data: [DONE]\n\n"]
            if upstream.chunk_seconds <= 0:
                self.send_events(events)
                return
            try:
                self.send_events(events[:1])  # the headers and the first event
                for event in events[1:]:
                    time.sleep(upstream.chunk_seconds)
                    self.wfile.write(event.encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with upstream._lock:
                    upstream.streams_cut += 1

    return Handler


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": _ERROR_TYPES.get(status, "error"),
                      "param": None, "code": str(status)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--reply", default=DEFAULT_REPLY)
    args = parser.parse_args()
    with OpenAIUpstream(args.port, reply=args.reply, delay_seconds=args.delay):
        print(f"OpenAI-compatible upstream stand-in on http://127.0.0.1:{args.port}/v1", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
