"""The conversation a rewrite call reads, cut to a token budget (seed: query_understand.go's {conversation}).

Every token of the rewrite prompt is prefilled before the search can start, and the rewrite needs
only what the latest question refers to: almost always the previous round, and of an answer its
first sentences (where the subject is named). So the rounds go in newest first while they fit
REWRITE_HISTORY_TOKENS, each answer cut to REWRITE_ANSWER_TOKENS; the latest round always goes
in, cut to the budget if it alone is larger. The history setting (max_history_rounds) still
decides which rounds are loaded; the budget decides how much of them the rewrite reads.
"""

from __future__ import annotations

import re

from ragline import defaults
from ragline.contracts.state import HistoryTurn
from ragline.generation.budget import TokenCounter

NO_CONVERSATION = "(none)"
_CJK_OR_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[^\W\u3400-\u4dbf\u4e00-\u9fff]+")


async def estimated_tokens(texts: list[str]) -> list[int]:
    """A tokenizer-free count for remote models (counting theirs would import litellm, seconds):
    one per CJK character, 1.3 per word, rounded up (BPE vocabularies split long words)."""
    counts = []
    for text in texts:
        pieces = _CJK_OR_WORD.findall(text)
        cjk = sum(1 for piece in pieces if len(piece) == 1 and "\u3400" <= piece <= "\u9fff")
        counts.append(cjk + -(-(len(pieces) - cjk) * 13 // 10))
    return counts


def cut_to_tokens(text: str, tokens: int, limit: int) -> str:
    """The text shortened in proportion to its token count, marked with an ellipsis when cut."""
    if tokens <= limit:
        return text
    keep = max(1, len(text) * limit // max(tokens, 1))
    return text[:keep].rstrip() + "…"


def _round(question: str, answer: str) -> str:
    return f"User: {question}\nAssistant: {answer}"


async def conversation_within_budget(history: list[HistoryTurn], count: TokenCounter,
                                     budget: int = defaults.REWRITE_HISTORY_TOKENS,
                                     answer_tokens: int = defaults.REWRITE_ANSWER_TOKENS) -> str:
    """The latest rounds, oldest first, whose lines fit `budget` tokens (the newest always, cut if need be)."""
    if not history:
        return NO_CONVERSATION
    newest_first = list(reversed(history))
    sizes = await count([text for turn in newest_first for text in (turn.query, turn.answer)])
    kept: list[str] = []
    used = 0
    for index, turn in enumerate(newest_first):
        question_size, answer_size = sizes[2 * index], sizes[2 * index + 1]
        answer = cut_to_tokens(turn.answer, answer_size, answer_tokens)
        size = question_size + min(answer_size, answer_tokens)
        if kept and used + size > budget:
            break
        if not kept and size > budget:  # the latest round alone is larger: its answer gives way first
            room = max(budget - question_size, 1)
            question = cut_to_tokens(turn.query, question_size, budget // 2) if question_size > budget // 2 else turn.query
            answer = cut_to_tokens(turn.answer, answer_size, room if question == turn.query else budget // 2)
            kept.append(_round(question, answer))
            break
        kept.append(_round(turn.query, answer))
        used += size
    return "\n".join(reversed(kept))
