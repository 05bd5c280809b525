"""Markdown-aware chunking with separators, size and overlap, and optional parent/child chunks.

Replaces the Go system's document splitter (docparser chunking, defaults 512 characters with 80
overlap). Code blocks, tables, images and LaTeX are never cut in the middle (a table longer than a
chunk is cut between rows, each part repeating the header); heading breadcrumbs travel with every
chunk; text splits on "\\n\\n", "\\n", "。" and sentence ends before it ever splits inside a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragline import defaults
from ragline.retrieval.types import ChunkingConfig

SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", ""]
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# Inline atoms that must survive whole: images and inline LaTeX.
_INLINE_ATOM = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|\$[^$\n]+\$")
_ATOM_MARK = "\ue000"  # private-use character: never a separator, never in real text


# Bumped when the same text and settings would chunk differently: part of each document's content
# hash, so a document is re-chunked when it is ingested or reparsed again, never behind a user's back.
# 2: a table is a chunk of its own (the prose after it was glued to it, and embedded as the table).
# 3: no chunk is longer than CHUNK_ATOM_MAX_FACTOR x the chunk size, whatever the input's shape.
# 4: a chunk's vector is made with its document's title in front (embedding_text).
# 5: each chunk records its location (offsets in the document's text, a PDF's pages): references open the passage.
# 6: an atom past all reason is cut into parts packed up to the chunk size, not one part per separator.
CHUNKER_VERSION = 6


@dataclass
class Piece:
    text: str
    atomic: bool = False
    sticky: bool = False  # a lone heading: travels with whatever follows it
    table: bool = False  # a table (or one part of a long one): a chunk of its own


@dataclass
class Section:
    headings: list[tuple[int, str]]
    pieces: list[Piece] = field(default_factory=list)


@dataclass
class ChunkDraft:
    content: str
    headings: list[str]
    parent_index: int | None = None  # children point at their parent in ChunkPlan.parents


@dataclass
class ChunkPlan:
    chunks: list[ChunkDraft]  # what gets indexed
    parents: list[ChunkDraft] = field(default_factory=list)  # context holders (parent/child mode)


def split_recursive(text: str, size: int, separators: list[str] = SEPARATORS) -> list[str]:
    """Pieces no longer than `size`, cut at the first separator the text contains; separators stay."""
    if len(text) <= size:
        return [text] if text else []
    for i, sep in enumerate(separators):
        if sep == "":
            return [text[j : j + size] for j in range(0, len(text), size)]
        if sep in text:
            parts = [p + sep for p in text.split(sep)]
            parts[-1] = parts[-1][: -len(sep)]
            out: list[str] = []
            for part in parts:
                out.extend([part] if len(part) <= size else split_recursive(part, size, separators[i + 1 :]))
            return [p for p in out if p]
    return [text]


def _protect_inline(text: str) -> tuple[str, list[str]]:
    atoms: list[str] = []

    def mark(m: re.Match[str]) -> str:
        atoms.append(m.group(0))
        return f"{_ATOM_MARK}{len(atoms) - 1}{_ATOM_MARK}"

    return _INLINE_ATOM.sub(mark, text), atoms


def _restore_inline(text: str, atoms: list[str]) -> str:
    return re.sub(rf"{_ATOM_MARK}(\d+){_ATOM_MARK}", lambda m: atoms[int(m.group(1))], text)


def _table_pieces(lines: list[str], size: int) -> list[Piece]:
    """A table fits whole, or is cut between rows with the header repeated on every part."""
    text = "\n".join(lines) + "\n\n"
    if len(text) <= size:
        return [Piece(text, atomic=True, table=True)]
    has_rule = len(lines) > 1 and set(lines[1].replace("|", "").strip()) <= set("-: ")
    header = lines[:2] if has_rule else lines[:1]
    rows = lines[len(header):]
    pieces: list[Piece] = []
    current: list[str] = []
    for row in rows:
        candidate = "\n".join(header + current + [row]) + "\n\n"
        if current and len(candidate) > size:
            pieces.append(Piece("\n".join(header + current) + "\n\n", atomic=True, table=True))
            current = []
        current.append(row)
    if current or not pieces:
        pieces.append(Piece("\n".join(header + current) + "\n\n", atomic=True, table=True))
    return pieces


def _flush_text(lines: list[str], section: Section, size: int) -> None:
    text = "\n".join(lines).strip("\n")
    lines.clear()
    if not text.strip():
        return
    if all(_HEADING.match(line) or not line.strip() for line in text.split("\n")):
        section.pieces.append(Piece(text + "\n\n", sticky=True))
        return
    protected, atoms = _protect_inline(text)
    pieces = [Piece(_restore_inline(p, atoms)) for p in split_recursive(protected, size)]
    pieces[-1].text += "\n\n"  # block separator; stripped from chunk ends, so it never costs size
    section.pieces.extend(pieces)


def parse_sections(text: str, size: int, base: list[tuple[int, str]] | None = None) -> list[Section]:
    """Walk the lines once: headings open sections; fences, $$ blocks and tables become atoms."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    stack = list(base or [])
    sections = [Section(list(stack))]
    buffer: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        heading = _HEADING.match(line)
        if heading:
            _flush_text(buffer, sections[-1], size)
            level = len(heading.group(1))
            stack = [h for h in stack if h[0] < level] + [(level, heading.group(2))]
            sections.append(Section(list(stack)))
            buffer.append(line)
            i += 1
            continue
        end = _atom_end(lines, i)
        if end is not None:
            _flush_text(buffer, sections[-1], size)
            block = lines[i:end]
            if stripped.startswith("|"):
                sections[-1].pieces.extend(_table_pieces(block, size))
            else:
                sections[-1].pieces.append(Piece("\n".join(block) + "\n\n", atomic=True))
            i = end
            continue
        buffer.append(line)
        i += 1
    _flush_text(buffer, sections[-1], size)
    return [s for s in sections if s.pieces]


