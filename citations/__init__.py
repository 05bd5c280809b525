"""Citations and model context: per-answer aliases, the citation protocol and ref expansion.

Ragline's version of the seed's internal/modelcontext package. Generation nodes create one
`Registry` per answer; see `ragline.citations.registry` for the lifecycle.
"""

from ragline.citations.protocol import protocol_prompt
from ragline.citations.references import Reference, build_references, references_payload
from ragline.citations.registry import SOURCE_ARGUMENT_KEYS, Registry
from ragline.citations.sources import ChunkRef, SourceChunk, WebRef
from ragline.citations.stream_decoder import StreamDecoder

__all__ = [
    "SOURCE_ARGUMENT_KEYS",
    "ChunkRef",
    "Reference",
    "Registry",
    "SourceChunk",
    "StreamDecoder",
    "WebRef",
    "build_references",
    "protocol_prompt",
    "references_payload",
]
