"""The effect kinds (storage, mail, compute), `Flow` and `perform`, and `Together` (several effects in one trip)."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


R = TypeVar("R", covariant=True)
T = TypeVar("T")


class Effect(Generic[R]):
    """Something a flow needs done; `R` is the type of its result."""

    __slots__ = ()


class StorageEffect(Effect[R]):
    """An atomic storage operation, performed by a store."""

    __slots__ = ()


class MailEffect(Effect[R]):
    """Delivery of an e-mail, performed by the host's mailer."""

    __slots__ = ()


class ComputeEffect(Effect[R]):
    """CPU-heavy pure work, performed by the driver (in a thread under the async driver)."""

    __slots__ = ()

    def compute(self) -> R:
        """Do the work and return its result."""
        raise NotImplementedError


#: A generator flow: yields effects, is sent their results, returns `T`.
Flow = Generator[Effect[Any], Any, T]


def perform(effect: Effect[T]) -> Flow[T]:
    """Yield one effect and return its result, typed."""
    result = yield effect
    return result  # type: ignore[no-any-return]  # typed by the effect (no `cast`: a call per effect of every flow)


# --------------------------------------------------------------------------------------------------------------
# Several effects in one trip


@dataclass(frozen=True, slots=True)
class Together(StorageEffect[tuple[Any, ...]]):
    """Perform `effects` in one trip to the store where the store can (Redis: one pipeline), and return their
    results in order. Each keeps its own atomicity; together they are not one transaction. (The service sends a
    request's rate-limit counters together with the flow's first read.)"""

    effects: tuple[StorageEffect[Any], ...]
