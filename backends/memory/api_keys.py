"""The memory store: user and team API keys."""

from __future__ import annotations

from backends.memory.store import MemoryStore, _performs
from identity_proto.effects import (
    ApiKeyWrite,
    CreateApiKey,
    FindApiKeyByHash,
    ListApiKeys,
    LoadApiKey,
    UpdateApiKey,
)
from identity_proto.records import ApiKey, ApiKeyType, replaced


@_performs(CreateApiKey)
def _create_api_key(store: MemoryStore, effect: CreateApiKey) -> ApiKey | ApiKeyWrite:
    tenant = store.tenant(effect.project_id)
    key = effect.key
    owners = tenant.users if key.type is ApiKeyType.USER else tenant.teams
    if key.owner_id not in owners:
        return ApiKeyWrite.OWNER_NOT_FOUND
    tenant.api_keys[key.id] = key
    tenant.api_key_by_hash[key.key_hash] = key.id
    tenant.owner_api_keys.setdefault((key.type, key.owner_id), set()).add(key.id)
    return key


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


@_performs(UpdateApiKey)
def _update_api_key(store: MemoryStore, effect: UpdateApiKey) -> ApiKey | None:
    tenant = store.tenant(effect.project_id)
    key = tenant.api_keys.get(effect.key_id)
    if key is None:
        return None
    changes: dict[str, object] = {}
    if effect.description is not None:
        changes["description"] = effect.description
    if effect.revoke_at_millis is not None and key.manually_revoked_at_millis is None:
        changes["manually_revoked_at_millis"] = effect.revoke_at_millis
    if changes:
        key = tenant.api_keys[key.id] = replaced(key, changes)
    return key
