"""Rate limits (our spec: they exist, vary by endpoint and access type, and answer 429 with retry headers).

Fixed-window counters kept in the store, so every worker sharing it counts together. Each rule below has a
default; a project may change or disable any of them (`config.rate_limits`), and a host may switch them off for a
whole process (`IDENTITY_RATE_LIMITS=off`). The per-nonce limit of 20 attempts on a one-time code is not a rate
limit: it always applies.

| rule | counts | per | default |
|---|---|---|---|
| `ip` | every request with client access or none | client address | 600 / 60 s |
| `project` | every request of a project with client access | project | 30000 / 60 s |
| `project_server` | every request of a project with server or admin access | project | 30000 / 60 s |
| `sign_in_ip` | code, MFA, password, OAuth sign-in; resets, code checks (client or none) | client address | 30 / 60 s |
| `send_code_ip` | sign-in and reset codes sent, password sign-up (client or none) | client address | 10 / 60 s |
| `send_code_email` | sign-in codes mailed; reset codes asked for (any access) | project and address | 5 / 600 s |
| `sign_in_failures` | failed password and MFA sign-ins, wrong old passwords | project and account | 10 / 600 s |
| `anonymous_sign_up_ip` | anonymous sign-ups (client access or none) | client address | 10 / 60 s |
| `api_key_check_ip` | API key checks (any access: server and admin only reach them) | client address | 3000 / 60 s |
| `send_invitation_email` | team invitations mailed (any access; when one goes out) | project and address | 5 / 600 s |
| `provider_token_ip` | connected accounts' access-token requests (client access or none) | client address | 60 / 60 s |
| `contact_channel_user` | contact channels a client creates (every attempt) | project and user | 10 / 3600 s |
| `contact_channel_address` | contact channels a client creates naming one address | project and address | 5 / 3600 s |

Contact channels: mailing a verification code (either route) counts as `send_code_ip` and, once the mail goes out,
`send_code_email` (one inbox, one budget, whatever the code is for); verifying a contact channel and checking its
code count as `sign_in_ip`; so do the OAuth callback and the OAuth code exchange. Creating one with client access
counts as `contact_channel_user` and `contact_channel_address` (the original has no such limit; a client may also
add at most 20 channels per user: `flows.contact_channels`).

A client address is counted by `address_bucket`: IPv4 addresses one by one, IPv6 addresses by their /64. Server
and admin access come from trusted backends, often many users behind one address: they are limited per project,
not per address, and on a budget of their own, so a flood of client traffic cannot lock the app's backend out.
`sign_in_failures` bounds guessing one account's password (or TOTP) from any number of addresses; one-time codes
are bounded per account by `send_code_email` times the 20 attempts each nonce allows.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from dataclasses import dataclass
from typing import TypeVar

from identity_proto.auth import AccessType, Auth
from identity_proto.effects import Flow, HitRateLimits, RateLimitHit, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.preconditions import Precondition, check_preconditions, guarded
from identity_proto.records import ProjectConfig

__all__ = [
    "DEFAULT_RULES",
    "ROUTE_RULES",
    "SECRET_CHECK_RULES",
    "FailureLimit",
    "RateLimitRule",
    "RequestCounters",
    "address_bucket",
    "check_under_limit",
    "count_event",
    "limit_not_reached",
    "rate_limit_precondition",
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
        RateLimitRule("project_server", 30_000, 60_000),
        RateLimitRule("sign_in_ip", 30, 60_000),
        RateLimitRule("send_code_ip", 10, 60_000),
        RateLimitRule("send_code_email", 5, 600_000),
        RateLimitRule("sign_in_failures", 10, 600_000),
        # anonymous users: each sign-up creates a user
        RateLimitRule("anonymous_sign_up_ip", 10, 60_000),
        RateLimitRule("api_key_check_ip", 3000, 60_000),
        # team invitations
        RateLimitRule("send_invitation_email", 5, 600_000),
        # OAuth accounts: a connected account's token may cost a call to the provider (check or refresh)
        RateLimitRule("provider_token_ip", 60, 60_000),
        # contact channels: a client's creations, per user and per address named (every attempt counts)
        RateLimitRule("contact_channel_user", 10, 3_600_000),
        RateLimitRule("contact_channel_address", 5, 3_600_000),
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
    # anonymous users
    ("POST", "/api/v1/auth/anonymous/sign-up"): "anonymous_sign_up_ip",
    # OAuth sign-in: the provider's callback presents its code (the token endpoint's authorization-code grant
    # counts itself: `flows.oauth`, so that refreshing tokens is not limited like signing in)
    ("GET", "/api/v1/auth/oauth/callback/{provider_id}"): "sign_in_ip",
    ("POST", "/api/v1/auth/oauth/callback/{provider_id}"): "sign_in_ip",
    # OAuth accounts: connected accounts' provider tokens (client access)
    (
        "POST",
        "/api/v1/connected-accounts/{user_id}/{provider_id}/{provider_account_id}/access-token",
    ): "provider_token_ip",
    ("POST", "/api/v1/connected-accounts/{user_id}/{provider_id}/access-token"): "provider_token_ip",
    ("POST", "/api/v1/auth/oauth/connected-accounts/{provider_id}/access-token"): "provider_token_ip",
}


#: API keys: routes that check a secret for a trusted backend (server or admin access), counted per client address
#: whatever the access type. The address is the backend's, so the default is generous; the SDK caches what a check
#: answered.
SECRET_CHECK_RULES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/user-api-keys/check"): "api_key_check_ip",
    ("POST", "/api/v1/team-api-keys/check"): "api_key_check_ip",
    # team invitations: sending one mails an address; the others check a secret (the invitation code)
    ("POST", "/api/v1/team-invitations/send-code"): "send_code_ip",
    ("POST", "/api/v1/team-invitations/accept"): "sign_in_ip",
    ("POST", "/api/v1/team-invitations/accept/check-code"): "sign_in_ip",
    ("POST", "/api/v1/team-invitations/accept/details"): "sign_in_ip",
    # passwords: sending a reset code mails; resetting and checking a reset code present a secret
    ("POST", "/api/v1/auth/password/send-reset-code"): "send_code_ip",
    ("POST", "/api/v1/auth/password/reset"): "sign_in_ip",
    ("POST", "/api/v1/auth/password/reset/check-code"): "sign_in_ip",
    # contact channels: mailing a verification code, presenting one
    ("POST", "/api/v1/contact-channels/send-verification-code"): "send_code_ip",
    ("POST", "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code"): "send_code_ip",
    ("POST", "/api/v1/contact-channels/verify"): "sign_in_ip",
    ("POST", "/api/v1/contact-channels/verify/check-code"): "sign_in_ip",
}


def rule_for(name: str, config: ProjectConfig | None) -> RateLimitRule:
    """The rule `name` as the project configures it (its default otherwise)."""
    if config is not None:
        for setting in config.rate_limits:
            if setting.name == name:
                return RateLimitRule(name, setting.limit, setting.window_seconds * 1000)
    return DEFAULT_RULES[name]


Checks = list[tuple[RateLimitRule, str]]


def _hits(checks: Checks, now_ms: int, amount: int = 1) -> tuple[Checks, HitRateLimits | None]:
    active = [(rule, subject) for rule, subject in checks if rule.limit > 0]
    hits = []
    for rule, subject in active:
        window_start = now_ms - now_ms % rule.window_ms
        key = f"rl:{rule.name}:{subject}:{window_start}"
        hits.append(RateLimitHit(key, window_start + rule.window_ms, amount))
    return active, (HitRateLimits(tuple(hits), now_ms) if hits else None)


def rate_limit_precondition(checks: Checks, *, now_ms: int) -> Precondition[tuple[int, ...]] | None:
    """Count this request against each (rule, subject); the check raises 429 RATE_LIMITED (with Retry-After and
    RateLimit-* headers) for the first rule it exceeds. None when no rule is active."""
    active, counter = _hits(checks, now_ms)
    if counter is None:
        return None
    limits = tuple([rule.limit for rule, _subject in active])
    return Precondition(counter, functools.partial(_enforce, active, counter, now_ms=now_ms), limits=limits)


@dataclass(frozen=True, slots=True)
class _Counted:
    """What a kind of request counts against in one set of windows (`RequestCounters`)."""

    config: ProjectConfig | None  # the project's configuration it was decided on (the entry is stale once replaced)
    valid_from: int  # the latest window start of its rules: before it, the windows were others
    valid_until: int  # the earliest window end
    active: Checks
    hits: tuple[RateLimitHit, ...]
    limits: tuple[int, ...]


#: A kind of request, as far as rate limits go: project id, access type, client address, route (method, pattern).
_Kind = tuple[str | None, AccessType | None, str | None, tuple[str, str]]


class RequestCounters:
    """The counters each request counts against (`request_checks`, then `rate_limit_precondition`), remembered per
    kind of request (project, access type, client address, route) for as long as their windows last: the rules,
    the counters' keys and their expiries are the same for every request of a kind within a window, so a request
    only makes its own `HitRateLimits` and `Precondition`. An entry decided on a project configuration since replaced
    is decided again. At most `size` kinds are kept (then all are forgotten: they are cheap to decide again)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: dict[_Kind, _Counted] = {}

    def precondition(
        self, auth: Auth | None, client: str | None, route_key: tuple[str, str], *, now_ms: int
    ) -> Precondition[tuple[int, ...]] | None:
        """`rate_limit_precondition(request_checks(auth, client, route_key), now_ms=now_ms)`, remembered."""
        key = (
            (None, None, client, route_key) if auth is None else (auth.project.id, auth.access_type, client, route_key)
        )
        entry = self._entries.get(key)
        config = None if auth is None else auth.project.config
        if entry is None or entry.config is not config or not entry.valid_from <= now_ms < entry.valid_until:
            entry = self._decide(key, auth, client, route_key, config, now_ms)
        if not entry.hits:
            return None
        counter = HitRateLimits(entry.hits, now_ms)
        check = functools.partial(_enforce, entry.active, counter, now_ms=now_ms)
        return Precondition(counter, check, limits=entry.limits)

    def _decide(
        self,
        key: _Kind,
        auth: Auth | None,
        client: str | None,
        route_key: tuple[str, str],
        config: ProjectConfig | None,
        now_ms: int,
    ) -> _Counted:
        active, counter = _hits(request_checks(auth, client, route_key), now_ms)
        starts = [now_ms - now_ms % rule.window_ms for rule, _subject in active]
        entry = _Counted(
            config,
            max(starts, default=now_ms),
            min((start + rule.window_ms for start, (rule, _s) in zip(starts, active, strict=True)), default=now_ms + 1),
            active,
            counter.hits if counter is not None else (),
            tuple([rule.limit for rule, _subject in active]),
        )
        if len(self._entries) >= self.size:
            self._entries.clear()
        self._entries[key] = entry
        return entry


