"""data_analysis: SQL over the first CSV/Excel file among the results (seed: data_analysis.go, PluginDataAnalysis).

Off by default (request.data_analysis_enabled). Table-summary chunks are skipped, then the first
result whose document is a CSV or XLSX file is loaded into DuckDB; the model sees the question
and the tables' schema, decides whether a query would help and writes it (structured output,
the seed's DataAnalysisInput). The query runs read-only with a time limit, and its result joins
the merge results as a synthetic search result with score 1.0 (match type data analysis). Bad
SQL, a failing or slow query, or a file that cannot be loaded leaves a clear note in the context
instead; a failing model adds nothing. Nothing here stops the answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime
from ragline.graph.context import RunContext
from ragline.graph.state import PipelineState
from ragline.models.chat import ChatClient, ChatModelError, ChatOptions
from ragline.nodes._tabular import (
    TABLE_FILE_TYPES,
    TableSchema,
    TableWorkspace,
    TabularError,
)
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.types import Knowledge, SearchResult

from ragline import defaults
from ragline.services import services_of

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


async def decide(question: str, schemas: list[TableSchema], model: str | None) -> Decision:
    """The model's DataAnalysisInput (raises ChatModelError)."""
    schema_text = "\n".join(s.describe() for s in schemas)
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Tables:\n{schema_text}\n\nQuestion: {question}"}]
    options = ChatOptions(temperature=0.0, max_tokens=defaults.DATA_ANALYSIS_MAX_TOKENS, response_format=DECISION_FORMAT)
    return parse_decision((await ChatClient.for_model(model).chat(messages, options)).content)


def synthetic_result(document: Knowledge, content: str, **metadata: Any) -> SearchResult:
    digest = hashlib.sha1(content.encode("utf-8")).hexdigest()[:12]
    return SearchResult(
        id=f"{DATA_ANALYSIS_SOURCE}:{document.id}:{digest}", content=content, score=1.0, knowledge_id=document.id,
        knowledge_base_id=document.knowledge_base_id, knowledge_title=document.title,
        metadata={"source": DATA_ANALYSIS_SOURCE, "match_type": DATA_ANALYSIS_SOURCE, **metadata},
    )


async def analyse(question: str, document: Knowledge, catalog: Catalog, model: str | None) -> SearchResult | None:
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
            decision = await decide(question, schemas, model)
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


async def data_analysis(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Answer from table data with one read-only DuckDB query, added to merge_results.

    Reads request (data_analysis_enabled, chat_model), rewrite_query and merge_results; writes
    merge_results with one synthetic result appended (a result table or an error note), or
    nothing when analysis is off, no table file is among the results, or the model sees no use.
    """
    request = state["request"]
    results = list(state.get("merge_results") or [])
    if not request.data_analysis_enabled or not results:
        return {}
    catalog = services_of(runtime).retrieval.catalog
    found = first_table_document(results, catalog)
    if found is None:
        return {}
    _, document = found
    extra = await analyse(state.get("rewrite_query") or request.query, document, catalog, request.chat_model)
    return {"merge_results": [*results, extra]} if extra is not None else {}
