"""Long-term memory per caller on a LangGraph store: add, list, search; recalled by memory_recall."""
