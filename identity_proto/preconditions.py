"""Preconditions: storage checks every request must pass, sent with the request's first trip to the store.

Two things are true of nearly every request before its flow may act: it is within its rate limits (the counters
must be bumped), and the session its access token was issued for still exists (a token outlives a sign-out by up
to its lifetime otherwise). Each is a `Precondition`: a storage effect and a check of its result that raises a
`KnownError`. `guarded` runs a flow behind its preconditions without an extra round trip where it can:

- the flow's first effect only reads (`READ_EFFECTS`): preconditions and that read go in one `Together` (on Redis,
  one pipeline); a failed check discards the read;
- the flow's first effect writes and every precondition can be folded into it (`Precondition.fold`: the write
  checks it in its own atomic step, and answers `refused` when it fails): the write goes alone, one trip, and
  writes nothing when a check fails;
- the flow's first effect writes otherwise: the preconditions go alone first (together, one trip), so a request
  that fails one never writes anything;
- the flow fails before its first effect, or needs none: the preconditions still run, and a failed check wins
  over the flow's own error (an over-limit caller sees 429, a signed-out one ACCESS_TOKEN_EXPIRED, whatever else
  was wrong with the request).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from identity_proto.effects import READ_EFFECTS, Flow, StorageEffect, Together, perform
from identity_proto.quickinit import quick_init

__all__ = ["Precondition", "check_preconditions", "guarded"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Precondition(Generic[R]):
    """`effect`, then `check` of its result: `check` raises a `KnownError` when the request may not go on.

    `fold`, when given, makes a write carry the check itself: it returns the write with the check inside (or None
    when that write cannot carry it), and the folded write answers `refused` when the check fails (then `check`
    is called with None, on which a foldable check must raise)."""

    effect: StorageEffect[R]
    check: Callable[[R], None]
    fold: Callable[[StorageEffect[Any]], StorageEffect[Any] | None] | None = None
    refused: Any = None


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
    if isinstance(first, StorageEffect) and type(first) in READ_EFFECTS:
        try:
            *results, value = yield from perform(Together((*(p.effect for p in preconditions), first)))
            _check(preconditions, results)
        except Exception:
            flow.close()
            raise
        return (yield from _resume(flow, value))
    folded = _fold(first, preconditions) if isinstance(first, StorageEffect) else None
    if folded is None:
        try:
            yield from check_preconditions(preconditions)
        except Exception:
            flow.close()
            raise
    try:
        value = yield (first if folded is None else folded)
    except Exception as exc:
        return (yield from _resume(flow, None, exc))
    if folded is not None:
        for precondition in preconditions:
            if value is precondition.refused:
                flow.close()
                precondition.check(cast(Any, None))  # a foldable check fails on None (the class's contract)
    return (yield from _resume(flow, value))


def _fold(write: StorageEffect[Any], preconditions: Sequence[Precondition[Any]]) -> StorageEffect[Any] | None:
    """`write` carrying every precondition, or None when one of them cannot be folded into it."""
    folded: StorageEffect[Any] | None = write
    for precondition in preconditions:
        if precondition.fold is None or folded is None:
            return None
        folded = precondition.fold(folded)
    return folded


def _perform_all(effects: list[StorageEffect[Any]]) -> Flow[list[Any]]:
    if len(effects) == 1:
        return [(yield from perform(effects[0]))]
    return list((yield from perform(Together(tuple(effects)))))


def _check(preconditions: Sequence[Precondition[Any]], results: Sequence[Any]) -> None:
    for precondition, result in zip(preconditions, results, strict=True):
        precondition.check(result)


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
