"""Agent mode's nodes (graph/agent.py writes the loop out): begin, model, approval, authorize,
tool_calls, compact, answer; `loop` holds what they share, prompts/agent.yaml their texts."""
