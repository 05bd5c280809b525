"""DuckDB side of data_analysis (seed: tools.NewDataAnalysisTool): load a table file, describe it,
run one model-written query read-only with a time limit.

The file is the document's source path when it still exists; otherwise the table text the
catalog kept at ingestion (Markdown tables) is turned back into rows, so analysis works after
the upload folder is gone. Tables are written to a throw-away DuckDB file which the query then
opens read-only with external access off: the SQL can read those tables and nothing else (no
files, no extensions, no ATTACH, no writes), and it is interrupted when it runs too long.
"""

from __future__ import annotations

import csv
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ragline import defaults

TABLE_FILE_TYPES = frozenset({"csv", "xlsx"})


class TabularError(RuntimeError):
    """The table could not be loaded or the query failed; the message is shown to the model."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    row_count: int
    sample: tuple[tuple[Any, ...], ...]

    def describe(self) -> str:
        columns = ", ".join(f'"{c.name}" {c.type}' for c in self.columns)
        lines = [f'Table "{self.name}" ({self.row_count} rows): {columns}']
        lines += ["  example row: " + ", ".join("NULL" if v is None else str(v) for v in row) for row in self.sample]
        return "\n".join(lines)


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool

    def markdown(self) -> str:
        if not self.columns:
            return "(no columns)"
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in self.rows]
        if not self.rows:
            lines.append("(no rows)")
        if self.truncated:
            lines.append(f"(only the first {len(self.rows)} rows are shown)")
        return "\n".join(lines)


def table_name(raw: str, taken: set[str]) -> str:
    name = re.sub(r"\W+", "_", raw.strip().lower()).strip("_") or "data"
    name = f"t_{name}" if name[0].isdigit() else name
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}_{n}", n + 1
    taken.add(unique)
    return unique


_SHEET_HEADING = re.compile(r"^##\s+(.+)$")


def markdown_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """Tables of a parsed CSV/XLSX document ("## sheet" headings, then | a | b | rows)."""
    tables: list[tuple[str, list[list[str]]]] = []
    title, rows = "data", []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", stripped[1:-1])]
            if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):  # the separator row
                rows.append(cells)
            continue
        if rows:
            tables.append((title, rows))
            rows = []
        if heading := _SHEET_HEADING.match(stripped):
            title = heading.group(1)
    return tables


def xlsx_tables(path: Path) -> list[tuple[str, list[list[str]]]]:
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True, data_only=True)
    try:
        tables = []
        for sheet in book.worksheets:
            rows = [["" if v is None else str(v) for v in row] for row in sheet.iter_rows(values_only=True)]
            rows = [r for r in rows if any(c.strip() for c in r)]
            if rows:
                tables.append((sheet.title, rows))
        return tables
    finally:
        book.close()


def _cell(value: Any) -> str:
    """One Markdown table cell: pipes escaped, line breaks flattened."""
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


class TableWorkspace:
    """A temp DuckDB file holding one document's tables; `with TableWorkspace() as ws`."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ragline-analysis-"))
        self.path = self._dir / "tables.duckdb"
        self.tables: list[str] = []

    def __enter__(self) -> TableWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def load(self, file_type: str, source: Path | None, source_text: str | None) -> None:
        """The document's tables: from its file when it exists, else from the catalog's text."""
        taken: set[str] = set()
        with duckdb.connect(str(self.path)) as db:
            if file_type == "csv" and source is not None and source.is_file():
                name = table_name("data", taken)
                db.execute(f'CREATE TABLE "{name}" AS SELECT * FROM read_csv(?, auto_detect = true, sample_size = -1)', [str(source)])
                self.tables.append(name)
                return
            if file_type == "xlsx" and source is not None and source.is_file():
                tables = xlsx_tables(source)
            else:
                tables = markdown_tables(source_text or "")
            for raw_name, rows in tables:
                name = table_name(raw_name if file_type == "xlsx" else "data", taken)
                self._load_rows(db, name, rows)
                self.tables.append(name)
        if not self.tables:
            raise TabularError("the file holds no table")

    def _load_rows(self, db: duckdb.DuckDBPyConnection, name: str, rows: list[list[str]]) -> None:
        """Rows through a CSV file, so DuckDB infers column types as it does for real CSV files."""
        width = max(len(r) for r in rows)
        csv_path = self._dir / f"{name}.csv"
        with csv_path.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(r + [""] * (width - len(r)) for r in rows)
        db.execute(f'CREATE TABLE "{name}" AS SELECT * FROM read_csv(?, auto_detect = true, header = true, sample_size = -1)',
                   [str(csv_path)])

    def schemas(self) -> list[TableSchema]:
        with self._read_only() as db:
            out = []
            for name in self.tables:
                columns = tuple(Column(row[0], row[1]) for row in db.execute(f'DESCRIBE "{name}"').fetchall())
                count = (db.execute(f'SELECT count(*) FROM "{name}"').fetchone() or (0,))[0]
                sample = tuple(tuple(r) for r in db.execute(f'SELECT * FROM "{name}" LIMIT {defaults.DATA_ANALYSIS_SAMPLE_ROWS}').fetchall())
                out.append(TableSchema(name, columns, int(count), sample))
            return out

    def _read_only(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.path), read_only=True, config={
            "enable_external_access": False, "lock_configuration": True, "threads": 1, "memory_limit": defaults.DATA_ANALYSIS_MEMORY_LIMIT,
        })

    def query(self, sql: str, timeout_s: float = defaults.DATA_ANALYSIS_QUERY_TIMEOUT_S,
              max_rows: int = defaults.DATA_ANALYSIS_MAX_ROWS) -> QueryResult:
        """Run one SELECT read-only; raises TabularError with DuckDB's message otherwise."""
        with self._read_only() as db:
            try:
                statements = db.extract_statements(sql)
            except duckdb.Error as exc:
                raise TabularError(f"the SQL does not parse: {exc}") from exc
            if len(statements) != 1:
                raise TabularError(f"expected one SQL statement, got {len(statements)}")
            if statements[0].type != duckdb.StatementType.SELECT:
                raise TabularError(f"only SELECT queries are run, not {statements[0].type.name}")
            timer = threading.Timer(timeout_s, db.interrupt)  # a runaway query is interrupted, not waited for
            timer.start()
            try:
                cursor = db.execute(sql)
                rows = cursor.fetchmany(max_rows + 1)
                columns = tuple(d[0] for d in cursor.description or ())
            except duckdb.InterruptException as exc:
                raise TabularError(f"the query ran longer than {timeout_s:g} s and was stopped") from exc
            except duckdb.Error as exc:
                raise TabularError(f"the query failed: {exc}") from exc
            finally:
                timer.cancel()
        return QueryResult(columns, tuple(tuple(r) for r in rows[:max_rows]), len(rows) > max_rows)
