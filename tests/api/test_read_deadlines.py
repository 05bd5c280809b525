"""api/read_deadlines.py in `ragline serve`: a client that sends its request slowly cannot hold a
socket, while one that keeps sending is never cut off. Raw loopback sockets against a real server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.api.live import ProcessServer

HEADER_S, BODY_IDLE_S = 1.0, 2.0
WAIT_S = 60  # how long a test waits for what the server must do: it fails only if the server never does it


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ProcessServer]:
    data = tmp_path_factory.mktemp("deadlines")
    env = {"RAGLINE_DATA_DIR": str(data), "RAGLINE_HEADER_TIMEOUT_S": str(HEADER_S), "RAGLINE_BODY_IDLE_TIMEOUT_S": str(BODY_IDLE_S),
           "RAGLINE_CHAT_MODEL": "openai/unused", "RAGLINE_CHAT_API_BASE": "http://127.0.0.1:9", "RAGLINE_CHAT_API_KEY": "k"}
    started = ProcessServer(env, log=data / "serve.log").start(timeout=120)
    yield started
    started.stop()


def connect(server: ProcessServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def read_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length body, the connection left open."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_request_whose_headers_never_finish_gets_408_and_the_close(server):
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
        reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 408") and b"too slowly" in reply


def test_a_socket_that_sends_nothing_is_closed(server):
    with connect(server) as sock:
        assert read_all(sock).startswith(b"HTTP/1.1 408")


def test_a_kept_alive_connections_next_request_has_its_own_header_deadline(server):
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        assert read_all(sock).startswith(b"HTTP/1.1 408")


def test_a_body_that_stops_coming_closes_the_connection(server):
    with connect(server) as sock:
        sock.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ti")
        assert read_all(sock) == b""  # closed without an answer: the route saw its client gone


def test_a_slow_body_that_keeps_coming_is_read_whole(server):
    """Sent over three times the body's idle limit, a piece every tenth of it: answered normally."""
    body = json.dumps({"title": "slow but steady " + "x" * 60}).encode()
    pieces = [body[i : i + 4] for i in range(0, len(body), 4)]
    gap = BODY_IDLE_S * 3 / len(pieces)
    assert gap < BODY_IDLE_S / 5
    with connect(server) as sock:
        sock.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        for piece in pieces:
            time.sleep(gap)
            sock.sendall(piece)
        assert read_response(sock).startswith(b"HTTP/1.1 201")
