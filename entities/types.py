"""The entity graph's data: nodes and relations per document namespace, and what the LLM returns.

A node is one entity as one document mentions it: the same name in two documents is two nodes
(the seed's NameSpace{KnowledgeBase, Knowledge}), so deleting or re-ingesting a document touches
only its own part of the graph. Nodes and relations remember the chunks they were read from;
entity search returns those chunks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, Field, field_validator


def normalize_name(name: str) -> str:
    """Case- and whitespace-insensitive key of an entity name ("Eiffel  tower" == "eiffel tower")."""
    return " ".join(name.casefold().split())


@dataclass(frozen=True)
class Namespace:
    """Where to search: a whole knowledge base, or one document of it."""

    knowledge_base_id: str
    knowledge_id: str | None = None


@dataclass
class GraphNode:
    name: str
    knowledge_base_id: str
    knowledge_id: str
    type: str = ""
    description: str = ""
    chunk_ids: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return normalize_name(self.name)


@dataclass
class GraphRelation:
    source: str  # entity names as extracted; matched to nodes by normalize_name
    target: str
    relation: str
    knowledge_base_id: str
    knowledge_id: str
    description: str = ""
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class GraphMatch:
    """What one entity search found: nodes (best match first) and the relations around them."""

    nodes: list[GraphNode] = field(default_factory=list)
    relations: list[GraphRelation] = field(default_factory=list)

    def extend(self, other: GraphMatch) -> None:
        self.nodes.extend(other.nodes)
        self.relations.extend(other.relations)

    def to_dict(self) -> dict[str, Any]:
        """The seed's GraphResult, as plain data for the state (checkpoints, Studio)."""
        return {"nodes": [asdict(n) for n in self.nodes], "relations": [asdict(r) for r in self.relations]}


# --- what the model returns (graph_extraction.yaml) ---

class ExtractedEntity(BaseModel):
    name: str = Field(min_length=1)
    type: str = ""
    description: str = ""

    @field_validator("name", "type", "description", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return " ".join(str(value or "").split())


class ExtractedRelationship(BaseModel):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    relation: str = ""
    description: str = ""

    @field_validator("source", "target", "relation", "description", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return " ".join(str(value or "").split())


class ExtractedGraph(BaseModel):
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relationships: list[ExtractedRelationship] = Field(default_factory=list)
