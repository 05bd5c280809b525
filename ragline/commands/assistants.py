"""`ragline assistant create|list|show|update|delete`: stored configurations turns name by id
(issue 28), kept where `ragline serve` with the same settings keeps them: a SQLite file under the
data directory, or the shared Redis (RAGLINE_REDIS_URL). `ragline ask --assistant ID` asks with one.

A configuration is given as `--config FILE.json` (an object of request settings) and/or
`--set key=value` (repeatable; a dotted key reaches into an object: `--set summary.max_tokens=64`;
the value is read as JSON when it is JSON, else taken as text; `--set key=null` clears a setting
on update, and on update a dotted key keeps the rest of that object). Knowledge bases may be
named by name: they are stored as ids.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragline.commands.running import CLIError, run

if TYPE_CHECKING:
    from ragline.service.access import Principal
    from ragline.service.assistant_service import AssistantService
    from ragline.service.assistants import Assistant
    from ragline.services import Services

Handler = Callable[[argparse.Namespace, "AssistantService", "Principal"], Coroutine[Any, Any, int]]
SET_EXAMPLE = "--set summary.max_tokens=64"
PUBLISH_PAGE = 100  # assistants read from the store at a time


def parse_setting(text: str) -> tuple[list[str], Any]:
    """`key.path=value` as (["key", "path"], value): JSON when the value is JSON, else the text."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(part.strip() for part in path):
        raise CLIError(f"--set takes key=value, e.g. {SET_EXAMPLE}; got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return [part.strip() for part in path], value


def apply_settings(config: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """`config` with every `--set` applied in order (a later one wins; a dotted key makes objects)."""
    result = json.loads(json.dumps(config))  # a deep copy
    for text in settings:
        path, value = parse_setting(text)
        into = result
        for part in path[:-1]:
            if not isinstance(into.get(part), dict):
                into[part] = {}
            into = into[part]
        into[path[-1]] = value
    return result


def read_config(args: argparse.Namespace, stored: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The configuration of --config and --set, or None when neither was given. With the `stored`
    configuration (an update), a dotted --set changes one part of a stored object and keeps the rest."""
    base: dict[str, Any] = {}
    if args.config is not None:
        try:
            base = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CLIError(f"{args.config}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CLIError(f"{args.config} is not JSON: {exc}") from None
        if not isinstance(base, dict):
            raise CLIError(f"{args.config} must hold a JSON object of settings, e.g. {{\"rerank_top_k\": 5}}")
    if args.config is None and not args.set:
        return None
    for text in args.set or []:
        path = parse_setting(text)[0]
        if len(path) > 1 and path[0] not in base and isinstance((stored or {}).get(path[0]), dict):
            base[path[0]] = (stored or {})[path[0]]
    return apply_settings(base, args.set or [])


def _body(args: argparse.Namespace, config: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": args.name, "description": args.description, "mode": args.mode, "config": config,
                            "overridable": [n.strip() for n in args.overridable.split(",") if n.strip()] if args.overridable is not None else None,
                            "tools": args.tool, "approval_tools": args.approval_tool, "mcp_servers": args.mcp_server}
    return {key: value for key, value in body.items() if value is not None}


def _with_kb_ids(config: dict[str, Any] | None, services: Services, tenant: str) -> dict[str, Any] | None:
    """Knowledge bases named by name (what people type) as their ids (what the store keeps)."""
    from ragline.retrieval.errors import RetrievalError

    names = config.get("knowledge_base_ids") if config else None
    if isinstance(names, str):  # --set knowledge_base_ids=manuals,specs
        names = [name.strip() for name in names.split(",") if name.strip()]
    if config is None or not isinstance(names, list):
        return config
    try:
        return {**config, "knowledge_base_ids": [services.find_knowledge_base(str(name), tenant).id for name in names]}
    except RetrievalError as exc:
        raise CLIError(f"{exc} (see `ragline kb list`)") from None


def _summary(assistant: Assistant) -> str:
    return f"{assistant.id}  v{assistant.version}  {assistant.mode}  {assistant.updated_at:%Y-%m-%d %H:%M}  {assistant.name}"


async def assistant_create(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    from ragline.service.assistant_service import AssistantCreate

    body = AssistantCreate.model_validate(_body(args, _with_kb_ids(read_config(args), service.services, who.tenant_id)))
    print((await service.create(who, body)).id)
    return 0


async def assistant_list(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    items, total = await service.list(who, args.page, args.page_size)
    for assistant in items:
        print(_summary(assistant))
    if total > args.page * args.page_size:
        print(f"({total} assistants; --page {args.page + 1} for more)")
    return 0


async def assistant_show(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    print((await service.get(who, args.id, args.version)).model_dump_json(indent=2, exclude_none=True))
    return 0


async def assistant_update(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    from ragline.service.assistant_service import AssistantUpdate

    stored = (await service.get(who, args.id)).config.model_dump(exclude_none=True) if args.set else None
    body = _body(args, _with_kb_ids(read_config(args, stored), service.services, who.tenant_id))
    if not body:
        raise CLIError("nothing to change: give --name, --description, --mode, --config, --set, --overridable, --tool, --approval-tool or --mcp-server")
    print(_summary(await service.update(who, args.id, AssistantUpdate.model_validate(body))))
    return 0


async def assistant_delete(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    await service.delete(who, args.id)
    return 0


async def assistant_publish(args: argparse.Namespace, service: AssistantService, who: Principal) -> int:
    """The tenant's assistants as LangGraph assistants of the server at --url (service/studio_assistants.py)."""
    import httpx
    from langgraph_sdk import get_client

    from ragline.service.studio_assistants import publish

    assistants: list[Assistant] = []
    number = 1
    while True:
        page, total = await service.list(who, number, PUBLISH_PAGE)
        assistants += page
        if not page or len(assistants) >= total:
            break
        number += 1
    client = get_client(url=args.url, api_key=None)
    try:
        published = await publish(assistants, who.tenant_id, client)
    except httpx.HTTPError as exc:
        raise CLIError(f"the LangGraph server at {args.url} did not take the assistants: {exc} (is `langgraph dev` running there?)") from None
    finally:
        await client.aclose()
    for item in published:
        print(f"{item.action:9}  {item.assistant_id}  {item.graph_id}  {item.name}")
    return 0


def describe(exc: Exception) -> str | None:
    """A refusal of the assistant service (or bad settings) in one line, or None for anything else."""
    from pydantic import ValidationError

    from ragline.plain_errors import validation_message
    from ragline.retrieval.errors import RetrievalError
    from ragline.service.access import NotFoundError, ServiceError
    from ragline.service.backend import BackendConfigError

    if isinstance(exc, ValidationError):
        return validation_message(exc, limit=1)
    if isinstance(exc, NotFoundError):
        return f"{exc} (see `ragline assistant list`)"
    if isinstance(exc, ServiceError | RetrievalError | BackendConfigError):
        return str(exc)
    return None


async def with_service(handler: Handler, args: argparse.Namespace) -> int:
    """The handler with an AssistantService on the store the settings choose, closed after."""
    from ragline.service.access import Principal
    from ragline.service.assistant_service import AssistantService
    from ragline.service.backend import open_assistant_store
    from ragline.services import Services

    services = Services.from_settings()
    try:
        async with open_assistant_store(services) as store:
            return await handler(args, AssistantService(store, services), Principal(args.tenant, args.user))
    except Exception as exc:
        if (message := describe(exc)) is None:
            raise
        raise CLIError(message) from None
    finally:
        await services.aclose()


def _command(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        if hasattr(args, "set"):
            read_config(args)  # a malformed --set or --config fails before anything opens
        return run(with_service(handler, args))

    return command


def _config_options(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    parser.add_argument("--description", help="what the assistant is for")
    parser.add_argument("--mode", choices=["pipeline", "agent"], help="pipeline (default) or agent (a model calling the --tool tools in a loop)")
    parser.add_argument("--config", metavar="FILE.json", help="a JSON object of request settings (the AgentConfig)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help=f"one setting, on top of --config (repeatable), e.g. {SET_EXAMPLE}")
    parser.add_argument("--overridable", metavar="A,B", help="settings a turn may set itself, comma-separated"
                        + (" (default: all)" if creating else " (replaces the list; '' for none)"))
    parser.add_argument("--tool", action="append", help="a tool agent mode may use (repeatable)" + ("" if creating else "; replaces the list"))
    parser.add_argument("--approval-tool", action="append", metavar="TOOL",
                        help="a --tool tool, an --mcp-server (each of its tools) or one of its tools (SERVER__TOOL) whose every call waits "
                             "for the user's approval (repeatable)" + ("" if creating else "; replaces the list"))
    parser.add_argument("--mcp-server", action="append", metavar="NAME",
                        help="an MCP server of the settings' agent_mcp_servers whose tools agent mode may call (repeatable)"
                             + ("" if creating else "; replaces the list"))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `assistant` to the ragline command."""
    caller = argparse.ArgumentParser(add_help=False)
    caller.add_argument("--tenant", default="default", help="tenant of the caller")
    caller.add_argument("--user", default="default", help="user of the caller")
    assistant = subparsers.add_parser("assistant", help="create, list, show, update or delete assistants (stored configurations)")
    sub = assistant.add_subparsers(dest="assistant_command", required=True)
    create = sub.add_parser("create", parents=[caller], help="store a new assistant; prints its id")
    create.add_argument("name")
    _config_options(create, creating=True)
    create.set_defaults(func=_command(assistant_create))
    listing = sub.add_parser("list", parents=[caller], help="the tenant's assistants, most recently changed first")
    listing.add_argument("--page", type=int, default=1)
    listing.add_argument("--page-size", type=int, default=50)
    listing.set_defaults(func=_command(assistant_list))
    show = sub.add_parser("show", parents=[caller], help="an assistant as JSON (its latest version, or --version)")
    show.add_argument("id")
    show.add_argument("--version", type=int, help="this version instead of the latest")
    show.set_defaults(func=_command(assistant_show))
    update = sub.add_parser("update", parents=[caller], help="change an assistant: its next version")
    update.add_argument("id")
    update.add_argument("--name")
    _config_options(update, creating=False)
    update.set_defaults(func=_command(assistant_update))
    delete = sub.add_parser("delete", parents=[caller], help="delete an assistant with all its versions")
    delete.add_argument("id")
    delete.set_defaults(func=_command(assistant_delete))
    publish = sub.add_parser("publish", parents=[caller], help="make the tenant's assistants LangGraph assistants of a langgraph dev "
                             "server, so Studio lists them (again: updates the changed ones, removes the deleted)")
    publish.add_argument("--url", default="http://127.0.0.1:2024", help="the LangGraph server (default: langgraph dev's)")
    publish.set_defaults(func=_command(assistant_publish))
