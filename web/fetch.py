"""web_fetch.FetchURLContent: a page's main text, cut to 8000 bytes, behind the address guard.

Only HTML and plain text are read; the body is cut at a size limit before parsing so one huge
page cannot stall the answer. Every connection (redirects included) goes through the guard.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import httpx

from ragline import defaults
from ragline.web.extract import extract_main_text
from ragline.web.guard import (
    AddressPolicy,
    BlockedAddressError,
    WebFetchError,
    guarded_client,
)

_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-]+)""", re.IGNORECASE)


def cut_utf8(text: str, max_bytes: int = defaults.WEB_FETCH_MAX_CONTENT_BYTES) -> str:
    """At most max_bytes of UTF-8, never splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class FetchedPage:
    url: str  # the URL asked for
    final_url: str  # after redirects
    title: str
    text: str  # main text, at most WEB_FETCH_MAX_CONTENT_BYTES of UTF-8


def _decode(body: bytes, response: httpx.Response) -> str:
    charset = response.charset_encoding
    if not charset and (match := _META_CHARSET.search(body[:4096])):
        charset = match.group(1).decode("ascii")
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return body.decode("utf-8", errors="replace")


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


class WebFetcher:
    """Fetches pages for one run; use as `async with WebFetcher() as fetcher`."""

    def __init__(self, policy: AddressPolicy | None = None, timeout: float = defaults.WEB_FETCH_TIMEOUT_S,
                 max_bytes: int = defaults.WEB_FETCH_MAX_CONTENT_BYTES) -> None:
        self.policy = policy or AddressPolicy()  # the strict default: public addresses only
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._client = guarded_client(self.policy, timeout)

    async def __aenter__(self) -> WebFetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str) -> FetchedPage:
        """The page's main text; raises BlockedAddressError or WebFetchError."""
        self.policy.check_url(url)
        try:
            # httpx's timeout is per read; a server dripping bytes needs an overall limit too
            async with asyncio.timeout(self.timeout):
                return await self._fetch(url)
        except TimeoutError as exc:
            raise WebFetchError(f"fetching {url} took longer than {self.timeout:g} s") from exc

    async def _fetch(self, url: str) -> FetchedPage:
        try:
            async with self._client.stream("GET", url) as response:
                response.raise_for_status()
                content_type = response.headers.get("content-type", "text/html").split(";")[0].strip().lower()
                if content_type not in _TEXT_TYPES:
                    raise WebFetchError(f"{url} is {content_type}, not a web page")
                body = await _read_limited(response, defaults.WEB_FETCH_MAX_DOWNLOAD_BYTES)
                final_url = str(response.url)
        except BlockedAddressError:
            raise
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError, OverflowError) as exc:
            # a malformed redirect target or a socket error costs this page, never the caller
            raise WebFetchError(f"fetching {url} failed: {exc}") from exc
        text = _decode(body, response)
        if content_type == "text/plain":
            title, main = "", "\n".join(line.strip() for line in text.splitlines() if line.strip())
        else:
            page = extract_main_text(text)
            title, main = page.title, page.text
        if not main.strip():
            raise WebFetchError(f"{url} has no readable text")
        return FetchedPage(url=url, final_url=final_url, title=title, text=cut_utf8(main, self.max_bytes))


async def fetch_url_content(url: str, policy: AddressPolicy | None = None) -> FetchedPage:
    """One page, with a client of its own (for callers that fetch a single URL)."""
    async with WebFetcher(policy) as fetcher:
        return await fetcher.fetch(url)
