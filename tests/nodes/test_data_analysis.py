import json
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.ingestion.parsers import parse_file
from ragline.models.embeddings import Embedder
from ragline.nodes.data_analysis import data_analysis
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import Knowledge
from ragline.services import Services
from ragline.tabular.workspace import TableWorkspace, TabularError
from tests.scripted_model import Reply

SALES = "region,product,amount\nNorth,Widget,120.5\nSouth,Widget,80\nNorth,Gadget,42\n"


class Library:
    """A real catalog with table files ingested as documents (their parsed text is what the catalog keeps)."""

    def __init__(self, root: Path) -> None:
        settings = RetrievalConfig(redis_url=None, chroma_url=None)
        self.root = root
        self.stack = RetrievalStack.build(root / "retrieval", Embedder(model="ragline/multilingual-e5-small"), settings)
        self.kb = self.stack.knowledge_bases.create("Tables")

    def add(self, path: Path, chunk_type_note: str | None = None) -> SearchResult:
        parsed = parse_file(path)
        knowledge = Knowledge(id=path.stem, knowledge_base_id=self.kb.id, tenant_id="default", title=path.name,
                              source=str(path), file_type=parsed.file_type)
        chunk = ChunkRecord(f"{path.stem}-c0", self.kb.id, knowledge.id, 0, parsed.text)
        self.stack.catalog.replace_documents(self.kb.id, [(knowledge, [chunk], parsed.text)])
        metadata = {"chunk_type": chunk_type_note} if chunk_type_note else {}
        return SearchResult(id=chunk.id, content=parsed.text, score=0.7, knowledge_id=knowledge.id,
                            knowledge_base_id=self.kb.id, knowledge_title=path.name, metadata=metadata)

    def runtime(self) -> Runtime[RunContext]:
        return Runtime(context=RunContext(host=RunHost(services=Services(retrieval_factory=lambda: self.stack))))


@pytest.fixture
def library(tmp_path):
    return Library(tmp_path)


def _sql_reply(sql: str, needs: bool = True) -> Reply:
    return Reply.text(json.dumps({"needs_analysis": needs, "sql": sql, "reason": "sum by region"}))


def _state(results, query="What is the total amount per region?", enabled=True):
    return {"request": PipelineRequest(query=query, data_analysis_enabled=enabled), "merge_results": results}


def _write_csv(tmp_path: Path, name="sales.csv", text=SALES) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


async def test_data_analysis_appends_the_query_result_as_a_synthetic_result_with_score_one(library, tmp_path, scripted_model):
    hit = library.add(_write_csv(tmp_path))
    scripted_model.on(lambda b: True, _sql_reply('SELECT region, sum(amount) AS total FROM data GROUP BY region ORDER BY region'))
    update = await data_analysis(_state([hit]), library.runtime())
    original, extra = update["merge_results"]
    assert original == hit
    assert extra.score == 1.0 and extra.metadata["match_type"] == "data_analysis" and extra.knowledge_id == "sales"
    assert "| North | 162.5 |" in extra.content and "| South | 80.0 |" in extra.content
    body = scripted_model.requests[-1]
    assert body["response_format"]["json_schema"]["name"] == "data_analysis_input"
    prompt = body["messages"][-1]["content"]
    assert '"amount" DOUBLE' in prompt and "Question: What is the total amount per region?" in prompt


async def test_data_analysis_reads_the_catalogs_table_text_when_the_file_is_gone(library, tmp_path, scripted_model):
    path = _write_csv(tmp_path)
    hit = library.add(path)
    path.unlink()
    scripted_model.on(lambda b: True, _sql_reply("SELECT max(amount) AS top FROM data"))
    update = await data_analysis(_state([hit]), library.runtime())
    assert "| 120.5 |" in update["merge_results"][-1].content


async def test_data_analysis_loads_every_sheet_of_an_excel_file(library, tmp_path, scripted_model):
    from openpyxl import Workbook

    book = Workbook()
    book.active.title = "Q1 Sales"
    for row in [("region", "amount"), ("North", 10), ("South", 5)]:
        book.active.append(row)
    staff = book.create_sheet("Staff")
    for row in [("name", "region"), ("Ana", "North")]:
        staff.append(row)
    path = tmp_path / "report.xlsx"
    book.save(path)
    hit = library.add(path)
    scripted_model.on(lambda b: True, _sql_reply('SELECT s.name, q.amount FROM staff s JOIN q1_sales q USING (region)'))
    update = await data_analysis(_state([hit]), library.runtime())
    assert "| Ana | 10 |" in update["merge_results"][-1].content
    assert 'Table "q1_sales"' in scripted_model.requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT nope FROM data", "could not run"),
    ("DROP TABLE data", "only SELECT"),
    ("SELECT * FROM read_csv('/etc/passwd')", "could not run"),
])
async def test_bad_sql_leaves_a_clear_note_in_the_context_never_a_crash(library, tmp_path, scripted_model, sql, message):
    hit = library.add(_write_csv(tmp_path))
    scripted_model.on(lambda b: True, _sql_reply(sql))
    note = (await data_analysis(_state([hit]), library.runtime()))["merge_results"][-1]
    assert note.score == 1.0 and note.metadata["error"] and message in note.content
    assert "no computed figures are available" in note.content and sql in note.content


async def test_the_model_may_decide_that_no_analysis_is_needed(library, tmp_path, scripted_model):
    hit = library.add(_write_csv(tmp_path))
    scripted_model.on(lambda b: True, _sql_reply("", needs=False))
    assert await data_analysis(_state([hit], "Who wrote this file?"), library.runtime()) == {}


async def test_a_failing_model_adds_nothing(library, tmp_path, scripted_model):
    hit = library.add(_write_csv(tmp_path))
    scripted_model.on(lambda b: True, Reply(status=400, error="bad request"))
    assert await data_analysis(_state([hit]), library.runtime()) == {}


async def test_data_analysis_is_off_by_default_and_needs_a_table_file(library, tmp_path, scripted_model):
    hit = library.add(_write_csv(tmp_path))
    assert PipelineRequest(query="q").data_analysis_enabled is False
    assert await data_analysis(_state([hit], enabled=False), library.runtime()) == {}
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nNo tables here.")
    assert await data_analysis(_state([library.add(notes)]), library.runtime()) == {}
    assert scripted_model.requests == []


async def test_table_summary_chunks_are_skipped_when_choosing_the_file(library, tmp_path, scripted_model):
    summary = library.add(_write_csv(tmp_path, "summary.csv", "k,v\na,1\n"), chunk_type_note="table_summary")
    data = library.add(_write_csv(tmp_path))
    scripted_model.on(lambda b: True, _sql_reply("SELECT count(*) AS n FROM data"))
    extra = (await data_analysis(_state([summary, data]), library.runtime()))["merge_results"][-1]
    assert extra.knowledge_id == "sales" and "| 3 |" in extra.content


def test_a_slow_query_is_interrupted(tmp_path):
    with TableWorkspace() as workspace:
        workspace.load("csv", _write_csv(tmp_path), None)
        with pytest.raises(TabularError, match="longer than"):
            workspace.query("SELECT count(*) FROM range(100000000000) a", timeout_s=0.3)


def test_query_results_are_cut_to_the_row_limit(tmp_path):
    with TableWorkspace() as workspace:
        workspace.load("csv", _write_csv(tmp_path), None)
        result = workspace.query("SELECT * FROM data ORDER BY amount", max_rows=2)
    assert result.truncated and len(result.rows) == 2 and "first 2 rows" in result.markdown()
