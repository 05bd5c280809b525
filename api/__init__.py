"""The HTTP service: Starlette routes, SSE framing, auth (HTTP only; runs live in ragline.checkpoints).

app.py (the route list), sessions.py / chat.py / messages.py / knowledge.py / health.py (endpoints),
sse.py (frames, resume, heartbeats), auth.py (API keys -> tenants), inputs.py + schemas.py (validated
bodies), errors.py (the one error handler), openapi.py (the document), host.py (what they share: the HTTP host on the root).
"""
