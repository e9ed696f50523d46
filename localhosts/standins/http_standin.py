"""What the HTTP stand-ins for APIs nobody can reach from here (localhosts/standins/openai_upstream.py,
localhosts/standins/frontier_standin.py) share: a server on 127.0.0.1 served from a thread while a `with`
block lasts, and a handler that answers JSON or a server-sent event stream."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's default of 5 resets connections when a gateway opens
    # dozens at once (scripts/bench-gateway at concurrency 64).
    request_queue_size = 256


class LocalServer:
    """A context manager serving `handler()` on `host`:`port` until the block ends."""
    port: int
    host = "127.0.0.1"  # a stand-in run in a pod listens on its address (0.0.0.0)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def __enter__(self):
        self._server = _Server((self.host, self.port), self.handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # tests read what the stand-in recorded
        pass

    def send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list[str]) -> None:
        """A 200 server-sent event stream of `events` (each already framed), then close: the end
        of the stream is the end of the connection, as the real APIs do."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(event.encode())
        self.wfile.flush()
        self.close_connection = True
