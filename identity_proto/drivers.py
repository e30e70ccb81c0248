"""Drivers: run a flow to completion against a store (psycopg 3's `waiting.py`, in our vocabulary).

`run` drives a flow with a sync `Store` (WSGI hosts, in-process tests); `arun` with an `AsyncStore` (the ASGI
host). Both do exactly the same thing, so a flow gives identical results under either:

- a `StorageEffect` goes to `store.apply`;
- a `ComputeEffect` is computed; `arun` does it in a worker thread, so bcrypt never blocks the event loop;
- a `MailEffect` goes to the mailer;
- a `ProviderEffect` (talking to an OAuth provider) goes to the host's provider client;
- `SendWebhooks` (the delivery loop's POSTs) goes to the host's webhook sender;
- an exception raised while performing an effect (a store's `StorageUnavailable`, say) is *thrown into the flow*
  at the `yield` that asked for it, so the core, not the host, decides how every failure is rendered.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from identity_proto.effects import ComputeEffect, Effect, Flow, SendEmail, StorageEffect
from identity_proto.effects.oauth_provider import AsyncProviderClient, ProviderClient, ProviderEffect
from identity_proto.effects.webhooks import SendWebhooks, WebhookResult
from identity_proto.records import Email

__all__ = [
    "AsyncMailer",
    "AsyncProviderClient",
    "AsyncStore",
    "AsyncWebhookSender",
    "Mailer",
    "ProviderClient",
    "Store",
    "WebhookSender",
    "arun",
    "run",
]

T = TypeVar("T")


class Store(Protocol):
    """A synchronous store: performs storage effects atomically."""

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform `effect` and return its result; raise only `StorageUnavailable` (or a bug)."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


class AsyncStore(Protocol):
    """The asyncio twin of `Store`."""

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform `effect` and return its result; raise only `StorageUnavailable` (or a bug)."""
        ...

    async def aclose(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


class Mailer(Protocol):
    """Delivers e-mail for sync hosts. Raises on failure; never drops a message silently."""

    def send(self, email: Email) -> None:
        """Deliver `email` or raise."""
        ...


class AsyncMailer(Protocol):
    """The asyncio twin of `Mailer`."""

    async def send(self, email: Email) -> None:
        """Deliver `email` or raise."""
        ...


# webhooks: delivery
class WebhookSender(Protocol):
    """POSTs webhooks for sync hosts (`SendWebhooks`): one result per request; a receiver's failure is a result,
    never an exception."""

    def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """Perform `effect`."""
        ...


class AsyncWebhookSender(Protocol):
    """The asyncio twin of `WebhookSender`."""

    async def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """Perform `effect`."""
        ...


def run(
    flow: Flow[T],
    store: Store,
    mailer: Mailer | None = None,
    provider: ProviderClient | None = None,
    webhooks: WebhookSender | None = None,
) -> T:
    """Run `flow` to completion against a sync store (and mailer, OAuth provider client, webhook sender) and
    return its result."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = _perform(effect, store, mailer, provider, webhooks)
        except Exception as exc:  # handed to the flow, which decides what it means
            error = exc


async def arun(
    flow: Flow[T],
    store: AsyncStore,
    mailer: AsyncMailer | None = None,
    provider: AsyncProviderClient | None = None,
    webhooks: AsyncWebhookSender | None = None,
) -> T:
    """Run `flow` to completion against an async store (and mailer, OAuth provider client, webhook sender) and
    return its result."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            if isinstance(effect, StorageEffect):
                value = await store.apply(effect)
            elif isinstance(effect, ComputeEffect):
                # Imported here, not at the top: the core must import (and `run` must work) where no event loop
                # exists at all; only a caller of `arun` already has one.
                import asyncio

                value = await asyncio.to_thread(effect.compute)
            elif isinstance(effect, SendEmail):
                if mailer is None:
                    raise RuntimeError("this flow sends e-mail but the host configured no mailer")
                await mailer.send(effect.email)
            elif isinstance(effect, ProviderEffect):
                if provider is None:
                    raise RuntimeError("this flow talks to an OAuth provider but the host configured no client")
                value = await provider.perform(effect)
            elif isinstance(effect, SendWebhooks):
                if webhooks is None:
                    raise RuntimeError("this flow sends webhooks but the host configured no webhook sender")
                value = await webhooks.send(effect)
            else:
                raise TypeError(f"not an effect: {effect!r}")
        except Exception as exc:
            error = exc


def _perform(
    effect: Effect[Any],
    store: Store,
    mailer: Mailer | None,
    provider: ProviderClient | None,
    webhooks: WebhookSender | None,
) -> Any:
    if isinstance(effect, StorageEffect):
        return store.apply(effect)
    if isinstance(effect, ComputeEffect):
        return effect.compute()
    if isinstance(effect, SendEmail):
        if mailer is None:
            raise RuntimeError("this flow sends e-mail but the host configured no mailer")
        mailer.send(effect.email)
        return None
    if isinstance(effect, ProviderEffect):
        if provider is None:
            raise RuntimeError("this flow talks to an OAuth provider but the host configured no client")
        return provider.perform(effect)
    if isinstance(effect, SendWebhooks):
        if webhooks is None:
            raise RuntimeError("this flow sends webhooks but the host configured no webhook sender")
        return webhooks.send(effect)
    raise TypeError(f"not an effect: {effect!r}")
