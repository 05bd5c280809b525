"""FAQ hit strategy: negative-question filtering and the iterative-deepening schedule.

Replaces knowledgebase_search_faq.go. An FAQ entry is one chunk whose metadata carries the
standard question, similar questions, negative questions and answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ragline import defaults

_SPACE = re.compile(r"\s+")


def normalize_question(text: str) -> str:
    """Lower case without any whitespace: how the seed compares a query to negative questions."""
    return _SPACE.sub("", text).lower()


def is_negative_for(query: str, metadata: dict[str, Any]) -> bool:
    """True when the query is exactly one of the entry's negative questions ("don't answer this")."""
    wanted = normalize_question(query)
    return any(normalize_question(q) == wanted for q in metadata.get("negative_questions", []) if q.strip())


def deepening_depths(first_depth: int, cap: int = defaults.MAX_RETRIEVAL_POOL_SIZE,
                     rounds: int = defaults.FAQ_MAX_DEEPENING_ROUNDS) -> Iterator[int]:
    """Top-k of each extra round: double the first round's depth, at most `rounds` times, capped.

    When the first round already searched at the cap there is nothing deeper to ask for.
    """
    depth = first_depth
    for _ in range(rounds):
        if depth >= cap:
            return
        depth = min(depth * 2, cap)
        yield depth
