"""The memory store's core: the per-project data (`Tenant`), `MemoryStore` (one lock around each effect) and its
asyncio face, and the registry of handlers by effect type (filled by the other modules)."""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from identity_proto.effects import (
    StorageEffect,
    Together,
    WebhookEndpoint,
)
from identity_proto.effects.webhooks import EVENTS_HARD_CAP, EVENTS_IDLE_TTL_MS, message_id, new_message_tag
from identity_proto.records import (
    ApiKey,
    ApiKeyType,
    ClockOverride,
    ContactChannel,
    Email,
    Membership,
    Project,
    Session,
    StoredEvent,
    Team,
    User,
    VerificationCode,
)

if TYPE_CHECKING:
    from backends.memory.webhooks import DeliveryRow  # webhooks

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

_Handler = Callable[["MemoryStore", Any], Any]
_HANDLERS: dict[type[StorageEffect[Any]], _Handler] = {}


def _performs(effect_type: type[E]) -> Callable[[Callable[[MemoryStore, E], Any]], Callable[[MemoryStore, E], Any]]:
    """Register the function below as this store's implementation of `effect_type`."""

    def register(handler: Callable[[MemoryStore, E], Any]) -> Callable[[MemoryStore, E], Any]:
        _HANDLERS[effect_type] = handler
        return handler

    return register


