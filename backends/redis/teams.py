"""Teams and memberships (memberships keyed by their sequence number, indexed three ways): reads, and how a
`Commit`'s guards and writes of them become the commit script's ops."""

from __future__ import annotations

from backends.redis.codecs import _change_fields, _flat, _membership, _required, _team
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, _plans
from backends.redis.read import MEMBER, SCORE, call, cat, each, first, key, read, ref
from identity_proto.effects import (
    DropMembership,
    DropTeam,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PatchMembership,
    TeamApiKeysAre,
    TeamMembersAre,
)
from identity_proto.effects.teams import UserTeamsAre
from identity_proto.records import Membership, Team


@_plans(LoadTeam)
def _load_team(keys: KeySpace, effect: LoadTeam) -> Plan[Team | None]:
    return _team((yield Call("HGETALL", keys.team(effect.project_id, effect.team_id))))


@_plans(ListTeams)
def _list_teams(keys: KeySpace, effect: ListTeams) -> Plan[tuple[Team, ...]]:
    p = effect.project_id
    index = keys.team_order(p) if effect.user_id is None else keys.user_teams(p, effect.user_id)
    team = call("HGETALL", cat(keys.team(p, ""), MEMBER), need=1, out=1)
    reply = yield read((index,), [each("ZRANGE", key(1), 0, -1, do=[team], out=1)])
    teams = [_required(_team(item)) for item in reply[0]]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_plans(LoadMembership)
def _load_membership(keys: KeySpace, effect: LoadMembership) -> Plan[Membership | None]:
    # A membership's record is keyed by its sequence number: its user's score in the team's member index.
    p = effect.project_id
    steps = [
        call("ZSCORE", key(1), effect.user_id, t="i", need=1),
        call("HGETALL", cat(keys.membership(p, ""), ref(1)), out=1),
    ]
    return _membership(first((yield read((keys.team_members(p, effect.team_id),), steps))))


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
    # Each index is scored by sequence number: creation order.
    seq = {"v": SCORE, "t": "i"}
    found = call("HGETALL", cat(keys.membership(project_id, ""), ref(1)), need=1, out=1)
    reply = yield read((index,), [each("ZRANGE", key(1), 0, -1, "WITHSCORES", do=[seq, found], pairs=1, out=1)])
    return tuple(_required(_membership(item)) for item in reply[0])


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes. A membership's record is keyed by its sequence number, the score of its user in the
# team's member index: a guard binds it (`zscore` with a name), a write looks it up (`zscore` write op).


def _membership_seq(ops: Ops, team_id: str, user_id: str) -> dict[str, str]:
    """Write ops that make the membership's sequence number a value; its record's key, naming that value."""
    name = f"w{len(ops.writes)}"
    ops.writes.append(["zscore", ops.key(ops.space.team_members(ops.project_id, team_id)), user_id, name])
    return {"p": ops.space.membership(ops.project_id, ""), "v": name}


@guards(MembershipIsAbsent)
def _membership_is_absent(ops: Ops, position: int, guard: MembershipIsAbsent) -> None:
    members = ops.key(ops.space.team_members(ops.project_id, guard.team_id))
    ops.guards.append([position, "zscore", members, guard.user_id, False])


@guards(MembershipFieldsAre)
def _membership_fields_are(ops: Ops, position: int, guard: MembershipFieldsAre) -> None:
    read, name = guard.record, f"g{position}"
    members = ops.key(ops.space.team_members(ops.project_id, read.team_id))
    ops.guards.append([position, "zscore", members, read.user_id, True, name])
    ops.fields_are(position, {"p": ops.space.membership(ops.project_id, ""), "v": name}, read, guard.names)


@guards(TeamMembersAre)
def _team_members_are(ops: Ops, position: int, guard: TeamMembersAre) -> None:
    ops.exactly(position, ops.space.team_members(ops.project_id, guard.team_id), guard.user_ids)


@guards(TeamApiKeysAre)
def _team_api_keys_are(ops: Ops, position: int, guard: TeamApiKeysAre) -> None:
    ops.exactly(position, ops.space.owner_api_keys(ops.project_id, "team", guard.team_id), guard.key_ids)


@guards(UserTeamsAre)
def _user_teams_are(ops: Ops, position: int, guard: UserTeamsAre) -> None:
    ops.exactly(position, ops.space.user_teams(ops.project_id, guard.user_id), guard.team_ids)


@writes(PatchMembership)
def _patch_membership(ops: Ops, write: PatchMembership) -> None:
    fields = _change_fields(write.changes)
    if fields:
        ops.writes.append(["hset", _membership_seq(ops, write.team_id, write.user_id), *_flat(fields)])


@writes(DropMembership)
def _drop_membership(ops: Ops, write: DropMembership) -> None:
    space, p = ops.space, ops.project_id
    record = _membership_seq(ops, write.team_id, write.user_id)
    ops.writes.append(["del", record])
    ops.writes.append(["zrem", ops.key(space.team_members(p, write.team_id)), write.user_id])
    ops.writes.append(["zrem", ops.key(space.user_teams(p, write.user_id)), write.team_id])
    ops.writes.append(["zrem", ops.key(space.membership_order(p)), {"v": record["v"]}])


@writes(DropTeam)
def _drop_team(ops: Ops, write: DropTeam) -> None:
    space, p, team_id = ops.space, ops.project_id, write.team_id
    ops.writes.append(["del", ops.key(space.team(p, team_id))])
    ops.writes.append(["zrem", ops.key(space.team_order(p)), team_id])
    ops.writes.append(["del", ops.key(space.team_members(p, team_id))])
    for api_key in write.api_keys:
        ops.writes.append(["hdel", ops.key(space.api_key_by_hash(p)), api_key.key_hash])
        ops.writes.append(["del", ops.key(space.api_key(p, api_key.id))])
    ops.writes.append(["del", ops.key(space.owner_api_keys(p, "team", team_id))])
