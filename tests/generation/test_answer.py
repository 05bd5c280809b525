"""Truncation detection of a finished answer (seed: chat_completion_stream.go)."""

from hypothesis import given
from hypothesis import strategies as st

from ragline.generation.answer import is_truncation

TRUNCATION_REASONS = ["length", "max_tokens", "max_output_tokens"]


def test_truncation_reasons_count_whatever_their_case():
    assert is_truncation("LENGTH")
    assert is_truncation("Max_Tokens")
    assert is_truncation("max_output_tokens")


def test_a_normal_stop_or_no_reason_is_not_truncation():
    assert not is_truncation("stop")
    assert not is_truncation("STOP")
    assert not is_truncation(None)
    assert not is_truncation("")


@given(st.sampled_from(TRUNCATION_REASONS), st.data())
def test_any_casing_of_a_truncation_reason_is_truncation(reason, data):
    upper = data.draw(st.lists(st.booleans(), min_size=len(reason), max_size=len(reason)))
    assert is_truncation("".join(c.upper() if u else c for c, u in zip(reason, upper)))


@given(st.text(max_size=20))
def test_any_other_reason_is_not_truncation(reason):
    assert is_truncation(reason) == (reason.lower() in TRUNCATION_REASONS)
