"""User and team API keys: records by id, an index by key hash, and one index per owner.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Deleting a user or a team deletes its keys in the deletion's own script
(`delete_api_keys` in `backends.redis.lua`). Key names are in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _api_key, _flat, _json, _json_fields, _required
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, Script, _plans, script
from identity_proto.effects import (
    ApiKeyWrite,
    CreateApiKey,
    FindApiKeyByHash,
    ListApiKeys,
    LoadApiKey,
    UpdateApiKey,
)
from identity_proto.records import ApiKey, ApiKeyType

# KEYS: the key's record, the hash index, the owner's key index, the owner's record (user or team). ARGV: key id,
# key hash, created_at_millis, then field, value, ... of the record. Returns 1 if stored, 0 if the owner is missing
# (nothing written).
script(
    "create_api_key",
    """
if redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return 1
""",
)


@_plans(CreateApiKey)
def _create_api_key(keys: KeySpace, effect: CreateApiKey) -> Plan[ApiKey | ApiKeyWrite]:
    key, project_id = effect.key, effect.project_id
    owner = keys.user(project_id, key.owner_id) if key.type is ApiKeyType.USER else keys.team(project_id, key.owner_id)
    created = yield Script(
        "create_api_key",
        (
            keys.api_key(project_id, key.id),
            keys.api_key_by_hash(project_id),
            keys.owner_api_keys(project_id, key.type.value, key.owner_id),
            owner,
        ),
        (key.id, key.key_hash, key.created_at_millis, *_flat(_json_fields(dataclasses.asdict(key)))),
    )
    return key if created else ApiKeyWrite.OWNER_NOT_FOUND


@_plans(LoadApiKey)
def _load_api_key(keys: KeySpace, effect: LoadApiKey) -> Plan[ApiKey | None]:
    return _api_key((yield Call("HGETALL", keys.api_key(effect.project_id, effect.key_id))))


# KEYS: the hash index. ARGV: key hash, key record prefix. Returns the key's record, or nil.
script(
    "find_api_key_by_hash",
    """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
return redis.call('HGETALL', ARGV[2] .. id)
""",
)


@_plans(FindApiKeyByHash)
def _find_api_key_by_hash(keys: KeySpace, effect: FindApiKeyByHash) -> Plan[ApiKey | None]:
    project_id = effect.project_id
    reply = yield Script(
        "find_api_key_by_hash", (keys.api_key_by_hash(project_id),), (effect.key_hash, keys.api_key(project_id))
    )
    return _api_key(reply)


# KEYS: the owner's key index. ARGV: key record prefix. Returns the records newest first (by score, then by id,
# both descending).
script(
    "list_api_keys",
    """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'REV')) do
  local key = redis.call('HGETALL', ARGV[1] .. id)
  if #key > 0 then out[#out + 1] = key end
end
return out
""",
)


@_plans(ListApiKeys)
def _list_api_keys(keys: KeySpace, effect: ListApiKeys) -> Plan[tuple[ApiKey, ...]]:
    project_id = effect.project_id
    reply = yield Script(
        "list_api_keys",
        (keys.owner_api_keys(project_id, effect.type.value, effect.owner_id),),
        (keys.api_key(project_id),),
    )
    return tuple(_required(_api_key(item)) for item in reply)


# KEYS: the key's record. ARGV: set the description (1/0), the description (JSON), the revocation time ('' for
# none). The revocation time is written only where none is stored. Returns the record, or nil when there is none.
script(
    "update_api_key",
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[1] == '1' then redis.call('HSET', KEYS[1], 'description', ARGV[2]) end
if ARGV[3] ~= '' then
  local revoked = redis.call('HGET', KEYS[1], 'manually_revoked_at_millis')
  if not revoked or revoked == 'null' then redis.call('HSET', KEYS[1], 'manually_revoked_at_millis', ARGV[3]) end
end
return redis.call('HGETALL', KEYS[1])
""",
)


@_plans(UpdateApiKey)
def _update_api_key(keys: KeySpace, effect: UpdateApiKey) -> Plan[ApiKey | None]:
    description = effect.description
    reply = yield Script(
        "update_api_key",
        (keys.api_key(effect.project_id, effect.key_id),),
        (
            0 if description is None else 1,
            "" if description is None else _json(description),
            "" if effect.revoke_at_millis is None else effect.revoke_at_millis,
        ),
    )
    return _api_key(reply)