def _atom_end(lines: list[str], i: int) -> int | None:
    """Index after the code fence, $$ block or table starting at line i; None for ordinary text."""
    stripped = lines[i].strip()
    fence = _FENCE.match(lines[i])
    if fence:
        for j in range(i + 1, len(lines)):
            if lines[j].strip().startswith(fence.group(1)):
                return j + 1
        return len(lines)  # unterminated fence: the rest of the document is code
    if stripped.startswith("$$"):
        if len(stripped) > 2 and stripped.endswith("$$") and len(stripped) >= 4:
            return i + 1
        for j in range(i + 1, len(lines)):
            if lines[j].strip().endswith("$$"):
                return j + 1
        return len(lines)
    if stripped.startswith("|"):
        j = i
        while j < len(lines) and lines[j].strip().startswith("|"):
            j += 1
        return j
    return None


def merge_pieces(pieces: list[Piece], size: int, overlap: int) -> list[str]:
    """Pack pieces into chunks of at most `size`; the next chunk repeats up to `overlap` characters
    of whole text pieces (atoms are never repeated: a table twice would only add noise). A table
    is a chunk of its own (with a heading right above it), so the prose around it is embedded as
    prose, not as part of the table."""
    chunks: list[str] = []
    current: list[Piece] = []
    length = 0
    for piece in pieces:
        at_table = piece.table or bool(current and current[-1].table)
        full = length + len(piece.text.rstrip("\n")) > size
        if current and (full or at_table) and not all(p.sticky for p in current):
            chunks.append("".join(p.text for p in current))
            if at_table:
                current, length = [], 0
            while current and (length > overlap or length + len(piece.text) > size
                               or any(p.atomic or p.sticky for p in current)):
                length -= len(current.pop(0).text)
        current.append(piece)
        length += len(piece.text)
    if current:
        chunks.append("".join(p.text for p in current))
    return [c.strip() for c in chunks if c.strip()]


def chunk_text(text: str, size: int, overlap: int, base: list[tuple[int, str]] | None = None) -> list[ChunkDraft]:
    if size < 1:
        raise ValueError("chunk size must be positive")
    overlap = max(0, min(overlap, size // 2))  # an overlap near the size would loop on the same text
    limit = size * defaults.CHUNK_ATOM_MAX_FACTOR
    drafts: list[ChunkDraft] = []
    for section in parse_sections(text, size, base):
        headings = [title for _, title in section.headings]
        for content in merge_pieces(section.pieces, size, overlap):
            if len(content) <= limit:
                drafts.append(ChunkDraft(content, headings))
            else:  # an atom past all reason (one giant table row, a line without spaces): cut like text
                drafts.extend(ChunkDraft(part.strip(), headings) for part in _packed(split_recursive(content, size), size) if part.strip())
    return drafts


def _packed(parts: list[str], size: int) -> list[str]:
    """Neighbouring parts joined while they fit `size`: a giant row's cells make chunks of many
    cells, not one chunk per cell (a 200,000-column row made 400,000 chunks of one cell each)."""
    packed: list[str] = []
    for part in parts:
        if packed and len(packed[-1]) + len(part) <= size:
            packed[-1] += part
        else:
            packed.append(part)
    return packed


def chunk_document(text: str, config: ChunkingConfig) -> ChunkPlan:
    """Plain mode: chunks of chunk_size. Parent/child: parents of parent_chunk_size, each cut into
    children of child_chunk_size that are indexed and point back at their parent."""
    if not config.parent_child:
        return ChunkPlan(chunk_text(text, config.chunk_size, config.chunk_overlap))
    parents = chunk_text(text, config.parent_chunk_size, 0)
    children: list[ChunkDraft] = []
    child_overlap = min(config.chunk_overlap, config.child_chunk_size // 4)
    for index, parent in enumerate(parents):
        base = list(enumerate(parent.headings, start=1))
        for child in chunk_text(parent.content, config.child_chunk_size, child_overlap, base):
            child.parent_index = index
            children.append(child)
    return ChunkPlan(children, parents)


def chunking_signature(config: ChunkingConfig) -> str:
    """What a document's chunks depend on besides its text: the settings and the chunker's version."""
    return f"{config.model_dump_json()}\nchunker {CHUNKER_VERSION}"


def embedding_text(draft_content: str, headings: list[str], title: str = "") -> str:
    """What is embedded: the document's title and the heading breadcrumb on one line, then the chunk.

    The title goes first unless the chunk already starts with it: a chunk of a man page or a
    manual rarely names what it is about ("The default is to retry 20 times" never says wget),
    and without it every chunk of a long document is about as similar to a question as any other
    (benchmarks/real_documents.py: the answering passage's vector rank, wget 50+ -> in the top 3)."""
    trail = [part for part in ([title] if title and not draft_content.lstrip().lower().startswith(title.lower()) else []) + headings if part]
    if not trail:
        return draft_content
    return " > ".join(trail) + "\n\n" + draft_content
