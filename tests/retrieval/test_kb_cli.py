"""`ragline kb update`, `ragline doc list|delete`: the real argument parser and handlers on a tmp stack."""

import argparse
import asyncio

import pytest

from ragline.commands import kb as kb_cli
from ragline.contracts.access import Principal
from ragline.ingestion.service import TextDocument
from ragline.retrieval.types import SearchParams


@pytest.fixture
def run(stack, monkeypatch, capsys):
    monkeypatch.setattr(kb_cli.Services, "from_settings", classmethod(lambda cls, settings=None: cls(retrieval_factory=lambda: stack)))

    def invoke(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="ragline")
        kb_cli.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(argv)
        code = args.func(args)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def manuals(stack, ingestion):
    kb = stack.knowledge_bases.create("manuals", tags=["old"])
    docs = [TextDocument("The outdoor sensor battery lasts eighteen months.", "battery", "/docs/battery.md", "md"),
            TextDocument("Pairing takes three minutes after holding the button.", "pairing", "/docs/pairing.md", "md"),
            TextDocument("Pairing again resets the sensor.", "pairing", "/docs/pairing-again.md", "md")]
    asyncio.run(ingestion.ingest_documents(kb.id, docs))
    return kb


def test_kb_update_renames_and_replaces_description_tags_and_sharing(run, stack, manuals):
    code, out, _ = run("kb", "update", "manuals", "--rename", "handbooks", "--description", "device manuals",
                       "--tags", "devices, sensors", "--shared")
    assert code == 0 and "handbooks" in out
    kb = stack.knowledge_bases.get(manuals.id, Principal.operator_of("default"))
    assert (kb.name, kb.description, kb.tags, kb.shared) == ("handbooks", "device manuals", ["devices", "sensors"], True)
    assert run("kb", "update", "handbooks", "--tags", "", "--private")[0] == 0
    assert stack.knowledge_bases.get(manuals.id, Principal.operator_of("default")).tags == [] and not stack.knowledge_bases.get(manuals.id, Principal.operator_of("default")).shared


def test_kb_update_without_changes_or_onto_a_taken_name_is_a_one_line_error(run, stack, manuals):
    stack.knowledge_bases.create("taken")
    code, _, err = run("kb", "update", "manuals")
    assert code == 1 and err.startswith("ragline: error: nothing to update")
    code, _, err = run("kb", "update", "manuals", "--rename", "taken")
    assert code == 1 and "already exists" in err and err.count("\n") == 1


def test_doc_list_shows_every_document_with_its_chunks(run, manuals, stack):
    code, out, _ = run("doc", "list", "--kb", "manuals")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 4 and lines[0].split()[:2] == ["id", "title"]
    assert all(d.id in out and d.source in out for d in stack.catalog.list_knowledge(manuals.id))


def test_doc_delete_by_source_removes_it_from_search(run, manuals, stack):
    code, out, _ = run("doc", "delete", "/docs/battery.md", "--kb", "manuals")
    assert code == 0 and "deleted battery" in out
    assert [d.title for d in stack.catalog.list_knowledge(manuals.id)] == ["pairing", "pairing"]
    results = asyncio.run(stack.searcher.search(SearchParams(query="battery eighteen months", knowledge_base_ids=[manuals.id],
                                                             disable_recall_thresholds=True)))
    assert all(r.knowledge_title != "battery" for r in results)


def test_doc_delete_refuses_an_ambiguous_title_and_deletes_nothing(run, manuals, stack):
    code, _, err = run("doc", "delete", "/docs/battery.md", "pairing", "--kb", "manuals")
    assert code == 1 and "2 documents are titled 'pairing'" in err
    assert len(stack.catalog.list_knowledge(manuals.id)) == 3  # nothing deleted: every name is resolved first
    doc = next(d for d in stack.catalog.list_knowledge(manuals.id) if d.source == "/docs/pairing.md")
    assert run("doc", "delete", doc.id, "--kb", "manuals")[0] == 0
    assert run("doc", "delete", "nothing-like-this", "--kb", "manuals")[0] == 1


def test_the_retrieval_metric_table_explains_each_metric_in_one_line():
    from ragline.retrieval.metrics import METRICS

    table = kb_cli.metric_table({"hybrid": dict.fromkeys(METRICS, 0.5)}).splitlines()
    explained = {line.split()[0] for line in table[3:] if line.strip()}
    assert table[1].startswith("hybrid") and explained == set(METRICS)
