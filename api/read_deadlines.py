"""Read deadlines for `ragline serve`'s connections: a client that sends slowly cannot hold a socket.

uvicorn waits for a request's headers and body as long as the client likes: 300 sockets that
sent half a request line held their connections (and the server's connection slots) for a minute,
and would have for ever. This is uvicorn's httptools protocol with two deadlines added:

- the request's headers must all arrive within `header_s` of the connection opening, or of the
  first byte of the next request on a kept-alive connection; a late one gets 408 and the close;
- while its body arrives, a request may be silent at most `body_idle_s` between two reads (an
  upload over a slow link goes on as long as bytes keep coming); a silent one is closed, which the
  route reading the body sees as the client gone.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

LATE_HEADERS = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: 39\r\n\r\nthe request's headers came too slowly\r\n"


class ReadDeadlines(HttpToolsProtocol):
    header_s: float = 15.0
    body_idle_s: float = 30.0

    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    @classmethod
    def configured(cls, *, header_s: float, body_idle_s: float) -> type[ReadDeadlines]:
        """The protocol class uvicorn instantiates per connection (its `http=` setting)."""
        return type("ReadDeadlines", (cls,), {"header_s": header_s, "body_idle_s": body_idle_s})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:  # a kept-alive connection's next request: its own deadline
            self._await_headers()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        super().on_headers_complete()
        if not (self.parser.should_upgrade() and self._should_upgrade()):  # an upgraded connection is another protocol's
            self._await_body()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._await_body()

    def on_message_complete(self) -> None:
        self._cancel_body_timer()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        self._cancel_body_timer()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_s, self._headers_late)

    def _await_body(self) -> None:
        self._cancel_body_timer()
        self._body_timer = self.loop.call_later(self.body_idle_s, self._body_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(LATE_HEADERS)
            self.transport.close()

    def _body_late(self) -> None:
        self._body_timer = None
        if not self.transport.is_closing():
            self.transport.close()