@dataclass
class Tenant:
    """Everything one project holds besides its record."""

    users: dict[str, User] = field(default_factory=dict)
    #: (signed_up_at_millis, id) of every user, sorted: the order of ListUsers.
    user_order: list[tuple[int, str]] = field(default_factory=list)
    #: auth e-mail -> user id, for users whose primary e-mail signs them in.
    email_index: dict[str, str] = field(default_factory=dict)
    #: code hash -> code; nonce hash -> attempts so far (from 0 when a code has it, as on Redis), kept while a code
    #: has that nonce; a nonce no code has (attempts made it) -> when its count goes (`ORPHAN_NONCE_TTL_MS` after).
    codes: dict[str, VerificationCode] = field(default_factory=dict)
    nonce_attempts: dict[str, int] = field(default_factory=dict)
    orphan_nonces: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    #: refresh token hash -> session id; user id -> session ids.
    session_by_token: dict[str, str] = field(default_factory=dict)
    user_sessions: dict[str, set[str]] = field(default_factory=dict)
    outbox: deque[Email] = field(default_factory=deque)
    teams: dict[str, Team] = field(default_factory=dict)
    #: (team id, user id) -> membership, in creation order (dicts keep insertion order).
    memberships: dict[tuple[str, str], Membership] = field(default_factory=dict)
    codes_created: int = 0
    sessions_created: int = 0
    #: user id -> the project permission ids they hold directly (only users holding any).
    project_grants: dict[str, set[str]] = field(default_factory=dict)
    #: key id -> key; key hash -> key id; (type, owner id) -> ids of the owner's keys.
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    api_key_by_hash: dict[str, str] = field(default_factory=dict)
    owner_api_keys: dict[tuple[ApiKeyType, str], set[str]] = field(default_factory=dict)

    def drop_codes(self, code_hashes: list[str]) -> None:
        """Forget these codes, and the attempt counts of their nonces that no other code has (one pass)."""
        codes = self.codes
        nonces = {codes.pop(code_hash).nonce_hash for code_hash in code_hashes if code_hash in codes}
        if nonces:
            nonces.difference_update(code.nonce_hash for code in codes.values())
            for nonce_hash in nonces:
                self.nonce_attempts.pop(nonce_hash, None)

    def drop_session(self, session_id: str) -> bool:
        """Forget a session and its indexes; whether it was there."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        self.session_by_token.pop(session.refresh_token_hash, None)
        held = self.user_sessions.get(session.user_id)
        if held is not None:
            held.discard(session_id)
            if not held:
                del self.user_sessions[session.user_id]
        return True

    def drop_api_keys(self, key_type: ApiKeyType, owner_id: str) -> None:
        """Remove every key of one owner (with its user or team: called under the store's lock by the deletion)."""
        for key_id in self.owner_api_keys.pop((key_type, owner_id), ()):
            key = self.api_keys.pop(key_id, None)
            if key is not None:
                self.api_key_by_hash.pop(key.key_hash, None)

    #: invitation id -> the code hash of the invitation (its record is in `codes`).
    team_invitations: dict[str, str] = field(default_factory=dict)
    #: user id -> channel id -> the user's stored (non-primary) contact channels. The primary channel is the
    #: user's `primary_email*` fields; the e-mail index holds every auth channel's address.
    channels: dict[str, dict[str, ContactChannel]] = field(default_factory=dict)
    #: (kind, key) -> the project's short-lived values (outer codes) and when they expire (`operations`).
    short_lived: dict[tuple[str, str], tuple[str, int | None]] = field(default_factory=dict)
    #: The OAuth index: `oauth_index_key(provider id, account id)` of every sign-in account -> its user's id.
    oauth_index: dict[str, str] = field(default_factory=dict)
    #: The passkey index: every passkey's credential id -> its user's id.
    passkey_index: dict[str, str] = field(default_factory=dict)
    #: account row id -> the row's sealed provider tokens.
    provider_tokens: dict[str, str] = field(default_factory=dict)

    #: Every event recorded with a change, oldest first (see `identity_proto.events`; `record_event` appends).
    events: list[StoredEvent] = field(default_factory=list)
    event_seq: int = 0
    #: The tag of this project's message ids (`identity_proto.events.message_id`): random for each project of each
    #: process, so that sequence numbers counted again elsewhere or after a restart never make an id seen before.
    #: Not data: two tenants holding the same records are equal whatever their tags (an empty one is `Tenant()`).
    event_tag: str = field(default_factory=lambda: new_message_tag(secrets), compare=False)

    def record_event(self, event_type: str, *, record: Any = None, team: Any = None, ids: tuple[str, ...] = ()) -> None:
        """Record an event of this project's (a commit's `Announce`, or a test event: under the store's lock, in the
        same step as the change)."""
        self.event_seq += 1
        now = _wall_ms()
        events = self.events
        # The bounds of a project no delivery loop trims, as on Redis (`EVENTS_HARD_CAP`, `EVENTS_IDLE_TTL_MS`).
        if events and now - events[-1].created_at_millis > EVENTS_IDLE_TTL_MS:
            events.clear()
        event_id = message_id(self.event_tag, f"{self.event_seq:012d}")
        events.append(StoredEvent(event_id, event_type, now, record=record, team=team, ids=ids))
        if len(events) > EVENTS_HARD_CAP:
            del events[: len(events) - EVENTS_HARD_CAP]

    #: endpoint id -> endpoint; endpoint id -> the `event_seq` when it was created (it gets later events only).
    webhook_endpoints: dict[str, WebhookEndpoint] = field(default_factory=dict)
    webhook_endpoint_from: dict[str, int] = field(default_factory=dict)
    #: (endpoint id, message id) -> the delivery with its claim.
    deliveries: dict[tuple[str, str], DeliveryRow] = field(default_factory=dict)
    #: The fan-out cursor: the `event_seq` of the last event fanned out.
    fanout_seq: int = 0
    #: The store this project's data is in (a commit's writes of what is not one project's: its record, the set of
    #: projects with webhook endpoints).
    store: Any = field(default=None, compare=False, repr=False)
    project_id: str = field(default="", compare=False, repr=False)


def _wall_ms() -> int:
    """The store's clock (events' `created_at_millis`: retention only)."""
    return time.time_ns() // 1_000_000


class MemoryStore:
    """A thread-safe, in-process store."""

    #: The effect types this store performs (the contract tests check that it is all of them).
    performs = _HANDLERS

    def __init__(self, *, keep_every_event: bool = False) -> None:
        self._lock = threading.RLock()
        #: Whether a commit records its events when the project has no webhook endpoint. The service's stores do not
        #: (no endpoint is owed them: an endpoint gets only the events recorded after it, so they would never be
        #: delivered, and a project without endpoints would keep one per write); the fake's does, for
        #: `project.events()`, within the bounds `record_event` applies.
        self.keeps_every_event = keep_every_event
        self.projects: dict[str, Project] = {}
        self.tenants: dict[str, Tenant] = {}
        self.clock_override: ClockOverride | None = None
        #: rate-limit counter key -> (count, expires at), swept as they expire.
        self.rate_counters: dict[str, tuple[int, int]] = {}
        # Short-lived values of no project (OAuth states, the mock provider's): (kind, key) -> (value, expiry). The
        # callback knows no project, and Redis keeps states under their own hash tag, so a project's reset leaves
        # them, in both stores, to be taken (the flow then finds the project's data gone) or forgotten.
        self.short_lived: dict[tuple[str, str], tuple[str, int | None]] = {}
        self.short_lived_puts = 0
        #: The ids of the projects that have at least one webhook endpoint (`ListWebhookProjects`).
        self.webhook_projects: set[str] = set()

    def __deepcopy__(self, memo: dict[int, Any]) -> MemoryStore:
        return self  # a copy of a project's data (`Tenant.store`) is still this store's

    def tenant(self, project_id: str) -> Tenant:
        """The data of one project (created empty on first use)."""
        found = self.tenants.get(project_id)
        if found is None:
            found = self.tenants[project_id] = Tenant(store=self, project_id=project_id)
        return found

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        handler = _handler(effect)
        with self._lock:
            return cast(T, handler(self, effect))

    def close(self) -> None:
        """Nothing to release."""


class AsyncMemoryStore:
    """The asyncio face of a `MemoryStore` (the same data; effects never block, so no thread is needed)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.sync = store if store is not None else MemoryStore()

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        return self.sync.apply(effect)

    async def aclose(self) -> None:
        """Nothing to release."""


@_performs(Together)
def _together(store: MemoryStore, effect: Together) -> tuple[Any, ...]:
    # Under the store's lock (held by `apply`), one after the other: each effect atomic, as its own contract says.
    return tuple(_handler(inner)(store, inner) for inner in effect.effects)


def _handler(effect: StorageEffect[Any]) -> _Handler:
    handler = _HANDLERS.get(type(effect))
    if handler is None:
        raise TypeError(f"MemoryStore cannot perform {type(effect).__name__}")
    return handler