def limit_not_reached(rule: RateLimitRule, subject: str, *, now_ms: int) -> Precondition[tuple[int, ...]] | None:
    """A precondition that `subject` was counted fewer than `rule.limit` times in the current window (429
    RATE_LIMITED otherwise). It reads the counter without counting: limits on outcomes (a mail sent, a sign-in
    failed) look first, act, and count with `count_event` once the outcome is known. Guard a read with it
    (`preconditions.guarded`) and both go in one trip."""
    active, counter = _hits([(rule, subject)], now_ms, amount=0)
    if counter is None:
        return None
    return Precondition(
        counter,
        lambda counts: _enforce(active, counter, tuple(c + 1 for c in counts), now_ms=now_ms),
        limits=tuple([rule.limit - 1 for rule, _subject in active]),  # looked at: the next count must fit
    )


def check_under_limit(rule: RateLimitRule, subject: str, *, now_ms: int) -> Flow[None]:
    """Raise 429 RATE_LIMITED now when `subject` reached `rule.limit` in the current window (`limit_not_reached`)."""
    precondition = limit_not_reached(rule, subject, now_ms=now_ms)
    if precondition is not None:
        yield from check_preconditions([precondition])


def count_event(rule: RateLimitRule, subject: str, *, now_ms: int, enforce: bool) -> Flow[None]:
    """Count one event of `subject` against `rule`; with `enforce`, raise 429 when that takes it past the limit
    (concurrent requests that all passed `check_under_limit`: only those within the limit go on)."""
    active, counter = _hits([(rule, subject)], now_ms)
    if counter is not None:
        counts = yield from perform(counter)
        if enforce:
            _enforce(active, counter, counts, now_ms=now_ms)


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FailureLimit:
    """At most `rule.limit` failures of `subject` per window of `rule` (a rule with limit 0 limits nothing)."""

    rule: RateLimitRule
    subject: str
    now_ms: int

    @classmethod
    def sign_in(cls, enabled: bool, config: ProjectConfig, subject: str, *, now_ms: int) -> FailureLimit:
        """The `sign_in_failures` rule for one account (`enabled`: rate limits are on in this process)."""
        rule = rule_for("sign_in_failures", config)
        return cls(rule if enabled else RateLimitRule(rule.name, 0, rule.window_ms), subject, now_ms)

    def guard(self, flow: Flow[T]) -> Flow[T]:
        """`flow` (best a read: they share a trip), refused with 429 when the limit is reached already."""
        precondition = limit_not_reached(self.rule, self.subject, now_ms=self.now_ms)
        return guarded(flow, [precondition] if precondition is not None else [])

    def count(self) -> Flow[None]:
        """Count one failure."""
        return count_event(self.rule, self.subject, now_ms=self.now_ms, enforce=False)


def _enforce(active: Checks, counter: HitRateLimits, counts: tuple[int, ...], *, now_ms: int) -> None:
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
        bucket = address_bucket(client)
        checks.append((rule_for("ip", config), bucket))
        sensitive = ROUTE_RULES.get(route_key)
        if sensitive is not None:
            checks.append((rule_for(sensitive, config), bucket))
    secret_check = SECRET_CHECK_RULES.get(route_key)  # API keys
    if secret_check is not None and client:
        checks.append((rule_for(secret_check, config), address_bucket(client)))
    if auth is not None:
        # The app's own backend has a budget of its own: a flood of client requests cannot starve it.
        rule = "project" if untrusted else "project_server"
        checks.append((rule_for(rule, config), auth.project.id))
    return checks


@functools.lru_cache(maxsize=4096)
def address_bucket(address: str) -> str:
    """The subject a client address is counted as: an IPv4 address itself, an IPv6 address its /64 network (one
    subscriber is routinely given a whole /64, so per-address limits on IPv6 would give an attacker 2^64 keys).
    IPv4-mapped IPv6 addresses count as their IPv4 address; anything unparsable (a Unix socket peer) as itself."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)
