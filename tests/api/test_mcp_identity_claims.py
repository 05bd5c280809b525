"""An introspection answer as a principal (api/mcp_identity.py): whatever the issuer answers, a
token is accepted only when active, for this resource, and naming a user; its groups are the
claim's names, bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.api.mcp_identity import OAuthIdentity, TokenRefused
from ragline.settings import Settings

RESOURCE = "https://ragline.example/mcp"
IDENTITY = OAuthIdentity(Settings(mcp_oauth_issuer="https://issuer.example", mcp_oauth_introspection_url="https://issuer.example/introspect",
                                  mcp_oauth_tenant="acme"))
JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20), lambda inner: st.lists(inner, max_size=3), max_leaves=6)
CLAIMS = st.fixed_dictionaries({}, optional={
    "active": st.booleans() | JSON_VALUE, "sub": st.text(max_size=30) | JSON_VALUE, "username": st.text(max_size=30),
    "groups": st.lists(st.text(max_size=10) | JSON_VALUE, max_size=5) | JSON_VALUE,
    "aud": st.sampled_from([RESOURCE, RESOURCE + "/", "https://other.example/mcp"]) | st.lists(st.sampled_from([RESOURCE, "https://other.example"]), max_size=2),
    "client_id": st.text(max_size=10) | JSON_VALUE,
})


@given(CLAIMS)
def test_any_introspection_answer_is_a_principal_only_when_it_may_be(claims):
    try:
        who = IDENTITY._principal_of(claims, RESOURCE)
    except TokenRefused:
        return
    assert claims["active"] is True
    audience = claims.get("aud")
    assert audience is None or audience == [] or RESOURCE in {str(a).rstrip("/") for a in ([audience] if isinstance(audience, str) else audience)}
    named = claims.get("sub") or claims.get("username")
    assert isinstance(named, str) and who.user_id == named.strip() and who.user_id
    assert who.tenant_id == "acme" and not who.operator and all(isinstance(g, str) and g and len(g) <= 200 for g in who.groups)


@pytest.mark.parametrize("claims, refusal", [
    ({"active": False, "sub": "alice"}, "not active"),
    ({"active": "true", "sub": "alice"}, "not active"),
    ({"active": True}, "names no user"),
    ({"active": True, "sub": "alice", "aud": "https://other.example/mcp"}, "another resource"),
])
def test_a_token_is_refused_with_the_reason(claims, refusal):
    with pytest.raises(TokenRefused, match=refusal):
        IDENTITY._principal_of(claims, RESOURCE)


def test_the_groups_claim_makes_the_groups():
    who = IDENTITY._principal_of({"active": True, "sub": "alice", "groups": ["hr", " eng ", "", 3], "aud": [RESOURCE]}, RESOURCE)
    assert (who.user_id, who.groups) == ("alice", frozenset({"hr", "eng"}))


def test_the_issuer_and_its_introspection_come_together():
    with pytest.raises(ValueError, match="INTROSPECTION_URL"):
        Settings(mcp_oauth_issuer="https://issuer.example")
