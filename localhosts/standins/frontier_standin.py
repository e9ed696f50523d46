"""A stand-in for the frontier provider (the hatch), which cannot be reached from here: an HTTP
server on 127.0.0.1 that speaks Anthropic's Messages API (`POST /v1/messages`, plain and
streamed) with usage and a unique id per message, checks the `x-api-key` the gateway holds, and
counts the calls, so a test can assert that the frontier was, or was never, called.

`output_tokens` is what every answer reports as used (capped at the request's max_tokens, as the
real API stops there); `fill_max_tokens=True` uses exactly max_tokens, so a test can make each
answer cost exactly its worst case.

Run as a script: `python -m localhosts.standins.frontier_standin --port 8160 --api-key sk-ant-test`
(`--host 0.0.0.0` in a pod). Standard library only, with localhosts/standins/http_standin.py.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from localhosts.standins.http_standin import JsonHandler, LocalServer

DEFAULT_REPLY = "SPEAR-FRONTIER-OK"


@dataclass(frozen=True)
class Message:
    """One call that reached the provider: the request body and the id it was answered with."""

    body: dict[str, Any]
    id: str


class FrontierStandin(LocalServer):
    """The server; a context manager that starts it on `port` and stops it afterwards."""

    def __init__(self, port: int, api_key: str, *, reply: str = DEFAULT_REPLY,
                 output_tokens: int = 16, fill_max_tokens: bool = False,
                 delay_seconds: float = 0.0) -> None:
        self.port = port
        self.api_key = api_key
        self.reply = reply
        self.output_tokens = output_tokens
        self.fill_max_tokens = fill_max_tokens
        self.delay_seconds = delay_seconds
        self.messages: list[Message] = []
        self.refused: list[str] = []  # why each refused call was refused
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """What a gateway's `api_base` names for an `anthropic/...` model."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.messages)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        max_tokens = body["max_tokens"]
        used = max_tokens if self.fill_max_tokens else min(self.output_tokens, max_tokens)
        message = {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": self.reply}],
            "stop_reason": "end_turn" if used < max_tokens else "max_tokens",
            "stop_sequence": None,
            "usage": {"input_tokens": max(1, len(json.dumps(body.get("messages", []))) // 4),
                      "output_tokens": used},
        }
        with self._lock:
            self.messages.append(Message(body, message["id"]))
        return message

    def _refuse(self, why: str) -> None:
        with self._lock:
            self.refused.append(why)


def _problem(body: dict[str, Any]) -> str | None:
    """What makes a Messages request invalid (the fields the API requires), or None."""
    if not isinstance(body.get("model"), str):
        return "model: a string is required"
    if type(body.get("max_tokens")) is not int or body["max_tokens"] < 1:
        return "max_tokens: a positive integer is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty list is required"
    if any(m.get("role") not in ("user", "assistant") for m in messages):
        return "messages: each role must be user or assistant"
    return None


def _handler(standin: FrontierStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _error(self, status: int, kind: str, message: str) -> None:
            standin._refuse(f"{status} {kind}: {message}")
            self.send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                return self._error(404, "not_found_error", f"no route {self.path}")
            if self.headers.get("x-api-key") != standin.api_key:
                return self._error(401, "authentication_error", "invalid x-api-key")
            if not self.headers.get("anthropic-version"):
                return self._error(400, "invalid_request_error", "anthropic-version header is required")
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return self._error(400, "invalid_request_error", "the body is not JSON")
            problem = _problem(body) if isinstance(body, dict) else "the body is not an object"
            if problem:
                return self._error(400, "invalid_request_error", problem)
            time.sleep(standin.delay_seconds)
            message = standin.answer(body)
            if body.get("stream"):
                self._stream(message)
            else:
                self.send_json(200, message)

        def _stream(self, message: dict[str, Any]) -> None:
            """The message as the Messages API's server-sent events."""
            start = message | {"content": [], "stop_reason": None,
                               "usage": {"input_tokens": message["usage"]["input_tokens"],
                                         "output_tokens": 1}}
            events = [
                ("message_start", {"type": "message_start", "message": start}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta",
                                                   "text": message["content"][0]["text"]}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": message["stop_reason"],
                                             "stop_sequence": None},
                                   "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            self.send_events([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events])

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", required=True)
    args = parser.parse_args()
    standin = FrontierStandin(args.port, args.api_key)
    standin.host = args.host
    with standin:
        print(f"Anthropic Messages API stand-in on http://{args.host}:{args.port}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
