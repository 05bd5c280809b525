"""Durable runs: checkpointers, event streams, the run registry, sessions and the services over them.

savers.py (memory / SQLite / Redis checkpointers), streams.py (StreamManager: in process, Redis
Streams), registry.py (running runs, leases, stop flags), runs.py (RunManager: background runs,
stop, takeover), resume.py + replay.py (what a client has seen), sessions.py (session records),
threads.py (a session's LangGraph thread), conversations.py (session and message service),
titles.py, access.py (callers and refusals), backend.py (the stores chosen from settings).
"""
