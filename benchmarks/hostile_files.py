"""Hostile uploads against a real server: each file's outcome and what it did to the server's memory.

    python benchmarks/hostile_files.py [--embedder local|scripted] [--only NAME ...] [--data-dir DIR]

Starts `ragline serve` on loopback (embedded defaults: SQLite, Chroma, the local embedder unless
`--embedder scripted`), uploads each file of the series below to one knowledge base as a client
would, follows its job to the end, and samples every 50 ms the resident memory (VmRSS) of the
server's own process and, apart, of the processes it started (the parse children and their fork
server). Printed per file: the answer (HTTP status, the job's end and reason), the time, and the
server's RSS before, at its peak, and after the job (after 3 s of rest), in MB.

The series: what issue 32's hostile probe used, rebuilt in code, so nothing is downloaded: a CSV
row of 200,000 columns, a 2 MB line without spaces, DOCX files of many paragraphs (within the
unpacked limit) and a zip bomb, a sheet past the row limit and one of 190 MB of
strings, a 25-megapixel 16-bit PNG, a PNG and a
GIF whose headers lie, a 2,000-page PDF and a truncated one, JSON nested 100,000 deep, a Markdown
file of 60 embedded images, a 9 MB HTML table. Nothing is pass/fail: it prints a table.
"""

from __future__ import annotations

import argparse
import io
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness import ROOT, parse_args, rss_mb, scripted_env, stop, tree_rss_mb, wait_healthy

KEY = "hostile-bench-key"


# --- the series ---------------------------------------------------------------------------------

def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png16(width: int, height: int) -> bytes:
    """A real 16-bit RGB PNG (a horizontal gradient): small on disk, width x height x 6 bytes decoded."""
    row = b"\x00" + b"".join(struct.pack(">HHH", x * 13 % 65536, x * 7 % 65536, 30_000) for x in range(width))
    squeeze = zlib.compressobj(9)
    body = b"".join(squeeze.compress(row) for _ in range(height)) + squeeze.flush()
    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", body) + _png_chunk(b"IEND", b"")


def lying_gif() -> bytes:
    """A GIF header claiming 65,535 x 65,535 over a one-pixel body."""
    return b"GIF89a" + struct.pack("<HH", 65_535, 65_535) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff" + \
        b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"


def docx(paragraphs: int) -> bytes:
    from tests.ingestion.test_isolated import many_paragraphs_docx

    return many_paragraphs_docx(paragraphs)


def lying_png() -> bytes:
    from tests.ingestion.image_fixtures import bomb_png

    return bomb_png()


def zip_bomb() -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"\x00" * (300 * 2**20))
    return out.getvalue()


