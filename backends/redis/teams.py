"""Teams and memberships (memberships keyed by their sequence number, indexed three ways).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from backends.redis.codecs import (
    _change_fields,
    _flat,
    _json_fields,
    _membership,
    _required,
    _team,
    _text,
)
from backends.redis.keys import KeySpace
from backends.redis.lua import (
    _BYTE_LESS,
    _CREATE_TEAM,
    _DELETE_API_KEYS,
    _DESELECT,
    _EMIT_EVENT,
    _EMIT_MEMBERSHIP_CREATED,
    _EMIT_TEAM_EVENT,
    _RECORD_JSON,
    _SEQ,
)
from backends.redis.plan import Arg, Call, Plan, Script, _plans, script
from identity_proto.effects import (
    AddMembership,
    ChangePermission,
    CreateTeam,
    DeleteTeam,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    RemoveMembership,
    TeamWrite,
    UpdateMembership,
)
from identity_proto.records import Membership, Team

# KEYS: team, team order, the events stream (`team.created`; the creator's membership records none), and with a
# creator: the creator's user, the team's member index, the creator's team index, membership order, membership
# sequence. ARGV: team id, created_at_millis, membership key prefix,
# creator's user id (or ''), n, then n items field, value, ... of the team, then those of the creator's
# membership. Returns 1 if stored, 0 if the creator's user is missing (nothing written).
script(
    "create_team",
    _SEQ
    + _CREATE_TEAM
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_TEAM_EVENT
    + """
local creator = #KEYS > 3
if creator and redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
local n = tonumber(ARGV[5])
create_team(KEYS[1], KEYS[2], ARGV[1], ARGV[2], {unpack(ARGV, 6, 5 + n)})
if creator then
  add_creator(KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[3], ARGV[1], ARGV[4], {unpack(ARGV, 6 + n)})
end
emit_team_event(KEYS[3], 'team.created', KEYS[1])
return 1
""",
)


@_plans(CreateTeam)
def _create_team(keys: KeySpace, effect: CreateTeam) -> Plan[Team | TeamWrite]:
    team, creator, project_id = effect.team, effect.creator, effect.project_id
    team_items = _flat(_json_fields(dataclasses.asdict(team)))
    script_keys = [keys.team(project_id, team.id), keys.team_order(project_id), keys.events(project_id)]
    args: list[Arg] = [team.id, team.created_at_millis, keys.membership(project_id), "", len(team_items)]
    args += team_items
    if creator is not None:
        # The membership is the team's by construction: keyed by this team and the creator's user, as in memory.
        script_keys += [
            keys.user(project_id, creator.user_id),
            keys.team_members(project_id, team.id),
            keys.user_teams(project_id, creator.user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
        ]
        args[3] = creator.user_id
        args += _flat(_json_fields(dataclasses.asdict(creator)))
    created = yield Script("create_team", tuple(script_keys), tuple(args))
    return team if created else TeamWrite.USER_NOT_FOUND


@_plans(LoadTeam)
def _load_team(keys: KeySpace, effect: LoadTeam) -> Plan[Team | None]:
    return _team((yield Call("HGETALL", keys.team(effect.project_id, effect.team_id))))


# KEYS: a team index (team order, or a user's team index). ARGV: team key prefix. Returns the teams' records
# (in index order; the caller sorts).
script(
    "list_teams",
    """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local team = redis.call('HGETALL', ARGV[1] .. id)
  if #team > 0 then out[#out + 1] = team end
end
return out
""",
)


@_plans(ListTeams)
def _list_teams(keys: KeySpace, effect: ListTeams) -> Plan[tuple[Team, ...]]:
    project_id = effect.project_id
    index = keys.team_order(project_id) if effect.user_id is None else keys.user_teams(project_id, effect.user_id)
    reply = yield Script("list_teams", (index,), (keys.team(project_id),))
    teams = [_required(_team(item)) for item in reply]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


# KEYS: team, team order, the team's member index, membership order, the team's API key index, the API key hash
# index, the events stream (`team.deleted`; as the original, no membership events). ARGV: team id, membership key
# prefix, user team-index prefix, user key prefix, API key prefix. Returns 1 if the team existed (and is gone with
# its memberships and API keys, deselected by every member who had it selected), else 0.
script(
    "delete_team",
    _SEQ
    + _DESELECT
    + _DELETE_API_KEYS
    + _EMIT_EVENT
    + """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
local members = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  local uid, seq = members[i], seq_text(members[i + 1])
  redis.call('DEL', ARGV[2] .. seq)
  redis.call('ZREM', ARGV[3] .. uid, ARGV[1])
  redis.call('ZREM', KEYS[4], seq)
  deselect(ARGV[4] .. uid, ARGV[1])
