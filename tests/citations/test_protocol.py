"""The citation protocol: system-owned, on by default, forbidding citations when off."""

from __future__ import annotations

from pathlib import Path

from ragline.citations import Registry
from ragline.citations.protocol import append_protocol, protocol_prompt


def test_citations_on_require_inline_self_closing_ref_tags():
    text = protocol_prompt(citations_enabled=True)
    assert '<ref id="cN"/>' in text and '<ref id="wN"/>' in text
    assert "Never write <kb> or <web> tags yourself" in text


def test_citations_off_forbid_any_citation_output():
    text = protocol_prompt(citations_enabled=False)
    assert '<ref id="cN"/>' not in text
    assert "Do not output <ref>, <kb> or <web> tags" in text


def test_citations_are_on_by_default():
    assert Registry().protocol_prompt() == protocol_prompt(citations_enabled=True)


def test_protocol_also_explains_resource_handles():
    assert "res://NNNN" in protocol_prompt(citations_enabled=False)


def test_protocol_is_appended_once_after_the_system_prompt():
    once = append_protocol("You are helpful.\n\n", citations_enabled=True)
    assert once.startswith("You are helpful.\n\n## Source handling protocol")
    assert append_protocol(once, citations_enabled=True) == once


def test_protocol_is_not_part_of_any_editable_template():
    prompts = Path(__file__).resolve().parents[2] / "prompts"
    for template in prompts.glob("*.yaml"):
        assert "<ref id=" not in template.read_text(encoding="utf-8"), template
