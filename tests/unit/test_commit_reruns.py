"""The service re-runs a flow whose commit met a concurrent change (`identity_proto.service`): from its first read,
at most `MAX_COMMIT_ATTEMPTS` times, then 503 WRITE_CONFLICT; the request's preconditions (its rate-limit counters,
its session check) go with the first run only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backends.memory import MemoryStore
from identity_proto import Service, ServiceOptions
from identity_proto.effects import HitRateLimits, StorageEffect, Together
from identity_proto.effects.commit import Commit, Conflict
from identity_proto.service import MAX_COMMIT_ATTEMPTS
from tests.support import Harness, server_headers

GRACE = "grace@example.com"


@dataclass
class Contended(MemoryStore):
    """A memory store whose next `conflicts` commits are refused at their first guard, as if a concurrent write had
    broken it; it counts what it was asked. (A PATCH changing the primary e-mail reads the user first: its commit's
    first guard is that the fields it decided on still hold.)"""

    conflicts: int = 0
    commits: int = 0
    counted: int = 0
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        MemoryStore.__init__(self)

    def apply(self, effect: StorageEffect[Any]) -> Any:
        for part in effect.effects if isinstance(effect, Together) else (effect,):
            self.counted += isinstance(part, HitRateLimits)
        if isinstance(effect, Commit) and effect.guards:
            self.commits += 1
            if self.conflicts > 0:
                self.conflicts -= 1
                return Conflict(0)
        return super().apply(effect)


def _harness(*, rate_limits: bool) -> tuple[Harness, Contended]:
    store = Contended()
    options = ServiceOptions(password_rounds=4, rate_limits_enabled=rate_limits)
    return Harness(service=Service(options), store=store), store


def _new_user(h: Harness) -> str:
    created = h.request("POST", "/api/v1/users", server_headers(), json={"display_name": "Ada"})
    assert created.status == 201, created.json
    return str(created.json["id"])


def test_a_flow_whose_commit_meets_a_concurrent_change_runs_again_and_its_counters_count_once() -> None:
    h, store = _harness(rate_limits=True)
    user_id = _new_user(h)
    store.commits, store.counted, store.conflicts = 0, 0, MAX_COMMIT_ATTEMPTS - 1

    reply = h.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"primary_email": GRACE})

    assert reply.status == 200, reply.json
    assert reply.json["primary_email"] == GRACE
    assert h.user(user_id).primary_email == GRACE
    assert store.commits == MAX_COMMIT_ATTEMPTS  # every run committed; the last one held
    assert store.counted == 1  # the request's rate-limit counters went with the first run only


def test_a_flow_whose_commit_keeps_meeting_concurrent_changes_answers_503_write_conflict() -> None:
    h, store = _harness(rate_limits=False)
    user_id = _new_user(h)
    store.commits, store.conflicts = 0, MAX_COMMIT_ATTEMPTS

    reply = h.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"primary_email": GRACE})

    assert (reply.status, reply.known_error) == (503, "WRITE_CONFLICT")
    assert store.commits == MAX_COMMIT_ATTEMPTS
    assert h.user(user_id).primary_email is None  # nothing written
