"""The one address rule of every request the service makes to a URL someone configured: webhook deliveries and OAuth
provider calls (discovery, token, userinfo, JWKS). Pure: the hosts apply it twice, to the URL as written (here) and
to every address its host name resolves to, at connect time (`identity_hosting.egress`); the webhook endpoint check
applies it when an endpoint is created or changed (`identity_proto.flows.webhooks`).

- An address is allowed when it is **global unicast**: `ipaddress`'s `is_global` (which leaves out private,
  loopback, link-local, shared (CGNAT, `100.64.0.0/10`, where cloud metadata services such as `100.100.100.200`
  live), benchmarking, documentation and the other special-purpose blocks), and neither multicast nor reserved.
  An IPv6 address that carries an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, 6to4 `2002::/16`, NAT64 `64:ff9b::/96`)
  is judged by the IPv4 address it leads to.
- A host name is refused as written when it names this machine or a local network: `localhost` and `*.localhost`,
  a name of one label (resolved in the local search domains), and the local suffixes `.local`, `.internal`,
  `.lan`, `.home.arpa`, `.localdomain`. Any other name is judged by what it resolves to, at connect time.
- Both are skipped when the operator allows private addresses (dev mode, or `IDENTITY_ALLOW_PRIVATE_ADDRESSES=1`);
  the scheme rule is the caller's (OAuth provider URLs must be https in production; webhooks may be http).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = [
    "ALLOW_PRIVATE_SETTING",
    "IPAddress",
    "host_refusal",
    "ip_literal",
    "is_allowed_address",
    "is_local_name",
    "url_refusal",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The operator's switch, as the refusals name it.
ALLOW_PRIVATE_SETTING = "IDENTITY_ALLOW_PRIVATE_ADDRESSES=1 (or IDENTITY_WEBHOOK_ALLOW_PRIVATE=1)"

_LOCAL_NAMES = ("localhost",)
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".localdomain")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _led_to(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries and leads to (mapped, 6to4, NAT64), else the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def is_allowed_address(address: str | IPAddress) -> bool:
    """Whether the service may connect to `address` (an IP address, an IPv6 zone allowed) in production: global
    unicast only."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.split("%", 1)[0])
    ip = _led_to(address)
    return ip.is_global and not ip.is_multicast and not ip.is_reserved and not ip.is_unspecified


def ip_literal(host: str) -> IPAddress | None:
    """The IP address a URL's host is, when it is one (brackets of an IPv6 literal allowed); None for a name."""
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    return _led_to(address)


def is_local_name(host: str) -> bool:
    """Whether the host name names this machine or a local network (see the module's rules)."""
    host = host.lower().rstrip(".")
    return host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES) or "." not in host


def url_refusal(url: str, *, require_https: bool = False) -> str | None:
    """Why the service must not call `url` as written in production (None when it may, so far as the URL shows):
    no host, a scheme other than http(s) (https only with `require_https`), a non-global IP literal, a local
    name."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in {"http", "https"} or (require_https and scheme != "https"):
        return f"{url!r} does not use {'https' if require_https else 'http or https'}"
    host = parts.hostname or ""
    if not host:
        return f"{url!r} names no host"
    return host_refusal(host)


def host_refusal(host: str) -> str | None:
    """Why the service must not call `host` (a URL's host: a name or an IP literal) as written in production, or
    None."""
    address = ip_literal(host)
    if address is not None:
        if not is_allowed_address(address):
            return f"{host} is a private, loopback, link-local, shared or otherwise non-public address"
        return None
    if is_local_name(host):
        return f"{host} is a local host name (localhost, a name of one label, .local, .internal...)"
    return None
