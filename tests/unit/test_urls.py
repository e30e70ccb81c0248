"""identity_proto.urls: the one parser of callback, redirect and trusted-domain URLs, checked against ada (the
WHATWG URL parser of Node.js): whatever we accept, a browser opens at exactly the origin we computed."""

from __future__ import annotations

import re

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from identity_proto.urls import Origin, OriginPattern, UnsafeURL, parse_origin_pattern, parse_web_url


def _browser_origin(url: str) -> str | None:
    """The origin a WHATWG parser gives `url`, or None when it refuses it."""
    try:
        return str(ada_url.URL(url).origin)
    except ValueError:
        return None


@pytest.mark.parametrize(
    ("url", "origin", "href"),
    [
        ("https://app.example.com/h?x=1#f", Origin("https", "app.example.com", 443), "https://app.example.com/h?x=1#f"),
        ("HTTPS://APP.Example.com:443", Origin("https", "app.example.com", 443), "https://app.example.com/"),
        ("http://app.example.com:80/", Origin("http", "app.example.com", 80), "http://app.example.com/"),
        ("http://app.example.com:0080/", Origin("http", "app.example.com", 80), "http://app.example.com/"),
        ("https://app.example.com:8443/", Origin("https", "app.example.com", 8443), "https://app.example.com:8443/"),
        ("http://127.0.0.1:3000/cb", Origin("http", "127.0.0.1", 3000), "http://127.0.0.1:3000/cb"),
        ("http://[::1]:3000/cb", Origin("http", "[::1]", 3000), "http://[::1]:3000/cb"),
        ("http://[0:0:0:0:0:FFFF:7F00:1]/", Origin("http", "[::ffff:7f00:1]", 80), "http://[::ffff:7f00:1]/"),
        ("https://xn--bcher-kva.example/", Origin("https", "xn--bcher-kva.example", 443), None),
        ("https://my_app.example.com/", Origin("https", "my_app.example.com", 443), None),
    ],
)
def test_an_unambiguous_url_is_normalised_as_a_browser_does(url: str, origin: Origin, href: str | None) -> None:
    parsed = parse_web_url(url)
    assert parsed.origin == origin
    assert str(parsed.origin) == _browser_origin(url)
    if href is not None:
        assert parsed.href == href == ada_url.URL(url).href


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://evil.example\\@app.example.com/handler", "backslash"),
        ("https://app.example.com@evil.example/", "user name or password"),
        ("https://:@app.example.com/", "user name or password"),
        ("https://app.exa\tmple.com/", "control characters"),
        ("https://app.example.com/\n", "control characters"),
        (" https://app.example.com/", "control characters"),
        ("https://app.example.com\x7f/", "control characters"),
        ("https://bücher.example/", "non-ASCII"),
        ("https://app\u3002example.com/", "non-ASCII"),
        ("javascript:alert(1)", "http or https"),
        ("ftp://app.example.com/", "http or https"),
        ("app.example.com/handler", "http or https"),
        ("https:app.example.com", "//"),
        ("https://", "must have a host"),
        ("https://app.example.com./", "ending in a dot"),
        ("https://app..example.com/", "no empty label"),
        ("https://.app.example.com/", "no empty label"),
        ("https://%61pp.example.com/", "no %"),
        ("https://app.example.com:/", "port"),
        ("https://app.example.com:0/", "port"),
        ("https://app.example.com:65536/", "port"),
        ("https://app.example.com:44a/", "port"),
        ("https://0x7f.1/", "IPv4"),
        ("https://2130706433/", "IPv4"),
        ("https://127.1/", "IPv4"),
        ("https://0177.0.0.1/", "IPv4"),
        ("https://1.2.3.256/", "IPv4"),
        ("https://example.0x10/", "IPv4"),
        ("https://xn--abc-/", "Punycode"),
        ("https://xn--ls8h-/", "Punycode"),
        ("https://[::1/", "unclosed"),
        ("https://[::1]x/", "after its IPv6"),
        ("https://[fe80::1%25eth0]/", "zone"),
        ("https://[::g]/", "invalid IPv6"),
    ],
)
def test_an_ambiguous_url_is_refused_with_its_reason(url: str, reason: str) -> None:
    with pytest.raises(UnsafeURL, match=reason):
        parse_web_url(url)


@pytest.mark.parametrize(
    ("domain", "pattern"),
    [
        ("https://app.example.com", OriginPattern("https", "app.example.com", 443)),
        ("https://App.Example.com/", OriginPattern("https", "app.example.com", 443)),
        ("http://*.example.com:8080", OriginPattern("http", "*.example.com", 8080)),
        ("http://**.localhost", OriginPattern("http", "**.localhost", 80)),
        ("http://api-*:8114", OriginPattern("http", "api-*", 8114)),
    ],
)
def test_a_trusted_domain_parses_to_an_origin_pattern(domain: str, pattern: OriginPattern) -> None:
    assert parse_origin_pattern(domain) == pattern


