"""citations/plain.py: answer text without tags, the citations as data."""

from hypothesis import given
from hypothesis import strategies as st

from ragline.citations.plain import PlainText, plain_text
from ragline.citations.sources import ChunkRef, WebRef
from ragline.citations.tags import UNSUPPORTED_MARK, kb_tag, web_tag

PAIRING = ChunkRef(chunk_id="c-pair", knowledge_id="doc-1", knowledge_base_id="kb-1", title="Pairing")
BATTERY = ChunkRef(chunk_id="c-batt", knowledge_id="doc-2", knowledge_base_id="kb-1", title="Battery")


def test_tags_leave_the_text_and_become_citations_where_they_stood():
    text, citations = plain_text(f"Pairing takes three minutes {kb_tag(PAIRING)}. Batteries last 18 months{kb_tag(BATTERY, attributed=True)}.")
    assert text == "Pairing takes three minutes. Batteries last 18 months."
    assert [(c.chunk_id, c.knowledge_base_id, c.title, c.attributed) for c in citations] == [
        ("c-pair", "kb-1", "Pairing", False), ("c-batt", "kb-1", "Battery", True)]
    assert text[: citations[0].offset] == "Pairing takes three minutes"
    assert text[: citations[1].offset].endswith("18 months")


def test_footnotes_number_each_source_once_in_order_of_first_use():
    web = WebRef(url="https://example.org/a", title="A")
    text, citations = plain_text(f"One{kb_tag(PAIRING)} two{web_tag(web)} three{kb_tag(PAIRING, attributed=True)}.", footnotes=True)
    assert text == "One[1] two[2] three[1~]."
    assert [c.number for c in citations] == [1, 2, 1]
    assert citations[1].kind == "web" and citations[1].url == "https://example.org/a"


def test_the_unsupported_mark_is_no_source_and_prints_as_a_question_mark_footnote():
    answer = f"Pairing takes three minutes{kb_tag(PAIRING)}. It costs 99 euros{UNSUPPORTED_MARK}."
    text, citations = plain_text(answer)
    assert text == "Pairing takes three minutes. It costs 99 euros."
    assert [c.chunk_id for c in citations] == ["c-pair"]
    plain = PlainText(footnotes=True)
    plain.feed(answer)
    assert plain.text == "Pairing takes three minutes[1]. It costs 99 euros[?]."
    assert plain.unsupported == [len("Pairing takes three minutes[1]. It costs 99 euros")]


def test_sources_list_each_source_at_its_first_citation():
    plain = PlainText()
    plain.feed(f"a{kb_tag(PAIRING)} b{kb_tag(BATTERY)} c{kb_tag(PAIRING)}")
    assert [c.chunk_id for c in plain.sources()] == ["c-pair", "c-batt"]


words = st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=30)
pieces = st.lists(st.one_of(words, st.sampled_from([kb_tag(PAIRING), kb_tag(BATTERY, attributed=True), UNSUPPORTED_MARK])), max_size=12)


@given(pieces, st.booleans())
def test_feeding_whole_pieces_equals_feeding_the_whole_text(parts, footnotes):
    whole_text, whole_citations = plain_text("".join(parts), footnotes=footnotes)
    fed = PlainText(footnotes=footnotes)
    streamed = "".join(fed.feed(part)[0] for part in parts)
    assert "<kb" not in whole_text
    assert [c.chunk_id for c in fed.citations] == [c.chunk_id for c in whole_citations]
    assert all(0 <= c.offset <= len(fed.text) for c in fed.citations)
    # a tag's leading whitespace goes with it only within one delta, so the texts agree up to it
    assert "".join(streamed.split()) == "".join(whole_text.split())
