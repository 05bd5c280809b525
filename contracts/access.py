"""Who is asking, and who may read what: the one place an access decision is made.

A principal is a tenant, a user within it and the user's groups (from the API key, a trusted front
end's assertion, the MCP OAuth identity or the CLI's `--user`). Within its tenant, a knowledge base
is readable by everyone unless its rule names users or groups; a document may narrow its base's
rule, never widen it. A reader passes a rule by being one of its users or in one of its groups.

Every store filters with `readable` before ranking, so a passage of a document the reader may not
read is never scored, counted or shown; a reader without a user (`""`) passes no restricted rule.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

audit_log = logging.getLogger("ragline.audit")
ACCESS = "access"  # a passage's metadata key: the rule that let its reader see it ("tenant-wide", "document: group hr")
_NAME_CHARS = 200
_NAMES = 200


@dataclass(frozen=True)
class Principal:
    """Who a request acts for. `knowledge_bases` (a scoped key) limits what it may name at all;
    `read_only` refuses every knowledge write."""

    tenant_id: str
    user_id: str
    groups: frozenset[str] = frozenset()
    knowledge_bases: frozenset[str] | None = None
    read_only: bool = False
    key_name: str = field(default="", compare=False)
    operator: bool = False  # the service's own work for a tenant (an ingestion job, the CLI's catalog commands): every rule lets it in

    @classmethod
    def operator_of(cls, tenant_id: str) -> Principal:
        """The tenant's own service work, after a door has authorized the request that caused it
        (no door makes one from a request)."""
        return cls(tenant_id, "", operator=True)

    def may_name(self, kb_id: str) -> bool:
        """Whether a scoped key reaches this knowledge base (any name, for an unscoped one)."""
        return self.knowledge_bases is None or kb_id in self.knowledge_bases


class AccessRule(BaseModel):
    """Who may read: no users and no groups means everyone the level above lets in."""

    model_config = ConfigDict(extra="forbid")

    users: list[str] = Field(default_factory=list, max_length=_NAMES, description="Users who may read.")
    groups: list[str] = Field(default_factory=list, max_length=_NAMES, description="Groups whose members may read.")

    @field_validator("users", "groups")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        cleaned = sorted({name.strip() for name in names})
        if any(not name or len(name) > _NAME_CHARS for name in cleaned):
            raise ValueError(f"a user or group name is 1 to {_NAME_CHARS} characters")
        return cleaned

    @property
    def restricted(self) -> bool:
        return bool(self.users or self.groups)

    def lets_in(self, who: Principal) -> str | None:
        """Why `who` passes this rule ("open", "user alice", "group hr"), or None when it does not."""
        if not self.restricted:
            return "open"
        if who.operator:
            return "the service's own work"
        if who.user_id and who.user_id in self.users:
            return f"user {who.user_id}"
        shared = sorted(who.groups & set(self.groups))
        return f"group {shared[0]}" if shared else None


@dataclass(frozen=True)
class AccessDecision:
    """Whether a reader may read a document, and the rule that decided it (shown on a reference,
    and by `ragline access explain`)."""

    allowed: bool
    reason: str


def decide(kb_rule: AccessRule, document_rule: AccessRule | None, who: Principal) -> AccessDecision:
    """The reader must pass the knowledge base's rule and then the document's (a document narrows)."""
    kb_pass = kb_rule.lets_in(who)
    if kb_pass is None:
        return AccessDecision(False, f"the knowledge base is restricted to {_listed(kb_rule)}")
    document_pass = document_rule.lets_in(who) if document_rule is not None else "open"
    if document_pass is None:
        return AccessDecision(False, f"the document is restricted to {_listed(document_rule or AccessRule())}")
    if document_pass != "open":
        return AccessDecision(True, f"document: {document_pass}")
    return AccessDecision(True, "tenant-wide" if kb_pass == "open" else f"knowledge base: {kb_pass}")


def derived_rule(rules: Iterable[AccessRule], asker: str) -> AccessRule | None:
    """The rule of something made from documents under `rules` (an answer indexed as a past
    conversation): open when every rule is, the rule itself when they share one, else only the
    asker, who passed them all. None when that would name nobody: keep nothing derived then."""
    restricting = {rule.model_dump_json(): rule for rule in rules if rule.restricted}
    if not restricting:
        return AccessRule()
    if len(restricting) == 1:
        return next(iter(restricting.values()))
    return AccessRule(users=[asker]) if asker.strip() else None


def audit(who: Principal, door: str | None, action: str, **fields: Any) -> None:
    """One line of the audit log: who (key name, tenant, user), which door, what, when; never a key.
    A door writes one per request; a search (door None: whichever door asked) one more, with the
    knowledge bases it read."""
    record = {"key": who.key_name, "tenant": who.tenant_id, "user": who.user_id, **({"door": door} if door else {}),
              "action": action, "at": datetime.now(UTC).isoformat(), **fields}
    audit_log.info("key used", extra={"audit": record})


def _listed(rule: AccessRule) -> str:
    parts = [*(f"user {u}" for u in rule.users), *(f"group {g}" for g in rule.groups)]
    return ", ".join(parts[:10]) + (f" and {len(parts) - 10} more" if len(parts) > 10 else "")
