"""The data_analysis tool: real CSV documents in a real catalog, real DuckDB, a real citation registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline import defaults
from ragline.citations import Registry
from ragline.contracts.passages import SearchResult
from ragline.generation.citing import source_chunks
from ragline.ingestion.parsers import parse_file
from ragline.nodes.tools.base import ToolContext
from ragline.nodes.tools.data_analysis import DATA_ANALYSIS
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.types import Knowledge
from ragline.services import Services
from ragline.settings import Settings

SALES = "region,product,amount\nNorth,Widget,120.5\nSouth,Widget,80\nNorth,Gadget,42\n"
TOTALS = 'SELECT region, sum(amount) AS total FROM data GROUP BY region ORDER BY region'


def add_document(stack, kb, path: Path, text: str) -> Knowledge:
    """A file ingested as a document (id kn-<stem>): its parsed text is what the catalog keeps (one chunk)."""
    path.write_text(text)
    parsed = parse_file(path)
    knowledge = Knowledge(id=f"kn-{path.stem}", knowledge_base_id=kb.id, tenant_id=kb.tenant_id, title=path.name, source=str(path),
                          file_type=parsed.file_type)
    stack.catalog.replace_documents(kb.id, [(knowledge, [ChunkRecord(f"{knowledge.id}-c0", kb.id, knowledge.id, 0, parsed.text)], parsed.text)])
    return knowledge


@pytest.fixture
def tables(stack, tmp_path):
    return stack.knowledge_bases.create("Tables")


@pytest.fixture
def context(stack, tables, tmp_path) -> ToolContext:
    services = Services(Settings(data_dir=tmp_path), retrieval_factory=lambda: stack)
    return ToolContext(services, "default", ("Tables",), Registry())


async def test_without_sql_the_tables_schema_is_returned_for_the_next_round(stack, tables, context, tmp_path):
    add_document(stack, tables, tmp_path / "sales.csv", SALES)
    outcome = await DATA_ANALYSIS.run({"document_id": "kn-sales"}, context)
    assert 'Table "data" (3 rows): "region" VARCHAR, "product" VARCHAR, "amount" DOUBLE' in outcome.content
    assert "example row: North, Widget, 120.5" in outcome.content
    assert (outcome.sources, outcome.summary) == ([], "schema of 1 table")


async def test_a_query_by_the_documents_handle_is_run_off_the_loop_and_its_result_cited(stack, tables, context, tmp_path, thread_hops):
    document = add_document(stack, tables, tmp_path / "sales.csv", SALES)
    hit = SearchResult(id="kn-sales-c0", content="a table", score=0.7, knowledge_id=document.id, knowledge_base_id=tables.id, knowledge_title="sales.csv")
    context.registry.render_context(source_chunks([hit]))  # an earlier round gave the model c1 in d1
    arguments = context.registry.decode_tool_arguments({"document_id": "d1", "sql": TOTALS + ";"})
    outcome = await DATA_ANALYSIS.run(arguments, context)
    [source] = outcome.sources
    assert "| North | 162.5 |" in source.content and "| South | 80.0 |" in source.content and TOTALS in source.content
    assert (source.knowledge_id, source.knowledge_base_id, source.title, source.metadata["sql"]) == (document.id, tables.id, "sales.csv", TOTALS)
    assert '<result id="c2" doc="d1" kb="b1" title="sales.csv">' in outcome.content and "| North | 162.5 |" in outcome.content
    assert context.registry.expand_text('<ref id="c2"/>').startswith(f'<kb chunk_id="{source.chunk_id}" knowledge_id="{document.id}"')
    assert {"_load", "query"} <= {getattr(f, "__name__", "") for f in thread_hops}  # DuckDB never runs on the event loop


async def test_the_catalogs_table_text_is_read_when_the_file_is_gone(stack, tables, context, tmp_path):
    add_document(stack, tables, tmp_path / "sales.csv", SALES)
    (tmp_path / "sales.csv").unlink()
    outcome = await DATA_ANALYSIS.run({"document_id": "kn-sales", "sql": TOTALS}, context)
    assert "| North | 162.5 |" in outcome.content


@pytest.mark.parametrize(("sql", "error"), [("DROP TABLE data", "only SELECT queries are run"),
                                            ("SELECT * FROM read_csv('/etc/passwd')", "the query failed"),
                                            ("SELECT nope FROM data", "the query failed")])
async def test_a_query_that_may_not_or_cannot_run_is_refused_with_the_tables_to_fix_it(stack, tables, context, tmp_path, sql, error):
    add_document(stack, tables, tmp_path / "sales.csv", SALES)
    with pytest.raises(ValueError, match=error) as refused:
        await DATA_ANALYSIS.run({"document_id": "kn-sales", "sql": sql}, context)
    assert 'The tables:\nTable "data" (3 rows)' in str(refused.value)


async def test_a_large_result_is_bounded_in_rows_and_characters(stack, tables, context, tmp_path):
    add_document(stack, tables, tmp_path / "sales.csv", SALES)
    outcome = await DATA_ANALYSIS.run({"document_id": "kn-sales", "sql": "SELECT repeat('x', 300) AS x FROM range(1000)"}, context)
    [source] = outcome.sources
    assert len(source.content) <= defaults.AGENT_DATA_RESULT_CHARS + 40 and source.content.endswith(f"(cut at {defaults.AGENT_DATA_RESULT_CHARS} characters)")
    assert source.metadata["truncated"] is True and source.metadata["row_count"] == defaults.DATA_ANALYSIS_MAX_ROWS


async def test_a_document_that_is_not_a_table_is_refused(stack, tables, context, tmp_path):
    add_document(stack, tables, tmp_path / "notes.txt", "Widgets sell best in the North.")
    with pytest.raises(ValueError, match='"notes.txt" is a txt document, not a table'):
        await DATA_ANALYSIS.run({"document_id": "kn-notes"}, context)


async def test_documents_of_another_tenant_or_outside_the_turns_bases_are_not_found(stack, tables, context, tmp_path):
    add_document(stack, stack.knowledge_bases.create("Other"), tmp_path / "elsewhere.csv", SALES)
    add_document(stack, stack.knowledge_bases.create("Tables", tenant_id="acme"), tmp_path / "theirs.csv", SALES)
    for document_id in ("kn-elsewhere", "kn-theirs", "kn-missing"):
        with pytest.raises(LookupError, match=f"no document '{document_id}' in this turn's knowledge bases"):
            await DATA_ANALYSIS.run({"document_id": document_id, "sql": TOTALS}, context)


@pytest.mark.parametrize(("arguments", "error"), [({}, "needs a document_id"), ({"document_id": "kn-sales", "sql": 5}, "sql must be"),
                                                  ({"document_id": "kn-sales", "sql": "SELECT 1 " * 1000}, "at most 4000")])
async def test_malformed_arguments_are_refused(context, arguments, error):
    with pytest.raises(ValueError, match=error):
        await DATA_ANALYSIS.run(arguments, context)
