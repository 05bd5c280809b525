"""Ragline: a knowledge question-answering (RAG) service built as a LangGraph graph."""

import os

# litellm fetches its model cost map from the network at import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
