"""Durable state of runs: checkpointers and event streams.

savers.py (memory / SQLite / Redis checkpointers with our msgpack allow-list) and streams.py (the
StreamManager: in process, or Redis Streams for several replicas). The run and session services
built on them live in `ragline.service`.
"""
