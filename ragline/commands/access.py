"""`ragline access`: who may read a knowledge base or a document, set and explained.

    ragline access set --kb handbook --groups hr,finance          # the base: these groups only
    ragline access set --kb handbook --document salaries.md --users alice
    ragline access set --kb handbook --document salaries.md --open
    ragline access show --kb handbook                              # the base's rule and every restricted document
    ragline access explain --user bob --groups eng --kb handbook --document salaries.md

The command is the operator's (it reads the data directory or the shared Redis itself): it sets any
rule of its tenant. A document's new rule takes effect on the next question; the wiki pages written
from it are removed and written again under the new rule.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from ragline.commands.kb import guarded, resolve_document
from ragline.commands.running import split_names
from ragline.contracts.access import AccessRule, Principal
from ragline.plain_errors import validation_message
from ragline.retrieval.errors import RetrievalError
from ragline.services import Services


def _rule(args: argparse.Namespace) -> AccessRule:
    if args.open and (args.users or args.groups):
        raise RetrievalError("give --open, or --users and --groups, not both")
    if not args.open and not args.users and not args.groups:
        raise RetrievalError("say who may read: --users, --groups, or --open for everyone in the tenant")
    try:
        return AccessRule(users=split_names(args.users), groups=split_names(args.groups))
    except ValidationError as exc:
        raise RetrievalError(validation_message(exc)) from None


def described(rule: AccessRule) -> str:
    if not rule.restricted:
        return "everyone in the tenant"
    return ", ".join([*(f"user {u}" for u in rule.users), *(f"group {g}" for g in rule.groups)])


async def access_set(args: argparse.Namespace, services: Services) -> int:
    rule = _rule(args)
    kb = services.find_knowledge_base(args.kb, args.tenant)  # a wrong name fails before the stores open
    operator = Principal.operator_of(args.tenant)
    if args.document is None:
        services.retrieval.knowledge_bases.update(kb.id, operator, access=rule)
        print(f"{kb.name}: readable by {described(rule)}")
        return 0
    document = resolve_document(services.retrieval.catalog.list_knowledge(kb.id), args.document)
    await services.ingestion.set_access(kb.id, document.id, rule, args.tenant)
    print(f"{document.title} ({document.id}) in {kb.name}: readable by {described(rule)}"
          + (" within the base's rule" if rule.restricted else ""))
    if kb.wiki_enabled:
        await services.wiki.drain()  # the pages written from it come back under the new rule
    return 0


def access_show(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.kb, args.tenant)
    catalog = services.retrieval.catalog
    print(f"{kb.name}: readable by {described(kb.access)}")
    restricted = catalog.restricted_documents([kb.id])
    documents = catalog.get_knowledge_many(restricted)
    for knowledge_id, rule in sorted(restricted.items(), key=lambda item: documents[item[0]].title if item[0] in documents else ""):
        title = documents[knowledge_id].title if knowledge_id in documents else "?"
        print(f"  {title} ({knowledge_id}): {described(rule)}")
    if not restricted:
        print("  no document narrows it")
    return 0


def access_explain(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.kb, args.tenant)
    stack = services.retrieval
    document = resolve_document(stack.catalog.list_knowledge(kb.id), args.document)
    who = Principal(args.tenant, args.user, frozenset(split_names(args.groups)))
    decision = stack.knowledge_bases.explain(document, who)
    groups = f" (groups {', '.join(sorted(who.groups))})" if who.groups else " (no groups)"
    print(f"{args.user}{groups} {'may' if decision.allowed else 'may not'} read {document.title} in {kb.name}: {decision.reason}")
    return 0 if decision.allowed else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `access set`, `access show` and `access explain` to the ragline command."""
    tenant = argparse.ArgumentParser(add_help=False)
    tenant.add_argument("--tenant", default="default", help="tenant that owns the knowledge base")
    tenant.add_argument("--kb", required=True, help="knowledge base name or id")

    access = subparsers.add_parser("access", help="who may read a knowledge base or a document: set, show, explain")
    sub = access.add_subparsers(dest="access_command", required=True)
    setting = sub.add_parser("set", parents=[tenant], help="set the rule of a knowledge base, or narrow one document's")
    setting.add_argument("--document", default=None, metavar="DOC", help="document id, source path or title (default: the base itself)")
    setting.add_argument("--users", default="", help="users who may read, comma-separated")
    setting.add_argument("--groups", default="", help="groups whose members may read, comma-separated")
    setting.add_argument("--open", action="store_true", help="everyone the level above lets in (removes the rule)")
    setting.set_defaults(func=guarded(access_set))
    show = sub.add_parser("show", parents=[tenant], help="the base's rule and every document that narrows it")
    show.set_defaults(func=guarded(access_show))
    explain = sub.add_parser("explain", parents=[tenant], help="whether a user may read a document, and the rule that decides")
    explain.add_argument("--user", required=True)
    explain.add_argument("--groups", default="", help="the user's groups, comma-separated")
    explain.add_argument("--document", required=True, metavar="DOC", help="document id, source path or title")
    explain.set_defaults(func=guarded(access_explain))
