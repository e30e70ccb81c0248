"""Web URLs that callers give us and browsers later open: one parser, so that we and the browser agree.

Why this module exists: a magic link is built from the caller's `callback_url`, checked here against the
project's trusted domains, mailed, and then opened by a browser. Browsers parse URLs with the WHATWG URL Standard
(https://url.spec.whatwg.org/), Python's `urllib.parse` with older RFC rules, and the two disagree on exactly the
inputs an attacker would send: `https://evil.example\\@app.example.com/handler` has host `app.example.com` for
`urlsplit` (everything before `@` is userinfo) and host `evil.example` for a browser (a backslash ends the
authority of an http(s) URL), so a check done with `urlsplit` mails the victim's sign-in code to `evil.example`.

The rule, for every callback, redirect or trusted-domain URL the service accepts or mails: accept only URLs on
which every parser agrees, and compare origins as a WHATWG parser produces them. `parse_web_url` refuses
(`UnsafeURL`, a `ValueError` whose message reads after the field name):

- anything but `http` and `https` (`javascript:`, `data:`, `file:`...), and a scheme not followed by `//`
  (WHATWG reads `https:evil.example` and `https:/evil.example` as `https://evil.example`);
- a backslash anywhere (WHATWG reads it as `/` in http(s) URLs);
- spaces, tabs, newlines, other control characters and non-ASCII characters anywhere (WHATWG silently deletes
  tabs and newlines, so `https://app.exa\\nmple.com` is `app.example.com` to a browser; non-ASCII hosts go
  through IDNA mapping, full-width dots included);
- userinfo (`user:password@`): whatever precedes an `@` is a classic way to make a link read as another host;
- a host that is not plain: only ASCII letters, digits, `-`, `_` and dots, with no empty label (so no trailing
  dot: `app.example.com.` is another origin to a browser), no percent-encoding (WHATWG decodes `%61pp` to
  `app`), `xn--` labels only when they are canonical Punycode of a non-ASCII label, and a host whose last label
  is a number only as a canonical dotted-quad IPv4 address (WHATWG reads `0x7f.1` and `2130706433` as
  127.0.0.1); IPv6 literals in brackets, without a zone;
- an empty or out-of-range port (`:0`, `:65536`).

What it accepts it normalises as a browser does: scheme and host lower-cased, a default port (`:443` for https,
`:80` for http) dropped, an empty path made `/`. The origin is then `scheme://host[:port]`, and `href` is the
URL a browser would open, which is what the service stores and mails.

`parse_origin_pattern` parses a project's trusted domain the same way, plus wildcards in its host (the original's
rules): `*` matches any characters but a dot (`*.example.com`: one label, never the bare domain; `api-*`,
`stack-test.*`), `**` any characters (`**.example.com`: subdomains at any depth). They are matched against the host
a WHATWG parser produces from a URL `parse_web_url` accepted, so no URL can bring a host that reads otherwise. A
wildcard pattern without a port trusts the scheme's default port only; a port is never a wildcard.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from ipaddress import AddressValueError, IPv6Address

__all__ = ["Origin", "OriginPattern", "UnsafeURL", "WebURL", "parse_origin_pattern", "parse_web_url"]

#: The schemes a callback may use, and their default ports (omitted from an origin, as browsers do).
DEFAULT_PORTS = {"http": 80, "https": 443}

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_LABEL = re.compile(r"[a-z0-9_-]+")
_WILD_LABEL = re.compile(r"[a-z0-9_*-]+")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_IPV4_PART = re.compile(r"0|[1-9][0-9]{0,2}")
_PORT = re.compile(r"[0-9]{1,5}")


class UnsafeURL(ValueError):
    """A URL that is not an http(s) URL on which every parser agrees; the message says why."""


@dataclass(frozen=True, order=True)
class Origin:
    """A WHATWG tuple origin: lower-case scheme, the host as a browser serialises it, the port (always set)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        if DEFAULT_PORTS.get(self.scheme) == self.port:
            return f"{self.scheme}://{self.host}"
        return f"{self.scheme}://{self.host}:{self.port}"


@dataclass(frozen=True)
class WebURL:
    """A URL `parse_web_url` accepted: its origin and its normalised form (`href`)."""

    origin: Origin
    #: Path, query and fragment as given, the path at least `/`.
    rest: str

    @property
    def href(self) -> str:
        """The URL as a browser would serialise it, up to the path's own percent-encoding."""
        return f"{self.origin}{self.rest}"


@dataclass(frozen=True)
class OriginPattern:
    """A trusted domain: an origin, or with `*` / `**` in `host` every origin whose host the pattern matches (same
    scheme and port)."""

    scheme: str
    host: str
    port: int

    def matches(self, origin: Origin) -> bool:
        """Whether `origin` is trusted by this pattern."""
        if (origin.scheme, origin.port) != (self.scheme, self.port):
            return False
        if "*" in self.host:
            return _host_regex(self.host).fullmatch(origin.host) is not None
        return origin.host == self.host


@functools.lru_cache(maxsize=256)
def _host_regex(host: str) -> re.Pattern[str]:
    """The original's `matchHostnamePattern`: `**` any characters, `*` any but a dot, the rest literally."""
    return re.compile("".join({"**": ".*", "*": "[^.]*"}.get(p, re.escape(p)) for p in re.split(r"(\*\*|\*)", host)))


