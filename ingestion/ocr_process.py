"""OCR in a child process: reading one large scan takes rapidocr's ONNX sessions from 150 MB to
800 MB and more, and in the server's own process that memory stayed.

One child serves a document's images one after another (its engine loads once, ~0.3 s), exits
when no image has come for OCR_PROCESS_IDLE_S or when a read left it above OCR_PROCESS_MAX_RSS_BYTES,
and the next image starts a fresh one: the memory OCR took is the system's again. The child is
forked from the parse fork server (ingestion/isolated.py), so it starts in milliseconds, and runs
under the parse child's memory cap mechanism (OCR_MEMORY_BYTES of address space beyond where it
started, the engine's included): an image whose reading needs more fails with that reason, and the child,
its memory in an unknown state, exits; the next image starts a fresh one.
"""

from __future__ import annotations

import threading
from multiprocessing.connection import Connection
from typing import Any

from ragline import defaults
from ragline.ingestion.isolated import CONTEXT, answer_of, cap_address_space, death, limits, out_of_memory, resident_bytes
from ragline.ingestion.ocr import OcrEngine
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError


class OcrProcess:
    """`OcrEngine.read` with the engine in a child process; the same text and the same errors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one image at a time: OCR already fills the cores
        self._child: Any = None
        self._conn: Connection | None = None

    def read(self, data: bytes) -> str:
        with self._lock:
            reply = self._ask(data)
            if reply is None:  # the child ended without answering
                exitcode = self._end()
                if exitcode != 0:
                    raise death(exitcode, "an image (OCR)")
                reply = self._ask(data)  # it had exited idle just as the image came: once more, with a new child
                if reply is None:
                    raise death(self._end(), "an image (OCR)")
        if reply[0] == "text":
            return str(reply[1])
        error_type, message = reply[1], reply[2]
        raise error_type(message)

    def close(self) -> None:
        with self._lock:
            self._end()

    def _ask(self, data: bytes) -> tuple[Any, ...] | None:
        conn = self._connection()
        try:
            conn.send((data, limits()))
        except OSError:  # the child had exited: the caller starts another
            return None
        reply = answer_of(conn, self._child)
        return tuple(reply) if reply is not None else None

    def _connection(self) -> Connection:
        if self._child is None or not self._child.is_alive() or self._conn is None:
            self._end()
            ours, theirs = CONTEXT.Pipe()
            self._child = CONTEXT.Process(target=_serve, name="ragline-ocr", daemon=True,
                                          args=(theirs, defaults.OCR_PROCESS_IDLE_S, defaults.OCR_PROCESS_MAX_RSS_BYTES,
                                                defaults.OCR_MEMORY_BYTES))
            self._child.start()
            theirs.close()
            self._conn = ours
        return self._conn

    def _end(self) -> int | None:
        """Stop the child if it still runs, and forget it: its exit code."""
        child, conn = self._child, self._conn
        self._child, self._conn = None, None
        if conn is not None:
            conn.close()
        if child is None:
            return None
        child.join(1)  # a child that answered its last image is exiting on its own
        if child.is_alive():
            child.kill()
        child.join(5)
        return int(child.exitcode) if child.exitcode is not None else None


def _serve(conn: Connection, idle_s: float, max_rss: int, memory: int) -> None:
    limit = cap_address_space(memory)
    engine = OcrEngine()  # loads its sessions with the first image, under the cap
    while conn.poll(idle_s):
        try:
            data, current = conn.recv()
        except EOFError:  # the server is gone
            return
        vars(defaults).update(current)
        reply = _read(engine, data, limit, memory)
        conn.send(reply)
        if reply[1] is DocumentTooLargeError or resident_bytes() > max_rss:
            return  # the memory this read took goes back now; the next image starts a fresh engine


def _read(engine: OcrEngine, data: bytes, limit: int, memory: int) -> tuple[Any, ...]:
    """One image's reply: ("text", text) or ("error", type, one-line reason)."""
    try:
        return ("text", engine.read(data))
    except Exception as exc:  # OpenCV's and onnxruntime's own errors among them
        if out_of_memory(exc, limit):
            return ("error", DocumentTooLargeError, f"reading the image's text (OCR) needs more than {memory // 2**20:,} MB of memory")
        if isinstance(exc, IngestionError):
            return ("error", type(exc), str(exc))
        return ("error", IngestionError, f"OCR could not read the image: {exc}")
