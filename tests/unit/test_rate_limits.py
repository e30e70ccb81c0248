"""Rate limits: per address and per project, stricter on sign-in and code sending, per target address for codes;
429 with Retry-After and RateLimit-* headers; configurable per project and switchable off per process."""

from __future__ import annotations

from identity_proto import Service, ServiceOptions
from tests.support import Harness, Reply, admin_headers, client_headers, server_headers
from tests.unit.test_sign_in import code_for

ATTACKER = "203.0.113.7"


def _guess(h: Harness, code: str, client: str = ATTACKER) -> Reply:
    return h.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": code}, client=client)


def test_a_guessing_attack_is_stopped_by_the_nonce_then_rate_limited_per_address() -> None:
    h = Harness()
    nonce = code_for(h)[6:]
    statuses = [_guess(h, f"{i:06d}" + nonce).known_error for i in range(30)]
    assert statuses[:20] == ["VERIFICATION_CODE_NOT_FOUND"] * 20  # wrong guesses: not found
    # the nonce itself is spent after 20 attempts (even the right code would now fail), and the address may make
    # 30 sign-in attempts a minute:
    limited = _guess(h, "000000" + nonce)
    assert (limited.status, limited.known_error) == (429, "RATE_LIMITED")
    assert limited.json["details"] == {
        "rule": "sign_in_ip",
        "limit": 30,
        "window_seconds": 60,
        "retry_after_seconds": 60,
    }
    assert limited.headers["retry-after"] == "60"
    assert limited.headers["ratelimit-limit"] == "30"
    assert limited.headers["ratelimit-remaining"] == "0"
    assert limited.headers["ratelimit-reset"] == "60"
    assert _guess(h, "000000" + nonce, client="198.51.100.1").known_error != "RATE_LIMITED"  # others are not blocked
    h.advance(60_000)
    assert _guess(h, "000000" + nonce).known_error == "VERIFICATION_CODE_NOT_FOUND"


def test_codes_to_one_address_are_limited_from_any_address() -> None:
    h = Harness()
    body = {"email": "victim@example.com", "callback_url": "http://localhost/cb"}
    for i in range(5):
        sent = h.request(
            "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json=body, client=f"192.0.2.{i}"
        )
        assert sent.status == 200
    flood = h.request("POST", "/api/v1/auth/otp/send-sign-in-code", server_headers(), json=body, client="192.0.2.99")
    assert (flood.status, flood.json["details"]["rule"]) == (429, "send_code_email")
    assert len(h.outbox("victim@example.com")) == 5


def test_server_access_is_limited_per_project_not_per_address() -> None:
    h = Harness()
    h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"ip": {"limit": 3, "window_seconds": 60}}}},
    )
    for _ in range(10):
        assert h.request("GET", "/api/v1/projects/current", server_headers(), client=ATTACKER).status == 200
    statuses = [
        h.request("GET", "/api/v1/projects/current", client_headers(), client=ATTACKER).status for _ in range(4)
    ]
    assert statuses == [200, 200, 200, 429]


def test_a_project_can_raise_or_switch_off_a_rule() -> None:
    h = Harness()
    reply = h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"sign_in_ip": {"limit": 0, "window_seconds": 60}}}},
    )
    assert reply.json["config"]["rate_limits"] == {"sign_in_ip": {"limit": 0, "window_seconds": 60}}
    nonce = code_for(h)[6:]
    assert all(_guess(h, f"{i:06d}" + nonce).status != 429 for i in range(40))
    bad = h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"nope": {"limit": 1, "window_seconds": 1}}}},
    )
    assert bad.known_error == "SCHEMA_ERROR"
    assert "body.config.rate_limits has unknown rules: nope" in bad.json["details"]["message"]


def test_rate_limits_can_be_off_for_a_whole_process() -> None:
    h = Harness(service=Service(ServiceOptions(rate_limits_enabled=False, password_rounds=4)))
    nonce = code_for(h)[6:]
    assert all(_guess(h, f"{i:06d}" + nonce).status != 429 for i in range(40))


def test_behind_a_trusted_proxy_the_forwarded_address_counts() -> None:
    h = Harness(service=Service(ServiceOptions(trusted_proxy_header="x-forwarded-for", password_rounds=4)))
    nonce = code_for(h)[6:]
    forwarded = client_headers(**{"x-forwarded-for": f"10.0.0.1, {ATTACKER}"})
    for i in range(30):
        h.request("POST", "/api/v1/auth/otp/sign-in", forwarded, json={"code": f"{i:06d}" + nonce}, client="127.0.0.1")
    limited = h.request("POST", "/api/v1/auth/otp/sign-in", forwarded, json={"code": "x" * 45}, client="127.0.0.1")
    assert limited.status == 429
    other = client_headers(**{"x-forwarded-for": "198.51.100.9"})
    assert (
        h.request("POST", "/api/v1/auth/otp/sign-in", other, json={"code": "x" * 45}, client="127.0.0.1").status == 404
    )


