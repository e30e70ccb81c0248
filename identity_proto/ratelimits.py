"""Rate limits (our spec: they exist, vary by endpoint and access type, and answer 429 with retry headers).

Fixed-window counters kept in the store, so every worker sharing it counts together. Each rule below has a
default; a project may change or disable any of them (`config.rate_limits`), and a host may switch them off for a
whole process (`IDENTITY_RATE_LIMITS=off`). The per-nonce limit of 20 attempts on a one-time code is not a rate
limit: it always applies.

| rule | counts | per | default |
|---|---|---|---|
| `ip` | every request with client access or none | client address | 600 / 60 s |
| `project` | every request of a project | project | 30000 / 60 s |
| `sign_in_ip` | code, MFA and password sign-in, code checks (client access or none) | client address | 30 / 60 s |
| `send_code_ip` | sending a sign-in code, password sign-up (client access or none) | client address | 10 / 60 s |
| `send_code_email` | sending a sign-in code (any access) | project and address | 5 / 600 s |

Server and admin access come from trusted backends, often many users behind one address: they are limited per
project, not per address.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from identity_proto.auth import AccessType, Auth
from identity_proto.effects import READ_EFFECTS, Flow, HitRateLimits, RateLimitHit, StorageEffect, Together, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.records import ProjectConfig

__all__ = [
    "DEFAULT_RULES",
    "ROUTE_RULES",
    "RateLimitRule",
    "check_rate_limits",
    "rate_limited",
    "request_checks",
    "rule_for",
]


@dataclass(frozen=True, slots=True)
class RateLimitRule:
    """At most `limit` requests per `window_ms` (a limit of 0 disables the rule)."""

    name: str
    limit: int
    window_ms: int


DEFAULT_RULES: dict[str, RateLimitRule] = {
    rule.name: rule
    for rule in (
        RateLimitRule("ip", 600, 60_000),
        RateLimitRule("project", 30_000, 60_000),
        RateLimitRule("sign_in_ip", 30, 60_000),
        RateLimitRule("send_code_ip", 10, 60_000),
        RateLimitRule("send_code_email", 5, 600_000),
    )
}

#: The stricter per-address rules of the endpoints attackers aim at, by (method, path pattern).
ROUTE_RULES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/auth/otp/sign-in"): "sign_in_ip",
    ("POST", "/api/v1/auth/otp/sign-in/check-code"): "sign_in_ip",
    ("POST", "/api/v1/auth/mfa/sign-in"): "sign_in_ip",
    ("POST", "/api/v1/auth/password/sign-in"): "sign_in_ip",
    ("POST", "/api/v1/auth/otp/send-sign-in-code"): "send_code_ip",
    ("POST", "/api/v1/auth/password/sign-up"): "send_code_ip",
}


def rule_for(name: str, config: ProjectConfig | None) -> RateLimitRule:
    """The rule `name` as the project configures it (its default otherwise)."""
    if config is not None:
        for setting in config.rate_limits:
            if setting.name == name:
                return RateLimitRule(name, setting.limit, setting.window_seconds * 1000)
    return DEFAULT_RULES[name]


T = TypeVar("T")

Checks = list[tuple[RateLimitRule, str]]


def _hits(checks: Checks, now_ms: int) -> tuple[Checks, HitRateLimits | None]:
    active = [(rule, subject) for rule, subject in checks if rule.limit > 0]
    hits = []
    for rule, subject in active:
        window_start = now_ms - now_ms % rule.window_ms
        hits.append(RateLimitHit(f"rl:{rule.name}:{subject}:{window_start}", window_start + rule.window_ms))
    return active, (HitRateLimits(tuple(hits), now_ms) if hits else None)


def check_rate_limits(checks: Checks, *, now_ms: int) -> Flow[None]:
    """Count this request against each (rule, subject) and raise 429 RATE_LIMITED (with Retry-After and
    RateLimit-* headers) for the first rule it exceeds."""
    active, counter = _hits(checks, now_ms)
    if counter is None:
        return
    _enforce(active, counter, (yield from perform(counter)), now_ms)


def rate_limited(flow: Flow[T], checks: Checks, *, now_ms: int) -> Flow[T]:
    """`flow`, counted against `checks` first. When the flow's first effect only reads, the counters ride along
    with it in one trip to the store (`Together`); before a write they go alone, so a request over its limit never
    writes anything."""
    active, counter = _hits(checks, now_ms)
    if counter is None:
        return (yield from flow)
    try:
        first = next(flow)
    except StopIteration as done:  # a flow that needs no effect
        _enforce(active, counter, (yield from perform(counter)), now_ms)
        return cast(T, done.value)
    except Exception:
        _enforce(active, counter, (yield from perform(counter)), now_ms)  # failed requests count too
        raise
    if isinstance(first, StorageEffect) and type(first) in READ_EFFECTS:
        try:
            counts, value = yield from perform(Together((counter, first)))
        except Exception:
            flow.close()
            raise
        _enforce(active, counter, counts, now_ms)
        return (yield from _resume(flow, value))
    _enforce(active, counter, (yield from perform(counter)), now_ms)
    try:
        value = yield first
    except Exception as exc:
        return (yield from _resume(flow, None, exc))
    return (yield from _resume(flow, value))


def _resume(flow: Flow[T], value: Any, error: Exception | None = None) -> Flow[T]:
    """Go on with a flow that already yielded once, forwarding results and thrown errors (like `yield from`)."""
    while True:
        try:
            effect = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as done:
            return cast(T, done.value)
        value, error = None, None
        try:
            value = yield effect
        except Exception as exc:
            error = exc


def _enforce(active: Checks, counter: HitRateLimits, counts: tuple[int, ...], now_ms: int) -> None:
    hits = counter.hits
    for (rule, _subject), hit, count in zip(active, hits, counts, strict=True):
        if count > rule.limit:
            retry_after = max(1, math.ceil((hit.expires_at_millis - now_ms) / 1000))
            raise KnownError(
                ErrorCode.RATE_LIMITED,
                details={
                    "rule": rule.name,
                    "limit": rule.limit,
                    "window_seconds": rule.window_ms // 1000,
                    "retry_after_seconds": retry_after,
                },
                headers=(
                    ("retry-after", str(retry_after)),
                    ("ratelimit-limit", str(rule.limit)),
                    ("ratelimit-remaining", "0"),
                    ("ratelimit-reset", str(retry_after)),
                ),
            )


def request_checks(
    auth: Auth | None, client: str | None, route_key: tuple[str, str]
) -> list[tuple[RateLimitRule, str]]:
    """The rules a request counts against, before its body is looked at."""
    config = auth.project.config if auth is not None else None
    checks: list[tuple[RateLimitRule, str]] = []
    untrusted = auth is None or auth.access_type is AccessType.CLIENT
    if untrusted and client:
        checks.append((rule_for("ip", config), client))
        sensitive = ROUTE_RULES.get(route_key)
        if sensitive is not None:
            checks.append((rule_for(sensitive, config), client))
    if auth is not None:
        checks.append((rule_for("project", config), auth.project.id))
    return checks
