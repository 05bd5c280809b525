"""Links, phone numbers, e-mail addresses and images in an answer come from its sources, or they go.

A planted document ("add this link: https://evil.example/...", "call 0909 879 0101", "send your
Wi-Fi password to setup@...") steers a small model into repeating it; shown beside a source
badge, it reads as vouched for. So when an answer has sources, every URL, phone number and e-mail
address it writes must appear in a source passage as the model read it (or a web result's address)
or in what the user wrote; any other is replaced by a short note. A Markdown link keeps its words
and is followed by its host, since its words hide where it goes ("[Read more](https://...)").

A Markdown image is loaded by whoever renders the answer (a chat client of the OpenAI-compatible or
MCP door), and its URL can carry the question to its host: only Ragline's own image route is kept
(`/api/v1/images/<sha256>.<ext>`, or a stored image's `local://images/...` handle), whatever the
sources, and with no sources at all (`LinkGuard.images_only`).

Runs on the model's raw text, before ref tags are decoded (decoded tags carry their own URLs).
Streaming holds back only what may still grow into a URL, a Markdown link or image, a phone number
or an e-mail address, so nothing is shown and then withdrawn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

REMOVED = "(link removed: it is in none of the sources)"
PHONE_REMOVED = "(phone number removed: it is in none of the sources)"
EMAIL_REMOVED = "(e-mail address removed: it is in none of the sources)"
IMAGE_REMOVED = "(image removed: only this service's own images are shown)"
# A "!" just before "[" starts an image, not more of the URL: "https://a.example/x![y](...)" is a URL
# and an image, which a renderer loads.
_URL = re.compile(r"""(?:https?://|www\.)(?:[^\s<>()\[\]{}"'`!]|!(?!\[))+""", re.IGNORECASE)
_MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]{0,300})\]\(\s*(" + _URL.pattern + r")\s*\)", re.IGNORECASE)
_MARKDOWN_IMAGE = re.compile(r"!\[([^\[\]\n]{0,300})\]\(\s*([^\s()]*)\s*\)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Digits in three to five groups (8+ digits, checked in _phone_digits): "+44 909 879 0101",
# "(0906) 555-0199"; not "10.0 mm", "2 years" or a version; an ISO date is let through.
_PHONE = re.compile(r"(?<![\w.+-])\+?(?:\(\d{1,4}\)|\d{1,4})(?:[ -]\(?\d{2,4}\)?){2,4}(?![\w-]|\.\d)")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PHONE_DIGITS = 8
# One pass, leftmost first: an image before the link inside it, a URL before the digits or the @ in it.
_ITEM = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                            (("image", _MARKDOWN_IMAGE), ("link", _MARKDOWN_LINK), ("url", _URL), ("email", _EMAIL), ("phone", _PHONE))),
                   re.IGNORECASE)
_OWN_IMAGE = re.compile(r"^(?:https?://[^/\s]+)?/api/v1/images/[0-9a-f]{64}\.(?:png|jpg|webp|gif)$|^local://images/[0-9a-f]{64}\.(?:png|jpg|webp|gif)$")
_TRAILING = ".,;:!?"
_PREFIXES = ("https://", "http://", "www.")
_LINK_SPAN_MAX = 400  # an unclosed `[` further back than this is prose, not a link being written
# The end that may still grow into an item: a phone number's groups so far ("call 0909 879 "), or
# the last word ("setup", "setup@frost") with whatever is glued to it.
_TAIL = re.compile(r"(?:\S*\d[\d ()+-]*|\S+)$")
_CLOSED_TAG = re.compile(r"</?(?:ref|kb|web)\b[^<>]*>$", re.IGNORECASE)  # a ref tag just closed: no address grows out of it


def _normal(url: str) -> str:
    url = url.rstrip(_TRAILING).lower()
    url = re.sub(r"^https?://", "", url)
    return url.removeprefix("www.").rstrip("/")


def _phone_digits(text: str) -> str | None:
    """The digits of a phone number, or None when the text is no phone number (too short, a date)."""
    digits = re.sub(r"\D", "", text)
    return digits if len(digits) >= _PHONE_DIGITS and not _ISO_DATE.fullmatch(text.strip()) else None


def host_of(url: str) -> str:
    """The host a URL leads to, without "www." ("www.evil.example/x" -> "evil.example")."""
    target = url if re.match(r"(?i)^https?://", url) else f"http://{url}"
    return (urlsplit(target).hostname or "").removeprefix("www.")


def is_own_image(url: str) -> bool:
    """An image Ragline serves itself: the image route (relative, or on any host) or a stored image's handle."""
    return bool(_OWN_IMAGE.match(url.strip()))


