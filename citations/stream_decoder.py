"""Decoding model output: ref tags expanded, res:// aliases restored, everything else untouched.

Replaces the seed's `StreamDecoder` (internal/modelcontext/stream.go with citations.go's
`citationStreamExpander` and the resource stream decoder of resources.go) and its one-shot twin
`ExpandText` / `DecodeOutputText`.

Both run the same scanner, so a streamed answer decodes exactly as the whole text would. The
scanner reads the output as literal text and tokens (case-insensitive):

* a tag whose name is `ref`, `kb` or `web` (or its closing tag): `<ref` + whitespace, `/` or `>`,
  then attribute text up to the first `>`. A ref tag is handed to the expander; model-written
  kb/web tags and closing tags are removed (public tags are output-only).
* a tag that never closes: `<ref ...` running into another `<` or past `MAX_TAG_BODY`
  characters loses its opener only; at the very end of the output (a truncated answer) the
  whole fragment goes.
* a resource alias `res://` + digits: restored when issued, removed otherwise.
* the "dangle" in front of a token: a run of `<` / `</` plus up to three letters glued to it
  (`<k<kb x>`). It disappears with a removed token, so removing a tag can never splice the text
  around it into a new tag (`<k` + removed + `b chunk_id=...>`); it stays when the token
  expands to something.

Unknown aliases fail closed: they expand to nothing. Nothing else is dropped: text that is not a
token is emitted as written, and `flush()` emits what was held back when the stream ends or is
cancelled.

Known limit: the dangle guards tags only. `re<kb>s://0001` decodes to the literal text
`res://0001` (the scanner reads each character once). That string is only an alias, never an
internal id, and the front end does not act on it, so it is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_TAG_BODY = 1024  # a ref tag is ~16 chars and a model-written web tag a URL; more is prose

_DANGLE = r"(?P<dangle>(?:</?[a-z]{0,3})*)"
_TAG = (
    r"(?P<tag><(?P<close>/)?(?P<name>ref|kb|web)(?=[\s/>]|\Z)"
    rf"(?:(?P<body>[^<>]{{0,{MAX_TAG_BODY}}})(?P<end>>|\Z))?)"
)
_RESOURCE = r"(?P<res>res://\d+)"
TOKEN = re.compile(rf"{_DANGLE}(?:{_TAG}|{_RESOURCE})", re.IGNORECASE)

# Everything that can still grow into a token once more text arrives and that TOKEN cannot yet
# match at all: a dangle run (which covers `<`, `</re`, `<we`) and an unfinished `res://`.
_VIABLE_PREFIX = re.compile(r"(?:</?[a-z]{0,3})*(?:r(?:e(?:s(?::(?:/(?:/)?)?)?)?)?)?", re.IGNORECASE)
_PREFIX_STARTS = frozenset("<rR")

Expander = Callable[[re.Match[str]], str]
"""Turns one TOKEN match (without its dangle) into output text; "" removes it."""


def _is_open(match: re.Match[str], buffer_end: int) -> bool:
    """Whether more text could still change what this match decodes to."""
    if match.group("res") is not None:
        return match.end() == buffer_end  # more digits may follow
    return match.group("end") == ""  # the tag ran into the end of the buffer, not into `>`


def _hold_from(text: str, start: int) -> int:
    """The earliest position at or after `start` whose suffix could still become a token."""
    for position in range(start, len(text)):
        if text[position] in _PREFIX_STARTS and _VIABLE_PREFIX.fullmatch(text, position):
            return position
    return len(text)


def decode(text: str, expand: Expander, *, final: bool) -> tuple[str, int]:
    """Decode `text`; return the output and how many characters of `text` it accounts for.

    With `final` the text is complete and everything is decoded. Without it, the decoding stops
    at the first place where a later chunk could still change the result, and the caller keeps
    `text[consumed:]` for the next call.
    """
    out: list[str] = []
    position = 0
    for match in TOKEN.finditer(text):
        if not final and _is_open(match, len(text)):
            out.append(text[position : match.start()])
            return "".join(out), match.start()
        out.append(text[position : match.start()])
        replacement = expand(match)
        if replacement:
            out.append(match.group("dangle") + replacement)
        position = match.end()
    end = len(text) if final else _hold_from(text, position)
    out.append(text[position:end])
    return "".join(out), end


class StreamDecoder:
    """Decodes one streamed text channel; use one per channel (answer, thinking).

    `feed` returns what can be shown now and holds back only a tail that could still become a
    tag or an alias; `flush` decodes that tail as the end of the text. Call `flush` when the
    stream ends *and* when it is cancelled, or a split alias would be lost.
    """

    def __init__(self, expand: Expander) -> None:
        self._expand = expand
        self._pending = ""

    @property
    def pending(self) -> str:
        """The held-back tail, for logging; it is never part of what `feed` returned."""
        return self._pending

    def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        buffer = self._pending + chunk
        out, consumed = decode(buffer, self._expand, final=False)
        self._pending = buffer[consumed:]
        return out

    def flush(self) -> str:
        buffer, self._pending = self._pending, ""
        if not buffer:
            return ""
        return decode(buffer, self._expand, final=True)[0]
