"""What the browser tests run against: `ragline serve --sample` in a subprocess, a loopback proxy
in front of it whose connections the test can cut, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

from tests.api.live import ProcessServer

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_HINT = "run scripts/install-test-browser.sh (installs Debian's chromium), then pip install -e '.[test]'"

# Playwright adds --headless and a fresh --user-data-dir of its own; the rest keep Chromium off
# the network (this machine refuses outside connections, and Chromium would retry them) and
# runnable as root in a container.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None. They FAIL with it: CI must install both."""
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM}: {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the Python package playwright is not installed: {INSTALL_HINT}"
    return None


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, never a browser Playwright downloads."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)


class SampleServer(ProcessServer):
    """`python -m ragline serve --sample`: the service with the sample knowledge base indexed."""

    def __init__(self, env: dict[str, str], port: int | None = None, log: Path | None = None) -> None:
        super().__init__(env, port, log, args=("--sample",))

    def start(self, timeout: float = 180) -> SampleServer:  # the first start embeds the sample manual
        super().start(timeout)
        return self


class CuttableProxy:
    """A TCP proxy on loopback; `cut()` closes every open connection, as a dropped network would."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> CuttableProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def cut(self) -> None:
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stop(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:  # one side ended: end both, so the browser sees the connection close
            with self._lock:
                self._open.difference_update((source, sink))
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


# Installed in the page: remembers every text the given elements ever showed, so a test can
# assert on states that last a fraction of a second (a progress window running, "uploading 40%").
RECORDER_JS = """
(selectors) => {
  window.__seen = window.__seen || {};
  const look = () => {
    for (const selector of selectors) {
      const seen = (window.__seen[selector] = window.__seen[selector] || []);
      for (const node of document.querySelectorAll(selector)) {
        const text = node.textContent.trim();
        if (text && seen[seen.length - 1] !== text && !seen.includes(text)) seen.push(text);
      }
    }
  };
  look();
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
}
"""


def record_texts(page: Any, *selectors: str) -> None:
    page.evaluate(RECORDER_JS, list(selectors))


def seen_texts(page: Any, selector: str) -> list[str]:
    return page.evaluate("(selector) => (window.__seen || {})[selector] || []", selector)