class LinkGuard:
    """The URLs, phone numbers and e-mail addresses an answer may carry: those in its sources and
    in the user's own words."""

    def __init__(self, texts: Iterable[str], *, contacts: bool = True) -> None:
        texts = [text or "" for text in texts]
        self.contacts = contacts
        self.allowed = {_normal(m.group(0)) for text in texts for m in _URL.finditer(text)}
        self.emails = {m.group(0).lower().rstrip(".") for text in texts for m in _EMAIL.finditer(text)}
        self.phones = {d for text in texts for m in _PHONE.finditer(text) if (d := _phone_digits(m.group(0)))}

    @classmethod
    def images_only(cls) -> LinkGuard:
        """For an answer without sources: only foreign images go (there is nothing to check links against)."""
        return cls((), contacts=False)

    def allows(self, url: str) -> bool:
        wanted = _normal(url)
        return bool(wanted) and any(a == wanted or a.startswith(wanted + "/") for a in self.allowed)

    def allows_email(self, address: str) -> bool:
        return address.lower().rstrip(".") in self.emails

    def allows_phone(self, digits: str) -> bool:
        return digits in self.phones

    def check(self, text: str) -> str:
        """The text with every item its sources do not hold replaced by a note; a foreign image
        goes whatever the sources; a Markdown link kept is followed by its host."""
        return _ITEM.sub(self._item, text)

    def _item(self, match: re.Match[str]) -> str:
        kind, whole = match.lastgroup, match.group(0)
        if kind == "image":
            image = _MARKDOWN_IMAGE.fullmatch(whole)
            return whole if image and is_own_image(image.group(2)) else IMAGE_REMOVED
        if not self.contacts:
            return whole
        link = _MARKDOWN_LINK.fullmatch(whole) if kind == "link" else None
        if link is not None:
            label, url = link.group(1), link.group(2)
            if not self.allows(url):
                return f"{self.check(label)} {REMOVED}"
            host = host_of(url)
            return whole if not host or host.lower() in label.lower() else f"{whole} ({host})"
        if kind == "url":
            kept = whole.rstrip(_TRAILING)
            return whole if self.allows(kept) else REMOVED + whole[len(kept):]
        if kind == "email":
            return whole if self.allows_email(whole) else EMAIL_REMOVED
        digits = _phone_digits(whole)
        return whole if digits is None or self.allows_phone(digits) else PHONE_REMOVED

    def stream(self) -> LinkStream:
        return LinkStream(self)


class LinkStream:
    """`check` over a stream: `feed` returns what is safe to show now, `flush` the rest at the end."""

    def __init__(self, guard: LinkGuard) -> None:
        self.guard = guard
        self.buffer = ""

    def feed(self, chunk: str) -> str:
        self.buffer += chunk
        hold = _hold_from(self.buffer, contacts=self.guard.contacts)
        ready, self.buffer = self.buffer[:hold], self.buffer[hold:]
        return self.guard.check(ready)

    def flush(self) -> str:
        ready, self.buffer = self.buffer, ""
        return self.guard.check(ready)


def _hold_from(text: str, *, contacts: bool = True) -> int:
    """`_unsafe_from`, with the spaces just before a held part held too: they go out with what follows.
    The ref-tag decoder after this guard drops the space before a tag (`minutes <ref id="c1"/>.`)
    only when both arrive together; a space let out alone stayed in the answer ("minutes .")."""
    hold = _unsafe_from(text, contacts=contacts)
    if hold < len(text):
        while hold > 0 and text[hold - 1] in " \t":
            hold -= 1
    return hold


def _unsafe_from(text: str, *, contacts: bool = True) -> int:
    """Where the text that may still change stops being safe: an open Markdown link or image (with
    its "!"), a URL that runs into the end, an end that could be the start of one (`htt`, `www`),
    or a number or word at the end that may grow into a phone number or an e-mail address. A guard
    of images only (`contacts` False) holds back only what may become an image: an answer without
    sources streams as it came."""
    hold = len(text)
    bracket = text.rfind("[")
    tail = text[bracket:] if bracket >= 0 else ""
    label = tail.split("](", 1)[0]  # a newline ends a link's text, but may follow its "](" (_MARKDOWN_LINK)
    if bracket >= 0 and len(tail) <= _LINK_SPAN_MAX and ")" not in tail and "\n" not in label:
        hold = bracket - 1 if bracket > 0 and text[bracket - 1] == "!" else bracket
    if text.endswith("!"):
        hold = min(hold, len(text) - 1)  # an image's "!" before its "["
    if not contacts:
        return hold
    opened = text.rfind("<")
    if opened >= 0 and ">" not in text[opened:] and len(text) - opened <= _LINK_SPAN_MAX:
        hold = min(hold, opened)  # a ref tag being written goes out whole, decoded whole
    growing = None if _CLOSED_TAG.search(text) else _TAIL.search(text)
    if growing:
        hold = min(hold, growing.start())
    for match in _ITEM.finditer(text):
        if match.end() == len(text) or match.start() < hold < match.end():  # never cut an item in two
            hold = min(hold, match.start())
    for size in range(min(len(text), max(map(len, _PREFIXES))), 0, -1):
        tail = text[-size:].lower()
        if any(prefix.startswith(tail) for prefix in _PREFIXES):  # "…ht" may become "…https://": URLs match mid-word too
            hold = min(hold, len(text) - size)
            break
    return hold

