"""`ragline kb ... --wiki` as a user runs it: the CLI waits for the pages the scripted model writes."""

from __future__ import annotations

import uuid

from tests.api.test_wiki_api import AURORA_PAGE, BATTERY, PAIRING, is_wiki_prompt, wiki_calls
from tests.scripted_model import Reply
from tests.test_cli import _ragline, _scripted_env


def test_a_wiki_kb_made_from_the_cli_gets_its_page_and_loses_it_when_the_wiki_is_turned_off(scripted_model, tmp_path):
    scripted_model.on(is_wiki_prompt, Reply.text(AURORA_PAGE))
    env = _scripted_env(scripted_model)
    name = f"wiki-cli-{uuid.uuid4().hex[:8]}"
    for title, text in (PAIRING, BATTERY):
        (tmp_path / f"{title}.txt").write_text(f"{title}\n\n{text}", encoding="utf-8")

    created = _ragline("kb", "create", name, "--wiki", env_extra=env)
    assert created.returncode == 0 and "wiki pages on" in created.stdout, created.stderr
    ingested = _ragline("ingest", str(tmp_path), "--kb", name, env_extra=env)
    assert ingested.returncode == 0, ingested.stderr
    assert "wiki: 1 page(s); written 1" in ingested.stdout and wiki_calls(scripted_model) == 1
    search = _ragline("search", "AA lithium batteries pairing two minutes", "--kb", name, env_extra=env)
    assert "Aurora outdoor sensor pairs" in search.stdout  # the page is searchable

    again = _ragline("kb", "wiki", name, env_extra=env)
    assert again.returncode == 0 and "written 0, unchanged 1" in again.stdout and wiki_calls(scripted_model) == 1

    off = _ragline("kb", "update", name, "--no-wiki", env_extra=env)
    assert off.returncode == 0 and "wiki: 0 page(s)" in off.stdout and "removed 1" in off.stdout, off.stdout + off.stderr
