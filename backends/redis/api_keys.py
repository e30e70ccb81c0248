"""User and team API keys: records by id, an index by key hash, and one index per owner: reads, and how a `Commit`'s
guards and writes of them become the commit script's ops (deleting a user or a team drops its keys in the deletion's
commit: `DropApiKey`)."""

from __future__ import annotations

from backends.redis.codecs import _api_key, _flat, _json, _json_fields, _required
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, _plans
from backends.redis.read import MEMBER, by_index, call, cat, each, first, key, read
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
from identity_proto.effects.commit import RecordKind
from identity_proto.records import ApiKey, ApiKeyType


@_plans(LoadApiKey)
def _load_api_key(keys: KeySpace, effect: LoadApiKey) -> Plan[ApiKey | None]:
    return _api_key((yield Call("HGETALL", keys.api_key(effect.project_id, effect.key_id))))


@_plans(FindApiKeyByHash)
def _find_api_key_by_hash(keys: KeySpace, effect: FindApiKeyByHash) -> Plan[ApiKey | None]:
    p = effect.project_id
    return _api_key(first((yield by_index(keys.api_key_by_hash(p), effect.key_hash, keys.api_key(p, "")))))


@_plans(ListApiKeys)
def _list_api_keys(keys: KeySpace, effect: ListApiKeys) -> Plan[tuple[ApiKey, ...]]:
    # Newest first (by score, then by id, both descending).
    p = effect.project_id
    found = call("HGETALL", cat(keys.api_key(p, ""), MEMBER), need=1, out=1)
    index = keys.owner_api_keys(p, effect.type.value, effect.owner_id)
    reply = yield read((index,), [each("ZRANGE", key(1), 0, -1, "REV", do=[found], out=1)])
    return tuple(_required(_api_key(item)) for item in reply[0])


@guards(ApiKeyOwnerExists)
def _api_key_owner_exists(ops: Ops, position: int, guard: ApiKeyOwnerExists) -> None:
    kind = RecordKind.USER if guard.type is ApiKeyType.USER else RecordKind.TEAM
    ops.guards.append([position, "exists", ops.record_key(kind, guard.owner_id), 1])


@guards(ApiKeyIs)
def _api_key_is(ops: Ops, position: int, guard: ApiKeyIs) -> None:
    key_key = ops.key(ops.space.api_key(ops.project_id, guard.key.id))
    ops.guards.append([position, "exists", key_key, 1])
    ops.fields_are(position, key_key, guard.key, guard.names)


@writes(PutApiKey)
def _put_api_key(ops: Ops, write: PutApiKey) -> None:
    key, p, space = write.key, ops.project_id, ops.space
    key_key = ops.key(space.api_key(p, key.id))
    ops.put(key_key, _json_fields(key))
    ops.writes.append(["hset", ops.key(space.api_key_by_hash(p)), key.key_hash, key.id])
    owner_index = ops.key(space.owner_api_keys(p, key.type.value, key.owner_id))
    ops.writes.append(["zadd", owner_index, str(key.created_at_millis), key.id])


@writes(PatchApiKey)
def _patch_api_key(ops: Ops, write: PatchApiKey) -> None:
    fields = [(name, _json(value)) for name, value in write.changes]
    ops.writes.append(["hset", ops.key(ops.space.api_key(ops.project_id, write.key_id)), *_flat(fields)])


@guards(UserApiKeysAre)
def _user_api_keys_are(ops: Ops, position: int, guard: UserApiKeysAre) -> None:
    ops.exactly(position, ops.space.owner_api_keys(ops.project_id, ApiKeyType.USER.value, guard.user_id), guard.key_ids)


@writes(DropApiKey)
def _drop_api_key(ops: Ops, write: DropApiKey) -> None:
    key, p, space = write.key, ops.project_id, ops.space
    ops.writes.append(["del", ops.key(space.api_key(p, key.id))])
    ops.writes.append(["hdel", ops.key(space.api_key_by_hash(p)), key.key_hash])
    ops.writes.append(["zrem", ops.key(space.owner_api_keys(p, key.type.value, key.owner_id)), key.id])
