"""The service layer between HTTP and the graph (`api/` calls it; it never imports `api/`).

registry.py (running runs, leases, stop flags), runs.py (RunManager: background runs, stop,
takeover), resume.py + replay.py (what a client has seen), sessions.py (session records),
threads.py (a session's LangGraph thread: history, fork, rewind), conversations.py (session and
message service), titles.py, access.py (callers and refusals), backend.py (the stores chosen from
settings).
"""
