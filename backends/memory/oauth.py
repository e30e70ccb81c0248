"""The memory store: short-lived values (OAuth states, outer codes, the mock provider's records) and provider
tokens (written by commits)."""

from __future__ import annotations

from backends.memory.commit import applies
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    LoadProviderTokens,
    PutShortLived,
    TakeShortLived,
)
from identity_proto.effects.oauth import DropProviderTokens, PutProviderTokens, SetOAuthAccounts
from identity_proto.records import replaced

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


@_performs(LoadProviderTokens)
def _load_provider_tokens(store: MemoryStore, effect: LoadProviderTokens) -> str | None:
    return store.tenant(effect.project_id).provider_tokens.get(effect.account_row_id)


@applies(PutProviderTokens)
def _put_provider_tokens(tenant: Tenant, write: PutProviderTokens) -> None:
    tenant.provider_tokens[write.account_row_id] = write.sealed


@applies(DropProviderTokens)
def _drop_provider_tokens(tenant: Tenant, write: DropProviderTokens) -> None:
    tenant.provider_tokens.pop(write.account_row_id, None)


@applies(SetOAuthAccounts)
def _set_oauth_accounts(tenant: Tenant, write: SetOAuthAccounts) -> None:
    tenant.users[write.user_id] = replaced(tenant.users[write.user_id], {"oauth_accounts": write.accounts})
