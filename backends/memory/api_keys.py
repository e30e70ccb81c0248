"""The memory store: user and team API keys (reads; a commit's guards and writes of a key)."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ApiKeyIs,
    ApiKeyOwnerExists,
    FindApiKeyByHash,
    ListApiKeys,
    LoadApiKey,
    PatchApiKey,
    PutApiKey,
)
from identity_proto.effects.api_keys import DropApiKey, UserApiKeysAre
from identity_proto.records import ApiKey, ApiKeyType, replaced


@checks(ApiKeyOwnerExists)
def _api_key_owner_exists(tenant: Tenant, guard: ApiKeyOwnerExists) -> bool:
    owners = tenant.users if guard.type is ApiKeyType.USER else tenant.teams
    return guard.owner_id in owners


@checks(ApiKeyIs)
def _api_key_is(tenant: Tenant, guard: ApiKeyIs) -> bool:
    stored = tenant.api_keys.get(guard.key.id)
    return stored is not None and all(getattr(stored, n) == getattr(guard.key, n) for n in guard.names)


@applies(PutApiKey)
def _put_api_key(tenant: Tenant, write: PutApiKey) -> None:
    key = write.key
    tenant.api_keys[key.id] = key
    tenant.api_key_by_hash[key.key_hash] = key.id
    tenant.owner_api_keys.setdefault((key.type, key.owner_id), set()).add(key.id)


@applies(PatchApiKey)
def _patch_api_key(tenant: Tenant, write: PatchApiKey) -> None:
    tenant.api_keys[write.key_id] = replaced(tenant.api_keys[write.key_id], dict(write.changes))


@_performs(LoadApiKey)
def _load_api_key(store: MemoryStore, effect: LoadApiKey) -> ApiKey | None:
    return store.tenant(effect.project_id).api_keys.get(effect.key_id)


@_performs(FindApiKeyByHash)
def _find_api_key_by_hash(store: MemoryStore, effect: FindApiKeyByHash) -> ApiKey | None:
    tenant = store.tenant(effect.project_id)
    key_id = tenant.api_key_by_hash.get(effect.key_hash)
    return None if key_id is None else tenant.api_keys.get(key_id)


@_performs(ListApiKeys)
def _list_api_keys(store: MemoryStore, effect: ListApiKeys) -> tuple[ApiKey, ...]:
    tenant = store.tenant(effect.project_id)
    keys = [tenant.api_keys[i] for i in tenant.owner_api_keys.get((effect.type, effect.owner_id), ())]
    return tuple(sorted(keys, key=lambda k: (k.created_at_millis, k.id), reverse=True))


@checks(UserApiKeysAre)
def _user_api_keys_are(tenant: Tenant, guard: UserApiKeysAre) -> bool:
    held = tenant.owner_api_keys.get((ApiKeyType.USER, guard.user_id), set())
    return held == set(guard.key_ids) and len(guard.key_ids) == len(held)


@applies(DropApiKey)
def _drop_api_key(tenant: Tenant, write: DropApiKey) -> None:
    key = write.key
    tenant.api_keys.pop(key.id, None)
    if tenant.api_key_by_hash.get(key.key_hash) == key.id:
        del tenant.api_key_by_hash[key.key_hash]
    owner = (key.type, key.owner_id)
    held = tenant.owner_api_keys.get(owner, set())
    held.discard(key.id)
    if not held:
        tenant.owner_api_keys.pop(owner, None)