def xlsx_rows(rows: int) -> bytes:
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    sheet = book.create_sheet("rows")
    for i in range(rows):
        sheet.append([i, "x"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def xlsx_long_strings(cells: int, chars: int) -> bytes:
    """A sheet of `cells` distinct strings of `chars` characters: openpyxl reads all shared strings first."""
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    sheet = book.create_sheet("notes")
    for i in range(cells):
        sheet.append([f"{i:06d}" + "x" * (chars - 6)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pdf_pages(pages: int) -> bytes:
    from tests.ingestion.pdf_fixtures import pdf_pages as build

    words = ("wind", "rain", "pressure", "humidity", "temperature", "gusts", "dew point", "frost")
    # each page's line differs in its words, not only its numbers: a line on every page is a running header
    return build([[(72.0, 720.0, f"The {words[n % 8]} and {words[n // 8 % 8]} readings of day {n}.")] for n in range(pages)])


def markdown_images(count: int) -> bytes:
    import base64

    from tests.ingestion.image_fixtures import chart_image, png_of

    parts = [f"Chart {i}: ![chart](data:image/png;base64,{base64.b64encode(png_of(chart_image(f'Chart {i}'))).decode()})" for i in range(count)]
    return "\n\n".join(parts).encode()


def html_table(rows: int) -> bytes:
    body = "".join(f"<tr><td>{i}</td><td>sensor {i}</td><td>{i * 0.5}</td></tr>" for i in range(rows))
    return f"<html><body><table>{body}</table></body></html>".encode()


SERIES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "csv-200k-columns": ("row.csv", lambda: (",".join(f"c{i}" for i in range(200_000)) + "\n").encode()),
    "txt-2mb-no-spaces": ("line.txt", lambda: b"x" * 2_000_000),
    "docx-50k-paragraphs": ("fifty.docx", lambda: docx(50_000)),
    "docx-1.9m-paragraphs": ("many.docx", lambda: docx(1_900_000)),
    "docx-zip-bomb": ("bomb.docx", zip_bomb),
    "xlsx-100k+1-rows": ("rows.xlsx", lambda: xlsx_rows(100_001)),
    "xlsx-190mb-of-strings": ("notes.xlsx", lambda: xlsx_long_strings(6_000, 32_000)),
    "png-25mp-16bit": ("big16.png", lambda: png16(5_000, 5_000)),
    "png-header-lies": ("bomb.png", lying_png),
    "gif-header-lies": ("bomb.gif", lying_gif),
    "pdf-2000-pages": ("long.pdf", lambda: pdf_pages(2_000)),
    "pdf-truncated": ("cut.pdf", lambda: pdf_pages(50)[: 4_000]),
    "json-nested-100k": ("deep.json", lambda: b"[" * 100_000 + b"]" * 100_000),
    "md-60-images": ("charts.md", lambda: markdown_images(60)),
    "html-100k-rows": ("table.html", lambda: html_table(100_000)),
}


# --- measuring -----------------------------------------------------------------------------------

@dataclass
class Sampler:
    """Peaks of the server's RSS and of its descendants' RSS, sampled every 50 ms."""

    pid: int
    server_peak: float = 0.0
    children_peak: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.server_peak = max(self.server_peak, rss_mb(self.pid))
            self.children_peak = max(self.children_peak, tree_rss_mb(self.pid) - rss_mb(self.pid))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Row:
    name: str
    size_kb: float
    outcome: str
    seconds: float
    before: float
    peak: float
    after: float
    children_peak: float


def upload(client, kb: str, filename: str, data: bytes) -> str:
    """The upload's end: `HTTP 4xx: reason` at once, or the job's final state and reason."""
    accepted = client.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": (filename, data)})
    if accepted.status_code != 202:
        return f"HTTP {accepted.status_code}: {accepted.json().get('detail') or accepted.text}"[:110]
    job_url = accepted.headers["location"]
    while True:
        job = client.get(job_url).json()
        if job["state"] in ("done", "failed", "canceled"):
            detail = job.get("error") or (f"{job['document'].get('chunk_count', '?')} chunks" if job.get("document") else "")
            return f"{job['state']}: {detail}"[:110]
        time.sleep(0.25)


def run(args: argparse.Namespace) -> list[Row]:
    import httpx

    from tests.redis_server import free_port
    from tests.scripted_model import ScriptedModel

    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="ragline-hostile-"))
    port = free_port()
    env = {**os.environ, "RAGLINE_DATA_DIR": str(data_dir), "RAGLINE_API_KEYS": f'{{"{KEY}": "hostile"}}',
           "LANGSMITH_TRACING": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    scripted = None
    if args.embedder == "scripted":
        scripted = ScriptedModel().start()
        env.update({k: v for k, v in scripted_env(scripted.base_url).items() if k != "RAGLINE_API_KEYS"},
                   RAGLINE_EMBEDDING_MODEL="openai/scripted-embed", RAGLINE_EMBEDDING_API_BASE=scripted.base_url,
                   RAGLINE_EMBEDDING_API_KEY="k")
    server = subprocess.Popen([sys.executable, "-m", "ragline", "serve", "--port", str(port), "--log-level", "warning"],
                              cwd=ROOT, env=env)
    rows = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(server, f"{url}/health", timeout_s=300)
        with httpx.Client(base_url=url, timeout=120, headers={"X-API-Key": KEY}) as client:
            kb = client.post("/api/v1/knowledge-bases", json={"name": "hostile"}).json()["id"]
            upload(client, kb, "warm.md", b"# Warm up\n\nThe server's models load with a first small document.")
            for name in args.only or SERIES:
                filename, make = SERIES[name]
                data = make()
                time.sleep(args.rest_s)
                before = rss_mb(server.pid)
                started = time.monotonic()
                with Sampler(server.pid) as sampler:
                    outcome = upload(client, kb, filename, data)
                seconds = time.monotonic() - started
                time.sleep(args.rest_s)
                rows.append(Row(name, len(data) / 1024, outcome, seconds, before, max(sampler.server_peak, before),
                                rss_mb(server.pid), sampler.children_peak))
                print(_line(rows[-1]), flush=True)
    finally:
        stop(server)
        if scripted is not None:
            scripted.stop()
    return rows


def _line(row: Row) -> str:
    return (f"| {row.name} | {row.size_kb:,.0f} | {row.outcome} | {row.seconds:.1f} | {row.before:.0f} | {row.peak:.0f} | "
            f"+{row.peak - row.before:.0f} | {row.after:.0f} | {row.after - row.before:+.0f} | {row.children_peak:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", choices=("local", "scripted"), default="local")
    parser.add_argument("--only", nargs="*", choices=sorted(SERIES), help="these files of the series, in this order")
    parser.add_argument("--data-dir", help="the server's data directory (default: a fresh temporary one)")
    parser.add_argument("--rest-s", type=float, default=3.0, help="seconds of rest before and after each file")
    args = parse_args(parser, only=["png-header-lies", "pdf-truncated", "json-nested-100k"], rest_s=0.3)
    print("| file | KB | outcome | s | RSS before | peak | rise | after | left | parse processes peak |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = run(args)
    worst_rise = max(row.peak - row.before for row in rows)
    first, last = rows[0].before, rows[-1].after
    print(f"\nlargest rise {worst_rise:.0f} MB; server RSS {first:.0f} MB before the first file, {last:.0f} MB after the last")


if __name__ == "__main__":
    main()
