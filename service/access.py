"""Who is asking, and the refusals the services raise (the API maps each to one HTTP status).

A caller is a tenant and a user within it (an API key names both). Reading a session needs the
same tenant (seed: GetSession); anything destructive — delete, clear, stop, rewind, a new turn —
needs its owner (seed: GetOwnedSession). Another tenant's session is reported as not found, so
its existence never leaks.
"""

from __future__ import annotations

from ragline.contracts.access import Principal

__all__ = ["Principal", "ServiceError", "NotFoundError", "ForbiddenError", "ConflictError", "InvalidRequestError",
           "UnprocessableError", "check_readable", "check_owned"]


class ServiceError(Exception):
    """A request the service refuses, with a message for the client."""


class NotFoundError(ServiceError):
    pass


class ForbiddenError(ServiceError):
    pass


class ConflictError(ServiceError):
    pass


class InvalidRequestError(ServiceError):
    pass


class UnprocessableError(InvalidRequestError):
    """Well-formed input that asks for something this service refuses (HTTP 422): a setting an
    assistant does not let a turn override, a mode not available yet."""


def check_readable(resource: object | None, who: Principal, what: str = "session") -> None:
    if resource is None or getattr(resource, "tenant_id", None) != who.tenant_id:
        raise NotFoundError(f"{what} not found")


def check_owned(resource: object | None, who: Principal, what: str = "session") -> None:
    check_readable(resource, who, what)
    if getattr(resource, "owner_id", None) != who.user_id:
        raise ForbiddenError(f"only the owner of this {what} may do that")
