"""data_analysis: one read-only DuckDB query, written by the model, over a CSV or Excel document, as a tool.

The seed's agent tool of the same name (tools.NewDataAnalysisTool, data_analysis.go), on the
workspace the pipeline's data_analysis stage uses (tabular/workspace.py): the document's tables in
a throw-away DuckDB file, the query run read-only, without external access, with a time limit.
Called without `sql`, it returns the tables' schema so the model writes its query next round.
Only the tenant's CSV/XLSX documents in the turn's knowledge bases (as read_chunks); the result
table becomes one passage of the document in the answer's citation registry (cited as cN).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb

from ragline import defaults
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passages_outcome, turn_document
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.types import Knowledge
from ragline.tabular.analysis import synthetic_result
from ragline.tabular.workspace import TABLE_FILE_TYPES, TableSchema, TableWorkspace, TabularError


def _bounded(text: str) -> str:
    limit = defaults.AGENT_DATA_RESULT_CHARS
    return text if len(text) <= limit else text[:limit] + f"\n(cut at {limit} characters)"


def _table_document(context: ToolContext, document_id: str) -> Knowledge:
    document = turn_document(context, document_id)
    file_type = document.file_type.lower().lstrip(".")
    if file_type not in TABLE_FILE_TYPES:
        raise ValueError(f'"{document.title}" is a {file_type or "text"} document, not a table: data_analysis reads CSV and XLSX files only')
    return document


def _load(workspace: TableWorkspace, document: Knowledge, catalog: Catalog) -> list[TableSchema]:
    """The document's tables in the workspace, from its file or the catalog's text (blocking)."""
    try:
        workspace.load(document.file_type.lower().lstrip("."), Path(document.source), catalog.source_text(document.id))
        return workspace.schemas()
    except (TabularError, OSError, ValueError, duckdb.Error) as exc:
        raise ValueError(f'the table "{document.title}" could not be loaded: {exc}') from exc


async def data_analysis(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    document_id, sql = arguments.get("document_id"), arguments.get("sql") or ""
    if not isinstance(document_id, str) or not document_id.strip():
        raise ValueError("data_analysis needs a document_id (the dN handle of a CSV or XLSX document)")
    if not isinstance(sql, str):
        raise ValueError("sql must be one DuckDB SELECT statement, as a string")
    sql = sql.strip().rstrip(";").strip()
    if len(sql) > defaults.AGENT_SQL_CHARS:
        raise ValueError(f"the sql is {len(sql)} characters long; at most {defaults.AGENT_SQL_CHARS} are run")
    document = await asyncio.to_thread(_table_document, context, document_id.strip())
    with TableWorkspace() as workspace:
        schemas = await asyncio.to_thread(_load, workspace, document, context.services.retrieval.catalog)
        described = "\n".join(s.describe() for s in schemas)
        if not sql:
            content = f'The tables of "{document.title}" (query them with one DuckDB SELECT in sql, same document_id):\n{described}'
            return ToolOutcome(_bounded(content), f"schema of {len(schemas)} table{'s' if len(schemas) != 1 else ''}")
        try:
            result = await asyncio.to_thread(workspace.query, sql)
        except TabularError as exc:
            raise ValueError(_bounded(f"{exc}\nThe tables:\n{described}")) from exc
    content = _bounded(f'Data analysis of "{document.title}" (DuckDB SQL over the file):\n{sql}\n\nResult:\n{result.markdown()}')
    return passages_outcome(context, [synthetic_result(document, content, sql=sql, row_count=len(result.rows), truncated=result.truncated)])


DATA_ANALYSIS = AgentTool(
    name="data_analysis",
    description="Compute over a CSV or Excel document with one read-only DuckDB SELECT. Call it with the document's handle (dN) "
                "and no sql to see its tables and columns, then again with sql. Returns the result table as a passage (cN) to cite.",
    parameters={"type": "object", "properties": {
        "document_id": {"type": "string", "description": "The table document's dN handle."},
        "sql": {"type": "string", "maxLength": defaults.AGENT_SQL_CHARS,
                "description": 'One DuckDB SELECT over the listed tables; quote column names with double quotes. Leave out to get the schema.'},
    }, "required": ["document_id"]},
    run=data_analysis,
)