@functools.lru_cache(maxsize=1024)
def parse_web_url(url: str) -> WebURL:
    """`url` parsed as a browser would parse it, or `UnsafeURL` when a browser might read it differently from
    us (see the module docstring for the rules). Memoised: a sign-in parses its callback three times (schema,
    trust, link), and an app sends the same few callbacks again and again (refusals are not memoised)."""
    scheme, authority, rest = _split(url)
    host, port = _host_and_port(authority, scheme)
    return WebURL(Origin(scheme, _plain_host(host), port), rest if rest.startswith("/") else f"/{rest}")


@functools.lru_cache(maxsize=1024)
def parse_origin_pattern(domain: str) -> OriginPattern:
    """A trusted domain such as `https://app.example.com`, `https://*.example.com:8443` or `http://**.localhost` (a
    path after it is allowed and ignored), or `UnsafeURL`."""
    scheme, authority, _rest = _split(domain)
    host, port = _host_and_port(authority, scheme)
    return OriginPattern(scheme, _plain_host(host, wildcards=True), port)


def _split(url: str) -> tuple[str, str, str]:
    """(lower-case scheme, authority, path + query + fragment) of an http(s) URL with an authority."""
    if "\\" in url:
        raise UnsafeURL("must not contain a backslash")
    if any(not "\x21" <= char <= "\x7e" for char in url):
        raise UnsafeURL("must not contain spaces, control characters or non-ASCII characters")
    scheme, colon, after = url.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme) or scheme.lower() not in DEFAULT_PORTS:
        raise UnsafeURL("must be an http or https URL")
    if not after.startswith("//"):
        raise UnsafeURL("must have // after the scheme")
    after = after[2:]
    end = min((i for i in (after.find(c) for c in "/?#") if i >= 0), default=len(after))
    authority, rest = after[:end], after[end:]
    if "@" in authority:
        raise UnsafeURL("must not contain a user name or password (@)")
    return scheme.lower(), authority, rest


def _host_and_port(authority: str, scheme: str) -> tuple[str, int]:
    """(host as written, but IPv6 literals serialised; port, the scheme's default when absent)."""
    port_text: str | None
    if authority.startswith("["):
        literal, bracket, after = authority[1:].partition("]")
        if not bracket:
            raise UnsafeURL("has an unclosed [ in its host")
        host = _ipv6(literal)
        if after and not after.startswith(":"):
            raise UnsafeURL("has characters after its IPv6 address")
        port_text = after[1:] if after else None
    else:
        host, colon, after = authority.partition(":")
        port_text = after if colon else None
    if port_text is None:
        return host, DEFAULT_PORTS[scheme]
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        raise UnsafeURL("must have a port from 1 to 65535 after a colon")
    return host, int(port_text)


def _plain_host(host: str, *, wildcards: bool = False) -> str:
    """A domain or IPv4 host, lower-cased, that no browser reads as another host (or an IPv6 literal, already
    serialised); with `wildcards`, labels may hold `*` (a domain pattern: never one ending in a number)."""
    if host.startswith("["):
        return host
    if not host:
        raise UnsafeURL("must have a host")
    host = host.lower()
    if host.endswith("."):
        raise UnsafeURL("must not have a host ending in a dot")
    labels = host.split(".")
    if not all((_WILD_LABEL if wildcards else _LABEL).fullmatch(label) for label in labels):
        raise UnsafeURL("must have a host of letters, digits, hyphens and dots only (no empty label, no %)")
    # WHATWG reads a host ending in a number as an IPv4 address in any of several notations.
    is_ipv4 = len(labels) == 4 and all(_IPV4_PART.fullmatch(p) and int(p) < 256 for p in labels)
    if _NUMERIC_LABEL.fullmatch(labels[-1]) and not is_ipv4:
        raise UnsafeURL("must write an IPv4 host as four decimal numbers from 0 to 255")
    for label in labels:
        if label.startswith("xn--") and not _canonical_punycode(label[4:]):
            raise UnsafeURL("has an xn-- label that is not valid Punycode")
    return host


def _canonical_punycode(payload: str) -> bool:
    """Whether `payload` decodes to a label with a non-ASCII character and is that label's own encoding: a
    browser then keeps the label as written (or refuses the URL), never maps it to another ASCII host."""
    try:
        decoded = payload.encode("ascii").decode("punycode")
    except UnicodeError:
        return False
    return any(ord(char) > 0x7F for char in decoded) and decoded.encode("punycode").decode("ascii") == payload


def _ipv6(literal: str) -> str:
    """An IPv6 literal as WHATWG serialises it: `[` lower-case hex pieces, the first longest run of two or more
    zero pieces compressed to `::` `]`."""
    if "%" in literal:
        raise UnsafeURL("must not have a zone in an IPv6 host")
    try:
        value = int(IPv6Address(literal))
    except AddressValueError:
        raise UnsafeURL("has an invalid IPv6 address") from None
    pieces = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, start = -1, 1, -1
    for i, piece in enumerate([*pieces, 1]):
        if piece == 0 and start < 0:
            start = i
        elif piece != 0 and start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    hexes = [f"{piece:x}" for piece in pieces]
    if best_start < 0:
        return f"[{':'.join(hexes)}]"
    head, tail = ":".join(hexes[:best_start]), ":".join(hexes[best_start + best_len :])
    return f"[{head}::{tail}]"
