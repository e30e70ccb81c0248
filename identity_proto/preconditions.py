"""Preconditions: storage checks every request must pass, sent with the request's first trip to the store.

Two things are true of nearly every request before its flow may act: it is within its rate limits (the counters
must be bumped), and the session its access token was issued for still exists (a token outlives a sign-out by up
to its lifetime otherwise). Each is a `Precondition`: a storage effect and a check of its result that raises a
`KnownError`. `guarded` runs a flow behind its preconditions without an extra round trip where it can:

- the flow's first effect only reads (`READ_EFFECTS`, a look at rate-limit counters that counts nothing, or a
  `Together` of them): preconditions and those reads go in one `Together` (on Redis, one pipeline); a failed check
  discards the reads;
- the flow's first effect is a `Commit` carrying every precondition's own guard (`Precondition.guard`: the
  session check is `SessionIsLive`, which fits on any commit): the commit goes alone, one trip, checking them in
  its own atomic step; a conflict at such a guard is that precondition's failure (nothing was written);
- the flow's first effect writes otherwise, and every precondition it does not carry is a rate-limit counter
  (`Precondition.limits`, nearly every request with rate limits on): they go with the write in one `Admit`, which
  the store performs as one step (on Redis, the write's script behind the counters), writing only when every
  counter is within its limit; a request over a limit so writes nothing and pays no trip of its own;
- otherwise (the session check before a write that cannot carry it, a `Together`, mail or computing first): the
  preconditions go alone first (together, one trip), so a request that fails one never writes anything;
- the flow fails before its first effect, or needs none: the preconditions still run, and a failed check wins
  over the flow's own error (an over-limit caller sees 429, a signed-out one ACCESS_TOKEN_EXPIRED, whatever else
  was wrong with the request).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from identity_proto.effects import (
    READ_EFFECTS,
    Admit,
    Commit,
    Conflict,
    Flow,
    HitRateLimits,
    RateLimitHit,
    StorageEffect,
    Together,
    perform,
)
from identity_proto.effects.commit import CommitGuard
from identity_proto.quickinit import quick_init

__all__ = ["Precondition", "check_preconditions", "guarded", "resume"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Precondition(Generic[R]):
    """`effect`, then `check` of its result: `check` raises a `KnownError` when the request may not go on.

    `guard`, when given, is the commit guard that checks the same thing: a flow whose first effect is a `Commit`
    carrying it needs no separate trip for this precondition; when the commit meets a conflict at that guard,
    `check` is called with None, on which a check with a guard must raise.

    `limits`, when given, says that `effect` is a `HitRateLimits` whose check fails exactly when some counter went
    past its limit (`limits[i]`: the most counter `i` may reach): the store can then decide it, and such a
    precondition rides with a flow's first write in one `Admit`."""

    effect: StorageEffect[R]
    check: Callable[[R], None]
    guard: CommitGuard | None = None
    limits: tuple[int, ...] | None = None


quick_init(Precondition)  # made per request (identity_proto.quickinit)


def check_preconditions(preconditions: Sequence[Precondition[Any]]) -> Flow[None]:
    """Run every precondition (in one trip) and raise the first failed check's error."""
    if not preconditions:
        return
    results = yield from _perform_all([p.effect for p in preconditions])
    _check(preconditions, results)


def guarded(flow: Flow[T], preconditions: Sequence[Precondition[Any]]) -> Flow[T]:
    """`flow`, behind `preconditions` (see the module docstring for when they share a trip with the flow)."""
    if not preconditions:
        return (yield from flow)
    try:
        first = next(flow)
    except StopIteration as done:  # a flow that needs no effect
        yield from check_preconditions(preconditions)
        return cast(T, done.value)
    except Exception:
        yield from check_preconditions(preconditions)  # failed requests count too
        raise
    carried = first.guards if isinstance(first, Commit) else ()
    reads = None if carried else _reads(first)
    if reads is not None:
        count = len(preconditions)
        try:
            answers = yield from perform(Together((*(p.effect for p in preconditions), *reads)))
            _check(preconditions, answers[:count])
        except Exception:
            flow.close()
            raise
        return (yield from resume(flow, tuple(answers[count:]) if isinstance(first, Together) else answers[count]))
    admitting: list[Precondition[Any]] | None = None
    if not _all_carried(preconditions, carried):
        # A write to the store (not a `Together`: its parts are sent together by the store itself) may take the
        # request's counters with it; otherwise the preconditions go first, alone.
        if type(first) is not Together and isinstance(first, StorageEffect):
            admitting = _counted(preconditions, carried)
        if admitting is None:
            try:
                yield from check_preconditions(preconditions)
            except Exception:
                flow.close()
                raise
    try:
        value = yield (first if admitting is None else _admit(cast(StorageEffect[Any], first), admitting))
    except Exception as exc:
        return (yield from resume(flow, None, exc))
    if admitting is not None:
        if not value.performed:
            flow.close()
            _check_counted(admitting, value.counts)
            raise AssertionError("the store refused a write that no counter's check refuses")
        value = value.result
    if isinstance(value, Conflict):
        broken = carried[value.guard]
        for precondition in preconditions:
            if precondition.guard is not None and precondition.guard == broken:
                flow.close()
                precondition.check(cast(Any, None))  # a check with a guard fails on None (the class's contract)
    return (yield from resume(flow, value))


