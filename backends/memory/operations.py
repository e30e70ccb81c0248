"""The memory store's specific operations (backends/README.md: those that do not read, decide and write): using a
refresh token, presenting a one-time code, short-lived values (OAuth states, outer codes, the mock provider's
records), rate-limit counters and a write admitted by them (`Admit`), deleting a project, and dev/test mode (the
clock override, a project's reset)."""

from __future__ import annotations

from backends.memory.store import MemoryStore, Tenant, _handler, _performs
from identity_proto.effects import (
    AddressHolder,
    Admission,
    Admit,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    DeleteProject,
    HitRateLimits,
    LoadClockOverride,
    PutShortLived,
    ResetProjectData,
    SetClockOverride,
    TakeShortLived,
    UseRefreshToken,
)
from identity_proto.effects.codes import ORPHAN_NONCE_TTL_MS
from identity_proto.records import ClockOverride, Session, User, replaced


@_performs(DeleteProject)
def _delete_project(store: MemoryStore, effect: DeleteProject) -> bool:
    store.tenants.pop(effect.project_id, None)
    store.webhook_projects.discard(effect.project_id)  # webhooks
    return store.projects.pop(effect.project_id, None) is not None


@_performs(UseRefreshToken)
def _use_refresh_token(store: MemoryStore, effect: UseRefreshToken) -> tuple[Session, User] | None:
    tenant = store.tenant(effect.project_id)
    session_id = tenant.session_by_token.get(effect.refresh_token_hash)
    session = None if session_id is None else tenant.sessions.get(session_id)
    user = None if session is None else tenant.users.get(session.user_id)
    if session is None or user is None:
        return None
    session = replaced(session, {"last_used_at_millis": effect.now_ms})
    tenant.sessions[session.id] = session
    user = replaced(user, {"last_active_at_millis": max(user.last_active_at_millis, effect.now_ms)})
    tenant.users[user.id] = user
    return session, user


@_performs(AttemptVerificationCode)
def _attempt_code(store: MemoryStore, effect: AttemptVerificationCode) -> CodeAttempt:
    tenant, nonce_hash = store.tenant(effect.project_id), effect.nonce_hash
    counts = tenant.nonce_attempts
    before = counts.get(nonce_hash)
    if before is None:  # no code has this nonce (PutCode starts its count): counted for a while only
        before = 0
        _count_orphan(tenant, nonce_hash, effect.now_ms)
    counts[nonce_hash] = before + 1
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.purpose != effect.purpose:
        return CodeAttempt(CodeOutcome.NOT_FOUND)
    if effect.now_ms >= code.expires_at_millis:
        return CodeAttempt(CodeOutcome.EXPIRED, code)
    if code.used:
        return CodeAttempt(CodeOutcome.ALREADY_USED, code)
    if before >= effect.max_attempts:
        return CodeAttempt(CodeOutcome.MAX_ATTEMPTS_REACHED, code)
    if effect.consume:
        tenant.codes[code.code_hash] = replaced(code, {"used": True})
    holder = None
    if effect.with_holder and code.email is not None:
        holder_id = tenant.email_index.get(code.email)
        holder = AddressHolder(holder_id, None if holder_id is None else tenant.users.get(holder_id))
    return CodeAttempt(CodeOutcome.OK, code, holder)


#: Orphan nonce counts (attempts on nonces no code has: guesses) are swept when this many exist.
_ORPHANS_SWEEP_AT = 1024


def _count_orphan(tenant: Tenant, nonce_hash: str, now_ms: int) -> None:
    orphans = tenant.orphan_nonces
    orphans[nonce_hash] = now_ms + ORPHAN_NONCE_TTL_MS
    if len(orphans) >= _ORPHANS_SWEEP_AT and len(orphans) % _ORPHANS_SWEEP_AT == 0:
        for gone in [n for n, expires in orphans.items() if expires <= now_ms]:
            del orphans[gone]
            tenant.nonce_attempts.pop(gone, None)


#: Expired short-lived values are swept every this many puts (the core judges expiry; this only frees memory).
_SWEEP_EVERY = 256


def _short_lived(store: MemoryStore, project_id: str | None) -> dict[tuple[str, str], tuple[str, int | None]]:
    # A project's values are its tenant's (a reset drops them); the others are the store's.
    return store.short_lived if project_id is None else store.tenant(project_id).short_lived


@_performs(PutShortLived)
def _put_short_lived(store: MemoryStore, effect: PutShortLived) -> bool:
    values, expires = _short_lived(store, effect.project_id), effect.expires_at_millis
    if (expires is not None and expires <= effect.now_ms) or (
        effect.only_if_absent and (effect.kind, effect.key) in values
    ):
        return False
    values[(effect.kind, effect.key)] = (effect.value, expires)
    store.short_lived_puts += 1
    if store.short_lived_puts % _SWEEP_EVERY == 0:
        for key in [k for k, (_, e) in values.items() if e is not None and e <= effect.now_ms]:
            del values[key]
    return True


@_performs(TakeShortLived)
def _take_short_lived(store: MemoryStore, effect: TakeShortLived) -> str | None:
    values = _short_lived(store, effect.project_id)
    found = values.get((effect.kind, effect.key)) if effect.keep else values.pop((effect.kind, effect.key), None)
    return None if found is None else found[0]


#: Expired counters are swept when this many exist (they are tiny; the sweep keeps memory bounded).
_RATE_SWEEP_AT = 10_000


@_performs(HitRateLimits)
def _hit_rate_limits(store: MemoryStore, effect: HitRateLimits) -> tuple[int, ...]:
    counters = store.rate_counters
    counts: list[int] = []
    for hit in effect.hits:
        count = counters.get(hit.key, (0, 0))[0] + hit.amount
        counters[hit.key] = (count, hit.expires_at_millis)
        counts.append(count)
    if len(counters) > _RATE_SWEEP_AT:
        for key in [k for k, (_, expires) in counters.items() if expires <= effect.now_ms]:
            del counters[key]
    return tuple(counts)


@_performs(Admit)
def _admit(store: MemoryStore, effect: Admit) -> Admission:
    # Under the store's lock (held by `apply`): the counts, the clock and the write are one step.
    counts = _hit_rate_limits(store, effect.counter) if effect.counter.hits else ()
    override = store.clock_override if effect.clock_gate else None
    if override is not None or not effect.admits(counts):
        return Admission(counts, False, None, override)
    inner = effect.effect
    return Admission(counts, True, _handler(inner)(store, inner))


@_performs(LoadClockOverride)
def _load_clock_override(store: MemoryStore, effect: LoadClockOverride) -> ClockOverride | None:
    return store.clock_override


@_performs(SetClockOverride)
def _set_clock_override(store: MemoryStore, effect: SetClockOverride) -> None:
    store.clock_override = effect.override


@_performs(ResetProjectData)
def _reset_project_data(store: MemoryStore, effect: ResetProjectData) -> bool:
    if effect.project_id not in store.projects:
        return False
    store.tenants.pop(effect.project_id, None)
    store.webhook_projects.discard(effect.project_id)  # webhooks
    return True