@pytest.mark.parametrize(
    "domain",
    [
        "https://*.127.0.0.1",
        "https://*.[::1]",
        "https://[*::1]",
        "https://*..example.com",
        "https://*.example.com.",
        "https://%2a.example.com",
        "https://example.com:*",
        "https://*.example.com:80*",
        "https://xn--*.example.com",
    ],
)
def test_a_trusted_domain_puts_a_wildcard_only_in_a_domain_name(domain: str) -> None:
    with pytest.raises(UnsafeURL):
        parse_origin_pattern(domain)


def _trusts(domain: str, url: str) -> bool:
    return parse_origin_pattern(domain).matches(parse_web_url(url).origin)


def test_a_wildcard_matches_subdomains_on_the_same_scheme_and_port() -> None:
    assert _trusts("https://*.example.com", "https://a.example.com/")
    assert not _trusts("https://*.example.com", "https://a.b.example.com/")  # `*`: one label, as the original
    assert _trusts("https://**.example.com", "https://a.b.example.com/")
    for domain in ("https://*.example.com", "https://**.example.com"):
        assert not _trusts(domain, "https://example.com/")
        assert not _trusts(domain, "https://badexample.com/")
        assert not _trusts(domain, "http://a.example.com/")
        assert not _trusts(domain, "https://a.example.com:444/")


@pytest.mark.parametrize(
    ("domain", "url", "trusted"),
    [
        # The original's own cases (matchHostnamePattern, wildcard-domains.test.ts).
        ("https://api-*.example.com", "https://api-v1.example.com", True),
        ("https://api-*.example.com", "https://api.example.com", False),
        ("https://*.*.org", "https://mail.example.org", True),
        ("https://*.*.org", "https://example.org", False),
        ("https://sub.**.com", "https://sub.a.b.com", True),
        ("http://stack-test.*", "http://stack-test.localhost:80/cb", True),
        ("http://stack-test.*", "http://stack-test.localhost:8101/cb", False),  # no port: the default one only
        ("http://**.localhost", "http://stack-test.localhost/cb", True),
        ("http://api-*:8114", "http://api-v1:8114/cb", True),
        ("http://api-*:8114", "http://localhost:8114/cb", False),
        ("http://*:8114", "http://localhost:8114/cb", True),
        ("http://*:8114", "http://127.0.0.1:8114/cb", False),
        # Partial hosts: a pattern is matched against the whole host a browser opens, nothing else.
        ("https://*.example.com", "https://evil.example/?.example.com", False),
        ("https://*.example.com", "https://a.example.com.evil.example", False),
        ("https://app.*", "https://app.example.com", False),
        ("https://**.example.com", "https://example.com.evil.example", False),
    ],
)
def test_wildcards_match_as_the_originals(domain: str, url: str, trusted: bool) -> None:
    assert _trusts(domain, url) is trusted


# Pieces that parsers disagree on, put together at random.
_PIECES = st.sampled_from(
    [
        "https://", "http://", "HTTPS://", "https:", "https:/", "//", "/", "\\", "@", ":", "::", ".", "..", "?", "#",
        "%", "%2e", "%40", "%5c", "%61", "[", "]", "[::1]", "[::ffff:1.2.3.4]", "\t", "\n", "\r", " ", "\x00",
        "\x1f", "\x7f", "\u00e9", "\uff0e", "\u3002", "\u200b", "\u0435", "xn--", "xn--bcher-kva", "0x7f", "0", "1",
        "127", "255", "256", "443", "80", "65535", "99999", "a", "app", "example", "com", "evil", "localhost", "-",
        "_", "*", "javascript:", "data:", "user", "pass", "code=1",
    ]
)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.tuples(st.sampled_from(["https://", "http://", ""]), st.lists(_PIECES, min_size=1, max_size=12)))
def test_whatever_we_accept_a_browser_opens_at_the_origin_we_computed(pieces: tuple[str, list[str]]) -> None:
    url = pieces[0] + "".join(pieces[1])
    try:
        parsed = parse_web_url(url)
    except UnsafeURL:
        return
    assert _browser_origin(url) == str(parsed.origin), url
    assert _browser_origin(parsed.href) == str(parsed.origin), url


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["https://", "http://"]),
    st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["", ":443", ":80", ":8443", ":1"]),
    st.sampled_from(["", "/", "/handler", "/a/../b", "?x=1", "#frag", "/h?code=1&next=%2F"]),
)
def test_every_plain_url_is_accepted_with_the_browsers_origin(
    scheme: str, labels: list[str], port: str, rest: str
) -> None:
    if re.fullmatch(r"[0-9]+|0x[0-9a-f]*", labels[-1]):  # a number (decimal or hex) ends only IPv4 hosts
        labels = [*labels, "com"]
    url = f"{scheme}{'.'.join(labels)}{port}{rest}"
    assert str(parse_web_url(url).origin) == _browser_origin(url)