def _all_carried(preconditions: Sequence[Precondition[Any]], carried: tuple[CommitGuard, ...]) -> bool:
    """Whether the first commit carries every precondition's guard (then they need no trip of their own)."""
    for precondition in preconditions:  # noqa: SIM110 - a loop: `all` of a generator costs one more on every write
        if precondition.guard is None or precondition.guard not in carried:
            return False
    return True


def _counted(
    preconditions: Sequence[Precondition[Any]], carried: tuple[CommitGuard, ...]
) -> list[Precondition[Any]] | None:
    """The preconditions the first write does not carry, when every one of them is a counter the store can decide
    (`Precondition.limits`): they then ride with the write in one `Admit`. None otherwise (they go first, alone)."""
    counted = []
    for precondition in preconditions:
        if precondition.guard is not None and precondition.guard in carried:
            continue
        if precondition.limits is None:
            return None
        counted.append(precondition)
    return counted


def _admit(first: StorageEffect[Any], counted: list[Precondition[Any]]) -> Admit:
    if len(counted) == 1:
        only = counted[0]
        return Admit(first, cast(HitRateLimits, only.effect), cast(tuple[int, ...], only.limits))
    hits: list[RateLimitHit] = []
    limits: list[int] = []
    for precondition in counted:
        counter = cast(HitRateLimits, precondition.effect)
        hits += counter.hits
        limits += cast(tuple[int, ...], precondition.limits)
    return Admit(first, HitRateLimits(tuple(hits), cast(HitRateLimits, counted[0].effect).now_ms), tuple(limits))


def _check_counted(counted: list[Precondition[Any]], counts: tuple[int, ...]) -> None:
    """Each counted precondition's check of its share of `counts` (the first over its limit raises)."""
    at = 0
    for precondition in counted:
        size = len(cast(HitRateLimits, precondition.effect).hits)
        precondition.check(counts[at : at + size])
        at += size


def _reads(effect: Any) -> tuple[StorageEffect[Any], ...] | None:
    """The reads `effect` is made of (itself, or the effects of a `Together` of reads); None when it writes."""
    if type(effect) in READ_EFFECTS:  # one read (most requests' first effect)
        return (effect,)
    if type(effect) is HitRateLimits:
        return (effect,) if _looks_only(effect) else None
    if not isinstance(effect, Together):
        return None
    parts = effect.effects
    if not parts or READ_EFFECTS.issuperset(map(type, parts)):
        return parts or None
    for part in parts:
        if type(part) not in READ_EFFECTS and not (type(part) is HitRateLimits and _looks_only(part)):
            return None
    return parts


def _looks_only(effect: HitRateLimits) -> bool:
    """Whether `effect` only reads its counters (every amount 0: a limit on outcomes looking before it acts,
    `ratelimits.limit_not_reached`); it then rides with the preconditions like a read (a send-code request's
    per-address limit goes with its request counters, one trip)."""
    for hit in effect.hits:  # noqa: SIM110 - see `_reads`
        if hit.amount != 0:
            return False
    return True


def _perform_all(effects: list[StorageEffect[Any]]) -> Flow[list[Any]]:
    if len(effects) == 1:
        return [(yield from perform(effects[0]))]
    return list((yield from perform(Together(tuple(effects)))))


def _check(preconditions: Sequence[Precondition[Any]], results: Sequence[Any]) -> None:
    for precondition, result in zip(preconditions, results, strict=True):
        precondition.check(result)


def resume(flow: Flow[T], value: Any, error: Exception | None = None, *, sent: Any = None) -> Flow[T]:
    """Go on with a flow that already yielded once, forwarding results and thrown errors (like `yield from`): it is
    sent `value` (or thrown `error`) as the answer to what it yielded, or with `sent`, that effect is performed
    first and its answer sent."""
    if sent is not None:
        try:
            value = yield sent
        except Exception as exc:
            error = exc
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
