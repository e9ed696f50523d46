"""HTTP to a port on the host through an SSH channel (Session.http_exchange), against a real SSH
server (tests/support/ssh_server.py) and a small HTTP server behind it: answers of either framing
come back whole, and what is not an answer says what happened."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from components.hostops.ssh import NoAnswer, Session
from tests.support.ssh_server import SshServer, new_key_text

PLAIN = b'{"status": "ok"}'
# Larger than an SSH packet (32 KiB): a chunk arrives in several reads.
CHUNKS = [b"x" * 40_000, b"y" * 50_000, b"z"]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked framing needs it

    def do_GET(self) -> None:
        if self.path == "/plain":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PLAIN)))
            self.send_header("X-Pod", "a")
            self.end_headers()
            self.wfile.write(PLAIN)
        elif self.path == "/chunked":
            self.send_response(503)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in CHUNKS:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.2)  # the rest comes after the head is read, as a stream's would
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/slow":
            self.server.release.wait(10)
        else:  # something else than an HTTP server listens on the port
            self.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        self.close_connection = True

    def end_headers(self) -> None:
        # Servers answer a request to close with `Connection: close` (uvicorn, llama-server do),
        # which has http.client let go of the connection before the body is read.
        if self.headers["Connection"] == "close":
            self.send_header("Connection", "close")
        super().end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[::-1])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.release = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def host():
    client_key = new_key_text()
    with SshServer(client_key) as ssh_server:
        key = ssh_server.host_key
        with Session({"host": "127.0.0.1", "port": ssh_server.port, "user": "root",
                      "private_key": client_key,
                      "host_key": f"{key.get_name()} {key.get_base64()}"}) as session:
            yield session


def test_an_answer_with_a_content_length_comes_back_whole_with_its_headers(host, web):
    status, headers, body = host.http_exchange(web, "GET", "/plain")
    assert (status, headers["x-pod"], body) == (200, "a", PLAIN)


def test_a_chunked_answer_that_comes_in_parts_comes_back_whole(host, web):
    assert host.http(web, "GET", "/chunked") == (503, b"".join(CHUNKS))


def test_a_request_body_reaches_the_server(host, web):
    assert host.http(web, "POST", "/echo", b"abc") == (201, b"cba")


def test_a_port_nothing_listens_on_is_no_answer_refused(host):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with pytest.raises(NoAnswer, match=f"nothing answers on 127.0.0.1:{free} on .* \\(connection refused\\)"):
        host.http(free, "GET", "/health")


def test_a_server_that_does_not_speak_http_is_named_so(host, web):
    with pytest.raises(ConnectionError, match=f"not an HTTP answer from 127.0.0.1:{web}"):
        host.http(web, "GET", "/ssh")


def test_a_server_that_keeps_silent_times_out_with_the_timeout_in_the_message(host, web):
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{web} on .* did not answer in 0.5 s"):
        host.http(web, "GET", "/slow", timeout=0.5)
