"""The in-memory store: dicts behind one lock. For tests, embedding, and single-process deployments.

Contract (identity_proto.effects): every effect is atomic. Here that is one `threading.RLock` held for the whole
of each effect, so a WSGI host calling from many threads (or an ASGI host from its event loop) never sees a half
done write. No effect does I/O or waits while holding the lock, so the async twin simply calls the sync store.

Records are immutable dataclasses: readers get the stored object itself, never a copy that could drift.
Expiry is decided by the core against the request's clock; this store keeps what it is told to keep.

Layout: `store` (`Tenant`, the stores, the handler registry), `commit` (`Commit`: guards checked and writes applied
through registries by type), `reads`, `writes` (a resource's own commit guards and writes), `operations` (the
specific ones) and `webhooks`, named as in `backends.redis`. backends/README.md describes the contract and how to
find an effect's handler.
"""

from __future__ import annotations

# These modules register their handlers as they are imported.
from backends.memory import (  # noqa: F401
    commit,
    operations,
    reads,
    webhooks,
    writes,
)
from backends.memory.store import AsyncMemoryStore, MemoryStore, Tenant

__all__ = ["AsyncMemoryStore", "MemoryStore", "Tenant"]
