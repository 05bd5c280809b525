"""The answer's system prompt: the seed's rule for Markdown images in the search context."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import PipelineState
from ragline.generation.messages import MARKDOWN_IMAGE, RETRIEVED_IMAGES_REQUIREMENT, system_prompt

REQUIREMENT = RETRIEVED_IMAGES_REQUIREMENT


def hit(content: str) -> SearchResult:
    return SearchResult(id="c1", content=content, score=0.9, knowledge_id="k1", knowledge_base_id="kb1")


def state_with(*contents: str) -> PipelineState:
    return {"request": PipelineRequest(query="What does the wiring look like?"), "merge_results": [hit(c) for c in contents]}


def test_a_context_with_a_markdown_image_asks_the_model_to_show_retrieved_images_only():
    prompt = system_prompt(state_with("Plain text.", "The wiring: ![wiring diagram](local://images/ab12.png) as shown."))
    assert prompt.endswith(REQUIREMENT)


def test_a_context_without_images_keeps_the_prompt_as_it_was():
    assert REQUIREMENT not in system_prompt(state_with("Plain text.", "A [link](https://example.com) is no image."))
    assert REQUIREMENT not in system_prompt({"request": PipelineRequest(query="hi")})


def test_results_restored_from_a_checkpoint_are_passages_again_and_count_too():
    """One passage type: what a checkpoint gives back is the passage it stored (both serializers), never a dict."""
    from ragline.checkpoints.savers import redis_serializer, serializer
    from ragline.contracts.passages import SearchResult

    passage = SearchResult(id="c1", content="![chart](local://images/x.png)", score=0.5, knowledge_id="d", knowledge_base_id="kb")
    for serde in (serializer(), redis_serializer()):
        restored = serde.loads_typed(serde.dumps_typed({"merge_results": [passage]}))["merge_results"]
        assert restored == [passage] and isinstance(restored[0], SearchResult)
        state: PipelineState = {"request": PipelineRequest(query="q"), "merge_results": restored}
        assert REQUIREMENT in system_prompt(state)


@given(st.text(alphabet=st.characters(blacklist_characters="]\n"), max_size=30),
       st.text(alphabet=st.characters(blacklist_characters=") \n\t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0"), min_size=1, max_size=40))
def test_any_markdown_image_is_recognised(alt: str, url: str):
    assert MARKDOWN_IMAGE.search(f"before ![{alt}]({url}) after")
