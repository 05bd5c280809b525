"""The system-owned citation and handle protocol appended to the system prompt.

Replaces the seed's `ProtocolPrompt()` (internal/modelcontext/citations.go plus the resource
protocol of registry.go). It lives here, not in prompts/*.yaml, on purpose: the seed keeps the
citation syntax out of every user-editable template, so a custom prompt can neither break the
`<ref/>` contract nor re-enable citations the request turned off.
"""

from __future__ import annotations

SOURCE_HANDLES = """

## Source handling protocol (system-owned)
Retrieved content uses answer-local source handles: cN is a knowledge chunk, wN a web page, \
dN a document and bN a knowledge base.
- dN and bN are only for tool arguments that ask for a document or a knowledge base.
- Never write raw chunk, document or knowledge-base IDs in the answer."""

CITATIONS_ON = """
- Citations are ON for this answer. Cite a knowledge chunk with exactly <ref id="cN"/> and a \
web page with exactly <ref id="wN"/>, one tag per source. Example: "The sensor reports every \
16 seconds <ref id="c2"/>."
- Put each <ref/> inline, on the same line and right after the claim it supports; do not \
collect citations at the end.
- Cite only cN/wN handles given in the search results of this answer, and only when that \
source supports the claim. Never cite dN or bN, and never invent a handle.
- Never write <kb> or <web> tags yourself: the system turns valid <ref/> tags into links \
after generation.
- These rules override any earlier, saved or custom instruction about citation format."""

CITATIONS_OFF = """
- Citations are OFF for this answer. Do not output <ref>, <kb> or <web> tags, source handles, \
source URLs or any other citation marks.
- These rules override any earlier, saved or custom instruction that asks for citations."""

RESOURCE_HANDLES = """

## Resource handle protocol (system-owned)
Stored files, images and wiki pages appear as answer-local res://NNNN handles.
- Copy a res:// handle exactly when you link or embed that resource or pass it to a tool; \
never change its digits and never invent one."""


# For small local models, no citation rules at all: a 0.5B model never wrote a ref (0 in 200 XQuAD
# and CMRC answers), and the rules cost it answer quality: token F1 0.38 with the full rules
# above, 0.45 with a two-line version (60 questions), and 0.569 with the two lines against 0.602
# with none (94 questions, plain passages). Its citations are all attributed after generation.
COMPACT_ON = ""

COMPACT_OFF = """

Do not write citations, source handles or URLs."""


def protocol_prompt(citations_enabled: bool, *, compact: bool = False) -> str:
    """The whole protocol text; starts with a blank line so it can be appended as is."""
    if compact:
        return COMPACT_ON if citations_enabled else COMPACT_OFF
    citations = CITATIONS_ON if citations_enabled else CITATIONS_OFF
    return SOURCE_HANDLES + citations + RESOURCE_HANDLES


def append_protocol(system_prompt: str, citations_enabled: bool, *, compact: bool = False) -> str:
    """The system prompt with the protocol appended once, after any trailing whitespace."""
    protocol = protocol_prompt(citations_enabled, compact=compact)
    if system_prompt.endswith(protocol):
        return system_prompt
    return system_prompt.rstrip() + protocol
