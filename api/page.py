"""The web chat page: `/` serves index.html, `/static/<file>` its scripts and styles.

The page is plain HTML, CSS and JavaScript modules in `api/static/` (no build step). It talks
only to this service's /api/v1 routes with the user's API key, so it needs no key itself.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent / "static"

# The page runs only its own files and talks only to this service: markup slipped into a model
# answer or a document could neither run a script nor send anything to another host.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

# check_dir=False: a missing folder breaks the page, never the API's import.
_files = StaticFiles(directory=STATIC_DIR, check_dir=False)


async def index(request: Request) -> Response:
    """The chat page."""
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)


async def asset(request: Request) -> Response:
    """A file of api/static/ (path checks and ETags by Starlette's StaticFiles)."""
    response = await _files.get_response(request.path_params["path"], request.scope)
    # Revalidated on every load (a 304 when unchanged), so an upgrade never mixes old and new modules.
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
