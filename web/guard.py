"""The address guard of web_fetch: no private, loopback, link-local or metadata targets.

A URL that a model or a search result hands us must not make the server reach into its own
network (SSRF). The check runs where it cannot be dodged: inside the HTTP client's network
backend, on the addresses that DNS returned for every connection, so a redirect to an internal
host or a name that resolves (or re-resolves) to one is refused as well as a literal IP.
"""

from __future__ import annotations

import ipaddress
import socket
import typing
from dataclasses import dataclass

import anyio
import httpcore
import httpx

from ragline import defaults
from ragline.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance-metadata endpoints: refused even when private addresses are allowed, since no
# intranet page lives there and they hand out credentials.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
METADATA_HOSTNAMES = frozenset({"metadata", "metadata.google.internal", "metadata.azure.internal", "instance-data"})


class WebFetchError(RuntimeError):
    """A page could not be fetched or held no text."""


class BlockedAddressError(WebFetchError):
    """The target (or a redirect, or what its name resolved to) is not a public address."""


def _unmapped(ip: IPAddress) -> IPAddress:
    """::ffff:127.0.0.1 is 127.0.0.1: judge IPv4-mapped IPv6 addresses by their IPv4 form."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses web_fetch may connect to.

    allow_private opens every private, loopback and link-local address; allowed_networks opens
    only the listed ones (one intranet wiki without the whole office network). Metadata
    endpoints stay closed either way.
    """

    allow_private: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressPolicy:
        networks = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in settings.web_fetch_allowed_networks if n.strip())
        return cls(allow_private=settings.web_fetch_allow_private, allowed_networks=networks)

    def refusal(self, address: str) -> str | None:
        """Why `address` (an IP literal) is refused, or None when it may be reached."""
        ip = _unmapped(ipaddress.ip_address(address.split("%", 1)[0]))
        if ip in METADATA_ADDRESSES:
            return f"{ip} is a cloud metadata address"
        if ip.is_unspecified or ip.is_multicast:
            return f"{ip} is not a unicast address"
        if self.allow_private or any(ip in network for network in self.allowed_networks):
            return None
        if ip.is_loopback:
            return f"{ip} is a loopback address"
        if ip.is_link_local:
            return f"{ip} is a link-local address"
        if not ip.is_global:  # private ranges, shared address space (100.64/10), reserved, documentation
            return f"{ip} is a private address"
        return None

    def check_url(self, url: str) -> httpx.URL:
        """Scheme and host checks that need no DNS; addresses are checked again at connect time."""
        try:
            parsed = httpx.URL(url)
            port = parsed.port
        except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
            raise WebFetchError(f"{url[:200]!r} is not a valid URL: {exc}") from None
        if port is not None and not 0 < port < 65536:
            raise WebFetchError(f"{url[:200]!r} is not a valid URL: port {port} is out of range")
        if parsed.scheme not in ("http", "https"):
            raise BlockedAddressError(f"only http and https URLs are fetched, not {parsed.scheme or 'a relative URL'}")
        host = parsed.host.rstrip(".").lower()
        if not host:
            raise BlockedAddressError(f"{url} has no host")
        if host in METADATA_HOSTNAMES:
            raise BlockedAddressError(f"{host} is a cloud metadata host")
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return parsed
        if reason := self.refusal(str(literal)):
            raise BlockedAddressError(reason)
        return parsed


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Resolves names itself and connects to a checked IP, so DNS cannot smuggle in a private one.

    Every resolved address must pass: a name that resolves to one public and one private
    address is refused, since the attacker controls which one a later lookup returns.
    """

    def __init__(self, policy: AddressPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            if reason := self.policy.refusal(address):
                raise BlockedAddressError(f"{host} resolves to a refused address: {reason}")
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last_error: Exception | None = None
        for address in await self.resolve(host, port):
            try:
                # TLS still verifies the certificate against the URL's host: httpcore passes the
                # origin host, not this IP, as server_hostname.
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last_error = exc
        raise last_error or httpcore.ConnectError(f"cannot connect to {host}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.AsyncNetworkStream:
        raise BlockedAddressError("unix sockets are never fetched")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool built on the guarded network backend."""

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(trust_env=False)  # an environment proxy would be the only address checked
        # httpx exposes no network_backend argument; the pool is the one it would build, plus ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=httpx.Limits().max_connections,
            network_backend=GuardedNetworkBackend(policy),
        )


def guarded_client(policy: AddressPolicy, timeout: float = defaults.WEB_FETCH_TIMEOUT_S) -> httpx.AsyncClient:
    """An HTTP client whose every connection, redirects included, passes the policy."""
    return httpx.AsyncClient(
        transport=GuardedTransport(policy),
        follow_redirects=True,
        max_redirects=defaults.WEB_FETCH_MAX_REDIRECTS,
        timeout=timeout,
        trust_env=False,
        headers={"User-Agent": "Mozilla/5.0 (compatible; Ragline web_fetch)"},
    )
