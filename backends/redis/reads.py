"""The Redis store's typed reads: a record by its key is one HGETALL; a read that follows pointers (an index to a
record, an order to its members' records) one run of the generic `read` script (`read.py`), so each is one
consistent view (a user's contact channels: the user, their channels and the e-mail index entries of their
addresses in one step).

The project index (`{projects}`) may hold an id whose record is missing (a crash, or a create racing a delete of
the same id): ListProjects (SMEMBERS, then HGETALL of each in one pipeline) skips it, and sorts by
(created_at_millis, id) like the memory store."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson

from backends.redis.codecs import (
    _api_key,
    _code,
    _email,
    _membership,
    _outbox_prefix,
    _pairs,
    _project,
    _required,
    _session,
    _team,
    _text,
    _user,
)
from backends.redis.keys import KeySpace
from backends.redis.plan import Batch, Call, Plan, Script, _plans
from backends.redis.read import FIRST, LAST, MEMBER, SCORE, by_index, call, cat, each, encode, first, key, read, ref
from identity_proto.effects import (
    FindApiKeyByHash,
    FindAuthAddressHolder,
    FindUserByIndex,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListOutbox,
    ListProjectContactChannels,
    ListProjectPermissions,
    ListProjects,
    ListSessions,
    ListTeamInvitations,
    ListTeams,
    ListUsers,
    LoadApiKey,
    LoadMembership,
    LoadProject,
    LoadProviderTokens,
    LoadSession,
    LoadTeam,
    LoadTeamInvitation,
    LoadUser,
    LoadUserWithTeam,
    UserChannels,
    channels_of,
)
from identity_proto.records import (
    ApiKey,
    CodePurpose,
    ContactChannel,
    Email,
    Membership,
    Project,
    Session,
    Team,
    User,
    VerificationCode,
    contact_channel_from_json,
)

#: The reads of one record by its key (one HGETALL): the key's builder, the effect's field with the id, the codec.
_LOADS: dict[type[Any], tuple[Callable[[KeySpace, str, str], str], str, Callable[[Any], Any]]] = {
    LoadUser: (KeySpace.user, "user_id", _user),
    LoadTeam: (KeySpace.team, "team_id", _team),
    LoadSession: (KeySpace.session, "session_id", _session),
    LoadApiKey: (KeySpace.api_key, "key_id", _api_key),
}


def _load(keys: KeySpace, effect: Any) -> Plan[Any]:
    key_of, id_field, decode = _LOADS[type(effect)]
    return decode((yield Call("HGETALL", key_of(keys, effect.project_id, getattr(effect, id_field)))))


for _type in _LOADS:
    _plans(_type)(_load)


@_plans(LoadProject)
def _load_project(keys: KeySpace, effect: LoadProject) -> Plan[Project | None]:
    return _project((yield Call("HGETALL", keys.project(effect.project_id))))


@_plans(ListProjects)
def _list_projects(keys: KeySpace, effect: ListProjects) -> Plan[tuple[Project, ...]]:
    ids = sorted(_text(member) for member in (yield Call("SMEMBERS", keys.index)))
    if not ids:
        return ()
    replies = yield Batch(tuple(Call("HGETALL", keys.project(project_id)) for project_id in ids))
    projects = [project for project in map(_project, replies) if project is not None]  # skip dangling ids
    return tuple(sorted(projects, key=lambda p: (p.created_at_millis, p.id)))


@functools.lru_cache(maxsize=256)
def _user_with_team_steps(keys: KeySpace, project_id: str) -> str:
    # The user, and the team its `selected_team_id` names (a JSON id, or null: no team): one document per project.
    steps = [
        call("HGETALL", key(1), t="r", need=1, out=1),
        call("HGET", key(1), "selected_team_id", t="j"),
        call("HGETALL", cat(keys.team(project_id, ""), ref(2)), out=1),
    ]
    return encode(steps)


@_plans(LoadUserWithTeam)
def _load_user_with_team(keys: KeySpace, effect: LoadUserWithTeam) -> Plan[tuple[User, Team | None] | None]:
    # One round trip for what rendering a user needs.
    user_key = keys.user(effect.project_id, effect.user_id)
    reply = yield Script("read", (user_key,), (_user_with_team_steps(keys, effect.project_id),))
    user = _user(reply[0]) if reply else None
    return None if user is None else (user, _team(reply[1]) if reply[1] else None)


@_plans(FindUserByIndex)
def _find_user_by_index(keys: KeySpace, effect: FindUserByIndex) -> Plan[User | None]:
    p = effect.project_id
    return _user(first((yield by_index(keys.user_index(p, effect.index), effect.key, keys.user(p, ""), "r"))))


@_plans(ListUsers)
def _list_users(keys: KeySpace, effect: ListUsers) -> Plan[tuple[User, ...]]:
    if effect.limit is not None and effect.limit <= 0:
        return ()
    p, rev = effect.project_id, ["REV"] if effect.descending else []
    # From the cursor's rank (O(log n)), then by rank a page at a time; members whose record is gone are skipped.
    steps = [call("ZREVRANK" if rev else "ZRANK", key(1), effect.cursor, need=1)] if effect.cursor is not None else []
    user = call("HGETALL", cat(keys.user(p, ""), MEMBER), t="r", need=1, out=1)
    paging = {"page": 256} if effect.limit is None else {"limit": effect.limit}
    steps.append(
        each("ZRANGE", key(1), FIRST, LAST, *rev, do=[user], out=1, **paging, **({"from": ref(1)} if steps else {}))
    )
    return tuple(_required(_user(item)) for item in first((yield read((keys.user_order(p),), steps))) or ())


@_plans(ListSessions)
def _list_sessions(keys: KeySpace, effect: ListSessions) -> Plan[tuple[Session, ...]]:
    project_id = effect.project_id
    # The ids of sessions gone (by TTL) are removed from the set.
    gone = ["SREM", key(1), MEMBER]
    session = call("HGETALL", cat(keys.session(project_id, ""), MEMBER), need=1, miss=gone, out=1)
    reply = yield read(
        (keys.user_sessions(project_id, effect.user_id),), [each("SMEMBERS", key(1), do=[session], out=1)]
    )
    sessions = [_required(_session(item)) for item in reply[0]]
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


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


def _invitation(reply: object) -> VerificationCode | None:
    code = _code(reply)
    return code if code is not None and code.purpose == CodePurpose.TEAM_INVITATION else None


@_plans(LoadTeamInvitation)
def _load_team_invitation(keys: KeySpace, effect: LoadTeamInvitation) -> Plan[VerificationCode | None]:
    # The invitation's key holds its code's hash.
    p = effect.project_id
    steps = [call("GET", key(1), need=1), call("HGETALL", cat(keys.code(p, ""), ref(1)), out=1)]
    return _invitation(first((yield read((keys.invitation(p, effect.invitation_id),), steps))))


@_plans(ListTeamInvitations)
def _list_team_invitations(keys: KeySpace, effect: ListTeamInvitations) -> Plan[tuple[VerificationCode, ...]]:
    project_id, team_id = effect.project_id, effect.team_id
    indexes: tuple[str, ...]
    if team_id is not None:
        indexes = (keys.team_invitations(project_id, team_id),)
    else:
        indexes = tuple(keys.invitations_to(project_id, email) for email in dict.fromkeys(effect.emails))
    if not indexes:
        return ()
    # The invitations the indexes list (ZUNION: each once), those whose keys are gone skipped.
    code_hash = call("GET", cat(keys.invitation(project_id, ""), MEMBER), need=1)
    code = call("HGETALL", cat(keys.code(project_id, ""), ref(1)), need=1, out=1)
    union = each("ZUNION", len(indexes), *(key(i + 1) for i in range(len(indexes))), do=[code_hash, code], out=1)
    reply = yield read(indexes, [union])
    found = [code for code in map(_invitation, reply[0]) if code is not None]
    if team_id is not None:
        found = [code for code in found if code.team_id == team_id]
    else:
        found = [code for code in found if code.email in effect.emails]
    return tuple(sorted(found, key=lambda c: (c.created_at_millis, c.id or "")))


def _stored_channels(user_id: str, reply: Any) -> tuple[ContactChannel, ...]:
    stored = (contact_channel_from_json(user_id, orjson.loads(text)) for text in _pairs(reply).values())
    return tuple(sorted(stored, key=lambda c: (c.created_at_millis, c.id)))  # as the memory store lists them


def channel_steps(user: Any, channels: Any, index: Any, addresses: list[Any], n: int = 0) -> list[dict[str, Any]]:
    """Read steps (after `n` others): the user (needed), their channels, the addresses (`addresses`, the primary,
    the channels'), and the index entries of those addresses (false when none). What `user_channels` reads."""
    return [
        call("HGETALL", user, t="r", need=1, out=1),
        call("HGETALL", channels, out=1),
        call("HGET", user, "primary_email", t="j"),
        call("HVALS", channels, t="j", f="value"),
        {"list": [*addresses, {"s": n + 3}, {"s": n + 4}], "out": 1},
        call("HMGET", index, {"s": n + 5}, out=1),
    ]


def user_channels(reply: Any) -> UserChannels | None:
    """A `channel_steps` reply, read."""
    user = _user(reply[0]) if reply else None
    if user is None:
        return None
    holders = {_text(a): (None if h is None else _text(h)) for a, h in zip(reply[2], reply[3] or (), strict=True)}
    return UserChannels(user, _stored_channels(user.id, reply[1]), dict(sorted(holders.items())))


@_plans(ListContactChannels)
def _list_contact_channels(keys: KeySpace, effect: ListContactChannels) -> Plan[UserChannels | None]:
    p, user_id = effect.project_id, effect.user_id
    steps = channel_steps(key(1), key(2), key(3), list(effect.addresses))
    return user_channels(
        (yield read((keys.user(p, user_id), keys.user_channels(p, user_id), keys.users_by_email(p)), steps))
    )


@_plans(ListProjectContactChannels)
def _list_project_contact_channels(
    keys: KeySpace, effect: ListProjectContactChannels
) -> Plan[tuple[ContactChannel, ...]]:
    # Every user in ListUsers order with their stored channels (one script: a consistent view of the project).
    p = effect.project_id
    user = call("HGETALL", cat(keys.user(p, ""), MEMBER), t="r", need=1, out=1)
    channels = call("HGETALL", cat(keys.user_channels(p, ""), MEMBER), out=1)
    reply = yield read((keys.user_order(p),), [each("ZRANGE", key(1), 0, -1, do=[user, channels], out=1)])
    out: list[ContactChannel] = []
    items = iter(reply[0])
    for user_json, stored in zip(items, items, strict=True):
        found = _required(_user(user_json))
        out.extend(channels_of(found, _stored_channels(found.id, stored)))
    return tuple(out)


@_plans(FindAuthAddressHolder)
def _find_auth_address_holder(keys: KeySpace, effect: FindAuthAddressHolder) -> Plan[UserChannels | None]:
    # The user the index gives the address to, with their channels (None: nobody, or a user who is gone).
    p, holder = effect.project_id, ref(1)
    user, channels = cat(keys.user(p, ""), holder), cat(keys.user_channels(p, ""), holder)
    steps = [call("HGET", key(1), effect.email, need=1), *channel_steps(user, channels, key(1), [effect.email], 1)]
    return user_channels((yield read((keys.users_by_email(p),), steps)))


@_plans(LoadProviderTokens)
def _load_provider_tokens(keys: KeySpace, effect: LoadProviderTokens) -> Plan[str | None]:
    reply = yield Call("HGET", keys.provider_tokens(effect.project_id), effect.account_row_id)
    return None if reply is None else _text(reply)


@_plans(ListProjectPermissions)
def _list_project_permissions(
    keys: KeySpace, effect: ListProjectPermissions
) -> Plan[tuple[tuple[str, tuple[str, ...]], ...]]:
    project_id, user_id = effect.project_id, effect.user_id
    if user_id is not None:
        held = yield Call("SMEMBERS", keys.user_permissions(project_id, user_id))
        return ((user_id, tuple(sorted(map(_text, held)))),) if held else ()
    # {user id, their permission ids} per user holding any.
    held = call("SMEMBERS", cat(keys.user_permissions(project_id, ""), MEMBER), need=1, out=1)
    reply = yield read(
        (keys.permission_users(project_id),), [each("SMEMBERS", key(1), do=[{"v": MEMBER, "out": 1}, held], out=1)]
    )
    items = iter(reply[0])
    found = [(_text(uid), tuple(sorted(map(_text, held)))) for uid, held in zip(items, items, strict=True)]
    return tuple(sorted(found))


@_plans(ListOutbox)
def _list_outbox(keys: KeySpace, effect: ListOutbox) -> Plan[tuple[Email, ...]]:
    if effect.limit <= 0:
        return ()
    outbox = keys.outbox(effect.project_id)
    if effect.to is None:
        items = yield Call("LRANGE", outbox, 0, effect.limit - 1)
    else:
        # The first `limit` items (newest first) that start with the address's prefix, 200 read at a time.
        item = {"v": MEMBER, "pre": _outbox_prefix(effect.to), "need": 1, "out": 1}
        reply = yield read(
            (outbox,), [each("LRANGE", key(1), FIRST, LAST, do=[item], page=200, limit=effect.limit, out=1)]
        )
        items = reply[0]
    return tuple(_required(_email(item)) for item in items)
