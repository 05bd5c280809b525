"""Where the browser comes back from an MCP server's authorization (MCP OAuth): public, since the
browser carries no API key; the authorization's unguessable, single-use `state` is the proof.
The code becomes the user's tokens (mcp_client/oauth.py), and the turn that waits for them goes on."""

from __future__ import annotations

from html import escape

from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.mcp_client.oauth import OAuthCallbackError

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Ragline</title></head>
<body style="font-family: sans-serif; margin: 3em"><h1>{title}</h1><p>{text}</p></body></html>"""


class OAuthCallback(BaseModel):
    state: str = Field("", max_length=200, description="The state Ragline put in the authorization link.")
    code: str = Field("", max_length=4000, description="The authorization code.")
    error: str = Field("", max_length=200, description="Why the authorization server gave no code (e.g. access_denied).")


def _page(title: str, text: str, status: int) -> Response:
    return HTMLResponse(PAGE.format(title=escape(title), text=escape(text)), status_code=status)


@doc("The end of an MCP server's authorization: the browser's return with the code (public; the single-use state is the proof)",
     "assistants", query=OAuthCallback, public=True, errors=(400,))
async def callback(request: Request) -> Response:
    try:
        given = OAuthCallback.model_validate(dict(request.query_params))
    except ValidationError:
        return _page("Authorization failed", "The link's parameters are too long.", 400)
    flows = host_of(request).core.mcp.oauth
    if flows is None:
        return _page("Authorization failed", "No MCP server of this Ragline uses OAuth.", 400)
    try:
        server, _ = await flows.finish(given.state, given.code, error=given.error)
    except OAuthCallbackError as exc:
        return _page("Authorization failed", f"{exc}.", 400)
    return _page("Authorized", f"Ragline may now use {server} for you. You can close this tab; your answer goes on.", 200)