end
redis.call('DEL', KEYS[3])
delete_api_keys(KEYS[5], ARGV[5], KEYS[6])
emit_event(KEYS[7], 'team.deleted', '', '', ARGV[1])
return 1
""",
)


@_plans(DeleteTeam)
def _delete_team(keys: KeySpace, effect: DeleteTeam) -> Plan[bool]:
    project_id, team_id = effect.project_id, effect.team_id
    deleted = yield Script(
        "delete_team",
        (
            keys.team(project_id, team_id),
            keys.team_order(project_id),
            keys.team_members(project_id, team_id),
            keys.membership_order(project_id),
            keys.owner_api_keys(project_id, "team", team_id),
            keys.api_key_by_hash(project_id),
            keys.events(project_id),
        ),
        (
            team_id,
            keys.membership(project_id),
            keys.user_teams(project_id),
            keys.user(project_id),
            keys.api_key(project_id),
        ),
    )
    return bool(deleted)


_TEAM_WRITES: Final = {
    "user_not_found": TeamWrite.USER_NOT_FOUND,
    "team_not_found": TeamWrite.TEAM_NOT_FOUND,
    "membership_exists": TeamWrite.MEMBERSHIP_EXISTS,
}


# KEYS: user, team, the team's member index, the user's team index, membership order, membership sequence, the
# events stream (`team_membership.created`, then a `team_permission.created` per permission it got).
# ARGV: team id, user id, membership key prefix, then field, value, ... of the membership.
# Returns 'ok', or the first check that failed: 'user_not_found', 'team_not_found', 'membership_exists'.
script(
    "add_membership",
    _SEQ
    + _EMIT_EVENT
    + _EMIT_MEMBERSHIP_CREATED
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'user_not_found' end
if redis.call('EXISTS', KEYS[2]) == 0 then return 'team_not_found' end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then return 'membership_exists' end
local seq = seq_text(redis.call('INCR', KEYS[6]))
redis.call('HSET', ARGV[3] .. seq, unpack(ARGV, 4))
redis.call('ZADD', KEYS[3], seq, ARGV[2])
redis.call('ZADD', KEYS[4], seq, ARGV[1])
redis.call('ZADD', KEYS[5], seq, seq)
emit_membership_created(KEYS[7], ARGV[1], ARGV[2], cjson.decode(redis.call('HGET', ARGV[3] .. seq, 'permissions')))
return 'ok'
""",
)


