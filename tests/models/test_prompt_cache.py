from hypothesis import given
from hypothesis import strategies as st

from ragline.models.prompt_cache import common_prefix

tokens = st.lists(st.integers(0, 5), max_size=20)


@given(tokens, tokens)
def test_the_common_prefix_is_the_longest_shared_start(first, second):
    prefix = common_prefix(first, second)
    assert first[: len(prefix)] == prefix == second[: len(prefix)]
    rest = len(prefix)
    assert rest == min(len(first), len(second)) or first[rest] != second[rest]
