"""The analysis the data_analysis stage runs: find the table document, let the model decide on one
SQL query, run it, and turn the outcome into a search result (seed: data_analysis.go).

Bad SQL, a failing or slow query, or a file that cannot be loaded becomes a clear note for the
model instead of figures; a failing model adds nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.models.chat import ChatClient, ChatModelError, ChatOptions
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.types import Knowledge
from ragline.tabular.workspace import (
    TABLE_FILE_TYPES,
    TableSchema,
    TableWorkspace,
    TabularError,
)

log = logging.getLogger(__name__)

DATA_ANALYSIS_SOURCE = "data_analysis"
_SUMMARY_CHUNK_TYPES = frozenset({"table_column", "table_summary"})  # descriptions of a table, not its data

DECISION_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "data_analysis_input",
        "schema": {
            "type": "object",
            "properties": {
                "needs_analysis": {"type": "boolean"},
                "sql": {"type": "string"},
                "reason": {"type": "string"},
            },
            "required": ["needs_analysis", "sql"],
        },
    },
}

SYSTEM_PROMPT = (
    "You decide whether a SQL query over the user's table data helps answer the question, and if so write it. "
    "Use DuckDB SQL, one SELECT statement, only the tables and columns listed; quote column names with double quotes. "
    'Reply with JSON only: {"needs_analysis": true, "sql": "SELECT ...", "reason": "..."}, '
    'or {"needs_analysis": false, "sql": "", "reason": "..."} when the question needs no computation over the data.'
)


@dataclass(frozen=True)
class Decision:
    needs_analysis: bool
    sql: str
    reason: str = ""


def parse_decision(text: str) -> Decision:
    start, end = text.find("{"), text.rfind("}")
    try:
        value = json.loads(text[start : end + 1]) if start >= 0 else {}
    except json.JSONDecodeError:
        value = {}
    if not isinstance(value, dict):
        value = {}
    sql = str(value.get("sql") or "").strip().rstrip(";").strip()
    needs = value.get("needs_analysis")
    needs = bool(sql) if needs is None else needs in (True, "true", "yes")
    return Decision(bool(needs and sql), sql, str(value.get("reason") or ""))


def first_table_document(results: list[Any], catalog: Catalog) -> tuple[SearchResult, Knowledge] | None:
    """The first result (table-summary chunks skipped) whose document is a CSV or Excel file."""
    candidates = [r for r in results if isinstance(r, SearchResult) and str(r.metadata.get("chunk_type", r.chunk_type)) not in _SUMMARY_CHUNK_TYPES]
    documents = catalog.get_knowledge_many(r.knowledge_id for r in candidates)
    for result in candidates:
        document = documents.get(result.knowledge_id)
        if document is not None and document.file_type.lower().lstrip(".") in TABLE_FILE_TYPES:
            return result, document
    return None


async def decide(question: str, schemas: list[TableSchema], client: ChatClient) -> Decision:
    """The model's DataAnalysisInput (raises ChatModelError)."""
    schema_text = "\n".join(s.describe() for s in schemas)
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Tables:\n{schema_text}\n\nQuestion: {question}"}]
    options = ChatOptions(temperature=0.0, max_tokens=defaults.DATA_ANALYSIS_MAX_TOKENS, response_format=DECISION_FORMAT)
    return parse_decision((await client.chat(messages, options)).content)


def synthetic_result(document: Knowledge, content: str, **metadata: Any) -> SearchResult:
    digest = hashlib.sha1(content.encode("utf-8")).hexdigest()[:12]
    return SearchResult(
        id=f"{DATA_ANALYSIS_SOURCE}:{document.id}:{digest}", content=content, score=1.0, knowledge_id=document.id,
        knowledge_base_id=document.knowledge_base_id, knowledge_title=document.title,
        metadata={"source": DATA_ANALYSIS_SOURCE, "match_type": DATA_ANALYSIS_SOURCE, **metadata},
    )


class TabularAnalysis:
    """One question over one table document; DuckDB work runs in worker threads."""

    async def analyse(self, question: str, document: Knowledge, catalog: Catalog, client: ChatClient) -> SearchResult | None:
        title = document.title or document.source
        with TableWorkspace() as workspace:
            try:
                source_text = await asyncio.to_thread(catalog.source_text, document.id)
                await asyncio.to_thread(workspace.load, document.file_type.lower().lstrip("."), Path(document.source), source_text)
                schemas = await asyncio.to_thread(workspace.schemas)
            except (TabularError, OSError, ValueError) as exc:
                note = f'Data analysis of "{title}" was not possible: the table could not be loaded ({exc}).'
                return synthetic_result(document, note, error=str(exc))
            except Exception as exc:  # DuckDB's own errors (bad encodings, odd files) are a note, not a crash
                return synthetic_result(document, f'Data analysis of "{title}" was not possible: {exc}', error=str(exc))
            try:
                decision = await decide(question, schemas, client)
            except ChatModelError as exc:
                log.warning("data_analysis: the model failed: %s", exc)
                return None
            if not decision.needs_analysis:
                return None
            try:
                result = await asyncio.to_thread(workspace.query, decision.sql)
            except TabularError as exc:
                note = (f'Data analysis of "{title}" failed, so no computed figures are available. '
                        f"The SQL query\n{decision.sql}\ncould not run: {exc}")
                return synthetic_result(document, note, sql=decision.sql, error=str(exc))
        content = f'Data analysis of "{title}" (DuckDB SQL over the file):\n{decision.sql}\n\nResult:\n{result.markdown()}'
        return synthetic_result(document, content, sql=decision.sql, row_count=len(result.rows), truncated=result.truncated)