class _Recording:
    """A store that remembers the effects it performed (to see what travels together)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.seen: list[object] = []

    def apply(self, effect: object) -> object:
        self.seen.append(effect)
        return self.inner.apply(effect)  # type: ignore[attr-defined]

    def close(self) -> None:
        pass


def test_the_counters_ride_along_with_the_first_read_and_never_precede_a_write_they_refuse() -> None:
    from identity_proto import run
    from identity_proto.effects import Admit, Commit, HitRateLimits, LoadSession, LoadUserWithTeam, Together
    from identity_proto.http import Request
    from tests.unit.test_sign_in import sign_in

    h = Harness()
    token = sign_in(h, code_for(h)).json["access_token"]
    me = tuple(client_headers(**{"x-service-access-token": token}).items())
    recording = _Recording(h.store)

    def call(method: str, body: bytes = b"") -> int:
        headers = me + ((("content-type", "application/json"),) if body else ())
        request = Request(method, "/api/v1/users/me", headers, body, "", ATTACKER)
        return run(h.service.handle(request, h.now_ms, h.entropy), recording).status  # type: ignore[arg-type]

    assert call("GET") == 200
    (read,) = [e for e in recording.seen if isinstance(e, Together)]
    # the counters and the access token's session check (identity_proto.preconditions) ride with the read
    assert [type(e) for e in read.effects] == [HitRateLimits, LoadSession, LoadUserWithTeam]
    recording.seen.clear()
    assert call("PATCH", b'{"display_name": "x"}') == 200
    # a blind PATCH's first effect is its commit, which checks the session itself (a guard): the counters go with
    # it, in one step that writes only when they are within their limits (`Admit`)
    (admit,) = recording.seen
    assert isinstance(admit, Admit)
    assert isinstance(admit.counter, HitRateLimits)
    assert isinstance(admit.effect, Commit)
    h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"ip": {"limit": 1, "window_seconds": 60}}}},
    )
    h.advance(60_000)
    assert call("GET") == 200
    recording.seen.clear()
    assert call("PATCH", b'{"display_name": "refused"}') == 429
    (refused,) = recording.seen
    assert isinstance(refused, Admit)  # the store was asked, and the counter refused it: no write
    assert h.store.tenant(h.project().id).users[next(iter(h.store.tenant(h.project().id).users))].display_name == "x"


def test_request_counters_are_decided_once_per_kind_of_request_and_window() -> None:
    """`RequestCounters` remembers what a kind of request counts against: the same rules and keys for every request
    of the kind in the same windows; decided again in the next window, on a replaced project configuration, for
    another client or route; and forgotten all at once when full."""
    import dataclasses

    from identity_proto.auth import AccessType, Auth
    from identity_proto.ratelimits import RequestCounters, rate_limit_precondition, request_checks

    h = Harness()
    auth = Auth(AccessType.CLIENT, h.project(), "main")
    route = ("POST", "/api/v1/auth/otp/sign-in")
    counters = RequestCounters(size=3)
    now = 1_800_000_000_000 - 1_000  # a second before a minute's end

    def keys(precondition: object) -> list[str]:
        return [hit.key for hit in precondition.effect.hits]  # type: ignore[attr-defined]

    first = counters.precondition(auth, ATTACKER, route, now_ms=now)
    expected = rate_limit_precondition(request_checks(auth, ATTACKER, route), now_ms=now)
    assert first is not None
    assert expected is not None
    assert keys(first) == keys(expected)
    assert first.limits == expected.limits == (600, 30, 30_000)
    again = counters.precondition(auth, ATTACKER, route, now_ms=now + 999)
    assert again is not None
    assert again.effect.hits is first.effect.hits  # type: ignore[attr-defined] # remembered, not decided again
    assert again.effect.now_ms == now + 999  # type: ignore[attr-defined]
    later = counters.precondition(auth, ATTACKER, route, now_ms=now + 1_000)  # the next minute: other windows
    assert later is not None
    assert keys(later) == keys(rate_limit_precondition(request_checks(auth, ATTACKER, route), now_ms=now + 1_000))
    assert keys(later) != keys(first)
    config = dataclasses.replace(auth.project.config, rate_limits=())
    replaced = Auth(AccessType.CLIENT, dataclasses.replace(auth.project, config=config), "main")
    assert counters.precondition(replaced, ATTACKER, route, now_ms=now + 1_000).effect.hits is not later.effect.hits  # type: ignore[union-attr]
    assert keys(counters.precondition(auth, "198.51.100.1", route, now_ms=now + 1_000))[0].endswith(
        ":198.51.100.1:1800000000000"
    )
    assert len(counters._entries) <= 3
    assert counters.precondition(None, None, ("GET", "/api/v1/health"), now_ms=now) is None  # counts nothing
