"""A small website on loopback: pages, redirects, a DuckDuckGo-style result page, a SearXNG API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragline.settings import get_settings


@dataclass
class Page:
    body: bytes | str = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class LocalSite:
    """`site.pages["/path"] = Page(...)`; `site.url("/path")`; `site.hits` lists requested paths."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.pages: dict[str, Page] = {}
        self.hits: list[str] = []
        self.bodies: list[bytes] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                site.bodies.append(self.rfile.read(length) if length else b"")
                site.hits.append(self.path)
                page = site.pages.get(self.path.split("?", 1)[0])
                if page is None:
                    page = Page("not found", status=404, content_type="text/plain")
                if page.delay:
                    threading.Event().wait(page.delay)
                body = page.body.encode() if isinstance(page.body, str) else page.body
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(body)))
                for key, value in page.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = _serve
            do_POST = _serve

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def start(self) -> LocalSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def site() -> Iterator[LocalSite]:
    server = LocalSite().start()
    yield server
    server.stop()


@pytest.fixture
def second_site() -> Iterator[LocalSite]:
    """Another loopback address (127.0.0.2), so a policy can allow one site and refuse the other."""
    server = LocalSite("127.0.0.2").start()
    yield server
    server.stop()


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The allow-private setting on, as a deployment would set it (environment)."""
    monkeypatch.setenv("RAGLINE_WEB_FETCH_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
