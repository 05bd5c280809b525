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

from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.state import PipelineState
from ragline.services import services_of
from ragline.tabular.analysis import first_table_document


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
    services = services_of(runtime)
    catalog = services.retrieval.catalog
    found = first_table_document(results, catalog)
    if found is None:
        return {}
    _, document = found
    question = state.get("rewrite_query") or request.query
    extra = await services.tabular.analyse(question, document, catalog, services.chat(request.chat_model))
    return {"merge_results": [*results, extra]} if extra is not None else {}
