"""Answer generation shared by chat_completion, chat_completion_stream and fallback (seed: common.go).

- `messages`: the prompt (system prompt, earlier rounds, the user message);
- `citing`: the per-answer citation registry, the one place retrieved contexts are rendered;
- `answer`: one model call, streamed or not, with its single terminal event and truncation rules;
- `understanding`: the rewrite + intent call and its tolerant JSON parser;
- `message_stream`: an answer as LangGraph `messages` chunks (what a parent graph and Studio see);
- `input_check`: what begin_turn and the hosts refuse before a turn starts.
"""
