"""`ragline ingest`, run as a user runs it (a subprocess, the real local embedder): a folder's
files one at a time with a summary, a bad file that stops nothing, Ctrl-C that keeps nothing half."""

import dataclasses
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragline.contracts.access import Principal
from tests.vector_rows import vector_row_count

WORDS = ("sensor", "battery", "kettle", "station", "pairing", "warranty", "humidity", "wind", "display", "firmware", "reset", "signal")


def ragline(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragline", *args], capture_output=True, text=True, timeout=300, env=os.environ)


@pytest.fixture
def manuals(fresh_data_dir):
    assert ragline("kb", "create", "manuals").returncode == 0
    return "manuals"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "kettle.md").write_text("# Kettle\n\nThe kettle boils a litre in three minutes.\n")
    (root / "sub" / "descaling.txt").write_text("Descale the kettle every month with citric acid.\n")
    (root / "empty.txt").write_text("")
    (root / "notes.xyz").write_text("not a type Ragline reads")
    (root / ".git" / "config").write_text("[core]\n")
    return root


def stored(kb_name: str) -> dict[str, int]:
    """Documents of the base (source -> chunks), and a check that its vectors are exactly theirs."""
    from ragline.services import Services

    services = Services.from_settings()
    stack = services.retrieval
    kb = stack.knowledge_bases.resolve(kb_name, Principal.operator_of("default"))
    documents = {Path(d.source).name: d.chunk_count for d in stack.catalog.list_knowledge(kb.id)}
    assert vector_row_count(stack.stores["default"].vector, kb.id) == sum(documents.values())  # no orphaned rows
    return documents


def test_a_folder_is_ingested_file_by_file_and_a_bad_file_stops_nothing(manuals, folder):
    result = ragline("ingest", str(folder), "--kb", manuals)
    assert result.returncode == 1, result.stderr  # a file failed: scripts notice, the others are stored
    summary = result.stdout.splitlines()
    assert summary[0] == f"ingested 2 document(s), 2 chunk(s) into {manuals}; 2 skipped, 1 failed"
    assert f"  failed: {folder / 'empty.txt'}: empty.txt holds no text" in summary
    assert any(line.startswith(f"  skipped: {folder / 'notes.xyz'}: not a type Ragline reads") for line in summary)
    assert any(line.startswith(f"  skipped: {folder / '.git' / 'config'}: hidden") for line in summary)
    assert "[1/3] " in result.stderr and "[3/3] " in result.stderr  # per-file progress
    assert stored(manuals) == {"kettle.md": 1, "descaling.txt": 1}

    again = ragline("ingest", str(folder / "kettle.md"), str(folder / "sub"), "--kb", manuals)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f"ingested 0 document(s), 0 chunk(s) into {manuals}; 2 unchanged"


def _long_document(path: Path, paragraphs: int = 300) -> Path:
    rng = random.Random(7)
    path.write_text("\n\n".join(" ".join(rng.choice(WORDS) for _ in range(100)) + "." for _ in range(paragraphs)))
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery to a child is POSIX")
def test_ctrl_c_mid_document_keeps_the_stored_files_and_nothing_of_the_one_in_progress(manuals, folder, tmp_path):
    long = _long_document(tmp_path / "long.txt")  # hundreds of chunks: seconds of embedding
    child = subprocess.Popen([sys.executable, "-m", "ragline", "ingest", str(folder / "kettle.md"), str(long), "--kb", manuals],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    assert child.stderr is not None
    for line in child.stderr:  # without a terminal, each file's start is a line
        if line.startswith("[2/2]"):
            break
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert out.splitlines()[0] == f"ingested 1 document(s), 1 chunk(s) into {manuals}"
    assert f"interrupted: {long} was not stored" in out
    assert err.strip().endswith("ragline: interrupted")
    assert stored(manuals) == {"kettle.md": 1}


def test_kb_reindex_rechunks_stored_documents_only_when_asked(manuals, folder):
    """Chunks written before locations existed get them from `ragline kb reindex`, not by themselves."""
    from ragline.services import Services

    assert ragline("ingest", str(folder / "kettle.md"), "--kb", manuals).returncode == 0
    services = Services.from_settings()
    stack = services.retrieval
    kb = stack.knowledge_bases.resolve(manuals, Principal.operator_of("default"))
    [doc] = stack.catalog.list_knowledge(kb.id)
    [chunk] = stack.catalog.chunks_of(doc.id)
    old = {k: v for k, v in chunk.metadata.items() if k not in ("start", "end")}  # as an older chunker stored it
    stack.catalog.replace_documents(kb.id, [(doc, [dataclasses.replace(chunk, metadata=old)], stack.catalog.source_text(doc.id))])
    assert "start" not in stack.catalog.chunks_of(doc.id)[0].metadata  # nothing re-chunks it behind the user's back
    result = ragline("kb", "reindex", manuals)
    assert result.returncode == 0 and result.stdout.strip() == f"reindexed 1 document(s) of {manuals}", result.stderr
    [fresh] = Services.from_settings().retrieval.catalog.chunks_of(doc.id)
    assert (fresh.metadata["start"], fresh.metadata["headings"]) == (0, ["Kettle"])
