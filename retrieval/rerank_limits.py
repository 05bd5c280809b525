"""How long one rerank passage may be, from the rerank model's own input limit (seed: rerank.go
getEnrichedPassage: "if the model has a limit per passage or per request, a long passage is cut
from the end to the limit").

The limit is the model's max input tokens, from litellm's model table or, for models litellm does
not list, a small table of our own; the query's share is taken off, and tokens become characters
at a conservative rate. A model known nowhere keeps the old fixed limit.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from ragline import defaults

log = logging.getLogger(__name__)

# Rerank models litellm's table lacks (self-hosted through an OpenAI-compatible or Hugging Face
# route), by the name after the provider prefix: their model cards' max sequence lengths.
KNOWN_MAX_INPUT_TOKENS = {
    "bge-reranker-v2-m3": 8192,
    "bge-reranker-base": 512,
    "bge-reranker-large": 512,
    "mxbai-rerank-large-v1": 512,
    "ms-marco-minilm-l-6-v2": 512,
}


@lru_cache(maxsize=64)
def max_input_tokens(model: str) -> int | None:
    """The model's input window in tokens, or None when neither litellm nor our table knows it."""
    bare = model.rsplit("/", 1)[-1].lower()
    if bare in KNOWN_MAX_INPUT_TOKENS:
        return KNOWN_MAX_INPUT_TOKENS[bare]
    try:
        import litellm  # only a configured rerank model gets here: the import costs seconds

        info = litellm.get_model_info(model)
    except Exception as exc:  # litellm raises for models it does not list
        log.debug("no model info for rerank model %s: %s", model, exc)
        return None
    tokens = info.get("max_input_tokens") or info.get("max_tokens")
    return int(tokens) if tokens else None


def passage_max_chars(model: str | None, query: str) -> int:
    """Characters one passage may keep for `model` beside `query` (the fixed default when unknown)."""
    tokens = max_input_tokens(model) if model else None
    if tokens is None:
        return defaults.RERANK_PASSAGE_MAX_CHARS
    query_tokens = len(query) // defaults.RERANK_CHARS_PER_TOKEN + 1
    room = tokens - query_tokens - defaults.RERANK_TOKEN_MARGIN
    return max(defaults.RERANK_PASSAGE_MIN_CHARS, room * defaults.RERANK_CHARS_PER_TOKEN)