@_plans(AddMembership)
def _add_membership(keys: KeySpace, effect: AddMembership) -> Plan[Membership | TeamWrite]:
    membership, project_id = effect.membership, effect.project_id
    team_id, user_id = membership.team_id, membership.user_id
    reply = yield Script(
        "add_membership",
        (
            keys.user(project_id, user_id),
            keys.team(project_id, team_id),
            keys.team_members(project_id, team_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
            keys.events(project_id),
        ),
        (team_id, user_id, keys.membership(project_id), *_flat(_json_fields(dataclasses.asdict(membership)))),
    )
    return _TEAM_WRITES.get(_text(reply), membership)


# KEYS: the team's member index. ARGV: user id, membership key prefix. Returns the record, or nil.
script(
    "load_membership",
    _SEQ
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
return redis.call('HGETALL', ARGV[2] .. seq_text(seq))
""",
)


@_plans(LoadMembership)
def _load_membership(keys: KeySpace, effect: LoadMembership) -> Plan[Membership | None]:
    project_id = effect.project_id
    reply = yield Script(
        "load_membership",
        (keys.team_members(project_id, effect.team_id),),
        (effect.user_id, keys.membership(project_id)),
    )
    return _membership(reply)


# KEYS: a membership index scored by sequence (membership order, a team's members, a user's teams).
# ARGV: membership key prefix. Returns the records in creation order.
script(
    "list_memberships",
    _SEQ
    + """
local out = {}
local index = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 2, #index, 2 do
  local membership = redis.call('HGETALL', ARGV[1] .. seq_text(index[i]))
  if #membership > 0 then out[#out + 1] = membership end
end
return out
""",
)


@_plans(ListMemberships)
def _list_memberships(keys: KeySpace, effect: ListMemberships) -> Plan[tuple[Membership, ...]]:
    project_id, team_id, user_id = effect.project_id, effect.team_id, effect.user_id
    if team_id is not None and user_id is not None:
        one = yield from _load_membership(keys, LoadMembership(project_id, team_id, user_id))
        return () if one is None else (one,)
    if team_id is not None:
        index = keys.team_members(project_id, team_id)
    elif user_id is not None:
        index = keys.user_teams(project_id, user_id)
    else:
        index = keys.membership_order(project_id)
    reply = yield Script("list_memberships", (index,), (keys.membership(project_id),))
    return tuple(_required(_membership(item)) for item in reply)


# KEYS: the team's member index, the user's team index, membership order, user, the events stream
# (`team_membership.deleted`). ARGV: team id, user id, membership key prefix. Returns 1 if the membership existed
# (and is gone, the team deselected), else 0.
script(
    "remove_membership",
    _SEQ
    + _DESELECT
    + _EMIT_EVENT
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not seq then return 0 end
seq = seq_text(seq)
redis.call('DEL', ARGV[3] .. seq)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], seq)
deselect(KEYS[4], ARGV[1])
emit_event(KEYS[5], 'team_membership.deleted', '', '', ARGV[1] .. '\\n' .. ARGV[2])
return 1
""",
)


@_plans(RemoveMembership)
def _remove_membership(keys: KeySpace, effect: RemoveMembership) -> Plan[bool]:
    project_id, team_id, user_id = effect.project_id, effect.team_id, effect.user_id
    removed = yield Script(
        "remove_membership",
        (
            keys.team_members(project_id, team_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.user(project_id, user_id),
            keys.events(project_id),
        ),
        (team_id, user_id, keys.membership(project_id)),
    )
    return bool(removed)


# KEYS: the team's member index. ARGV: user id, membership key prefix, then field, value, ... (maybe none).
# Returns the record, or nil when there is no such membership.
script(
    "update_membership",
    _SEQ
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
local key = ARGV[2] .. seq_text(seq)
if #ARGV > 2 then redis.call('HSET', key, unpack(ARGV, 3)) end
return redis.call('HGETALL', key)
""",
)


@_plans(UpdateMembership)
def _update_membership(keys: KeySpace, effect: UpdateMembership) -> Plan[Membership | None]:
    project_id = effect.project_id
    fields = _change_fields(effect.changes)
    reply = yield Script(
        "update_membership",
        (keys.team_members(project_id, effect.team_id),),
        (effect.user_id, keys.membership(project_id), *_flat(fields)),
    )
    return _membership(reply)


# KEYS: the team's member index, the events stream. ARGV: user id, membership key prefix, permission id, grant
# (1/0), team id. Returns the record with the permission granted or revoked (permissions kept sorted), or nil.
# Records `team_permission.created` on every grant (held already or not, as the original's upsert), and
# `team_permission.deleted` on a revoke of a permission held.
script(
    "change_permission",
    _SEQ
    + _BYTE_LESS
    + _EMIT_EVENT
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
local key = ARGV[2] .. seq_text(seq)
local seen, held = {}, {}
local function keep(permission)
  if type(permission) == 'string' and not seen[permission] then
    seen[permission] = true
    held[#held + 1] = permission
  end
end
local raw = redis.call('HGET', key, 'permissions')
local stored = raw and cjson.decode(raw)
local had = false
if type(stored) == 'table' then
  for _, permission in ipairs(stored) do
    if permission ~= ARGV[3] then keep(permission) else had = true end
  end
end
if ARGV[4] == '1' then keep(ARGV[3]) end
table.sort(held, byte_less)
local items = {}
for i, permission in ipairs(held) do items[i] = cjson.encode(permission) end
redis.call('HSET', key, 'permissions', '[' .. table.concat(items, ',') .. ']')
local ids = ARGV[3] .. '\\n' .. ARGV[5] .. '\\n' .. ARGV[1]
if ARGV[4] == '1' then
  emit_event(KEYS[2], 'team_permission.created', '', '', ids)
elseif had then
  emit_event(KEYS[2], 'team_permission.deleted', '', '', ids)
end
return redis.call('HGETALL', key)
""",
)


@_plans(ChangePermission)
def _change_permission(keys: KeySpace, effect: ChangePermission) -> Plan[Membership | None]:
    project_id = effect.project_id
    reply = yield Script(
        "change_permission",
        (keys.team_members(project_id, effect.team_id), keys.events(project_id)),
        (
            effect.user_id,
            keys.membership(project_id),
            effect.permission_id,
            1 if effect.granted else 0,
            effect.team_id,
        ),
    )
    return _membership(reply)


def personal_team_parts(
    keys: KeySpace, project_id: str, user_id: str, personal_team: tuple[Team, Membership] | None
) -> tuple[str, int, tuple[str, ...], tuple[str, ...], list[str]]:
    """What a sign-up script that may create the user's personal team (the `_CREATE_TEAM` Lua function) takes:
    the team's id and creation time ("" and 0 without one), the team's and the creator membership's JSON fields,
    and the six keys it writes (none without one)."""
    if personal_team is None:
        return "", 0, (), (), []
    team, creator = personal_team
    return (
        team.id,
        team.created_at_millis,
        _flat(_json_fields(dataclasses.asdict(team))),
        _flat(_json_fields(dataclasses.asdict(creator))),
        [
            keys.team(project_id, team.id),
            keys.team_order(project_id),
            keys.team_members(project_id, team.id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
        ],
    )
