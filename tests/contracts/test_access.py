"""The access decision (contracts/access.py) against a plain oracle: a reader passes the knowledge
base's rule, then the document's; an open rule lets everyone in; the service's own work passes all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ragline.contracts.access import AccessRule, Principal, decide, derived_rule

NAMES = st.sampled_from(["alice", "bob", "carol", ""])
GROUPS = st.frozensets(st.sampled_from(["hr", "eng", "ops"]), max_size=3)
RULES = st.builds(AccessRule, users=st.lists(st.sampled_from(["alice", "bob", "carol"]), max_size=3),
                  groups=st.lists(st.sampled_from(["hr", "eng", "ops"]), max_size=3))


def passes(rule: AccessRule, user: str, groups: frozenset[str]) -> bool:
    return (not rule.users and not rule.groups) or (bool(user) and user in rule.users) or bool(groups & set(rule.groups))


@given(RULES, st.none() | RULES, NAMES, GROUPS)
def test_a_reader_passes_the_bases_rule_and_then_the_documents(kb_rule, document_rule, user, groups):
    who = Principal("acme", user, groups)
    decision = decide(kb_rule, document_rule, who)
    expected = passes(kb_rule, user, groups) and (document_rule is None or passes(document_rule, user, groups))
    assert decision.allowed == expected
    assert decision.reason  # every decision says which rule made it


@given(RULES, st.none() | RULES)
def test_the_services_own_work_passes_every_rule(kb_rule, document_rule):
    assert decide(kb_rule, document_rule, Principal.operator_of("acme")).allowed


def test_the_reason_names_the_rule_that_decided():
    hr = AccessRule(groups=["hr"])
    assert decide(AccessRule(), hr, Principal("acme", "alice", frozenset({"hr"}))).reason == "document: group hr"
    assert decide(AccessRule(users=["alice"]), None, Principal("acme", "alice")).reason == "knowledge base: user alice"
    assert decide(AccessRule(), None, Principal("acme", "bob")).reason == "tenant-wide"
    refused = decide(AccessRule(), hr, Principal("acme", "bob", frozenset({"eng"})))
    assert not refused.allowed and refused.reason == "the document is restricted to group hr"


def test_a_reader_without_a_user_passes_no_users_rule():
    assert AccessRule(users=["alice"]).lets_in(Principal("acme", "")) is None


@pytest.mark.parametrize("names", [[""], ["  "], ["x" * 201]])
def test_a_rule_refuses_empty_or_long_names(names):
    with pytest.raises(ValidationError):
        AccessRule(users=names)


def test_a_scoped_key_reaches_only_its_bases():
    scoped = Principal("acme", "alice", knowledge_bases=frozenset({"kb1"}))
    assert scoped.may_name("kb1") and not scoped.may_name("kb2") and Principal("acme", "alice").may_name("kb2")


@given(st.lists(RULES, max_size=4), NAMES, GROUPS, NAMES)
def test_what_is_derived_from_documents_is_read_only_by_who_may_read_them_all(rules, user, groups, asker):
    """A derived rule lets in only readers who pass every rule of its documents, and the asker (whose
    own past answer it is); it lets the asker in; and it is open when every document is."""
    derived = derived_rule(rules, asker)
    if derived is None:  # several different restrictions and no asker to name
        assert not asker.strip() and len({r.model_dump_json() for r in rules if r.restricted}) > 1
        return
    reader = Principal("acme", user, groups)
    if derived.lets_in(reader) is not None and user != asker:
        assert all(passes(rule, user, groups) for rule in rules)
    if asker and all(passes(rule, asker, frozenset()) for rule in rules):
        assert derived.lets_in(Principal("acme", asker)) is not None
    assert derived.restricted == any(rule.restricted for rule in rules)
