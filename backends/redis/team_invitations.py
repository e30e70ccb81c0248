"""Team invitations: one-time codes (`<p>code:<hash>`) found by id (`<p>invitation:<id>`) and listed by team and by
address (two ZSETs scored by expiry): reads, and how a `Commit`'s guards and writes of them become the commit
script's ops."""

from __future__ import annotations

from backends.redis.codecs import _code, _json_fields
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.plan import Plan, _plans
from backends.redis.read import MEMBER, call, cat, each, first, key, read, ref
from identity_proto.effects import (
    DropInvitation,
    InvitationIsStored,
    ListTeamInvitations,
    LoadTeamInvitation,
    PutInvitation,
)
from identity_proto.records import CodePurpose, VerificationCode


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


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes


@guards(InvitationIsStored)
def _invitation_is_stored(ops: Ops, position: int, guard: InvitationIsStored) -> None:
    ops.guards.append([position, "exists", ops.key(ops.space.code(ops.project_id, guard.code_hash)), 1])


@writes(PutInvitation)
def _put_invitation(ops: Ops, write: PutInvitation) -> None:
    # The code as PutCode stores it (its nonce's attempt counter kept if attempts came first); the
    # id entry and both index entries expire with it (`GRACE_MS` past its expiry: TTLs only collect garbage), and
    # index entries whose keys expired more than the grace ago are dropped on the way.
    space, p, code = ops.space, ops.project_id, write.code
    expires = str(code.expires_at_millis + GRACE_MS)
    code_key, nonce_key = ops.key(space.code(p, code.code_hash)), ops.key(space.nonce(p, code.nonce_hash))
    invitation_key = ops.key(space.invitation(p, code.id or ""))
    ops.put(code_key, _json_fields(code))
    ops.writes.append(["pexpireat", code_key, expires])
    ops.writes += [["set", nonce_key, "0", "NX"], ["extend", nonce_key, expires]]
    ops.writes += [["set", invitation_key, code.code_hash], ["pexpireat", invitation_key, expires]]
    drop_before = f"({code.created_at_millis - GRACE_MS}"
    for index in (space.team_invitations(p, code.team_id or ""), space.invitations_to(p, code.email or "")):
        index_key = ops.key(index)
        ops.writes.append(["zremrangebyscore", index_key, "-inf", drop_before])
        ops.writes.append(["zadd", index_key, str(code.expires_at_millis), code.id or ""])
        ops.writes.append(["extend", index_key, expires])


@writes(DropInvitation)
def _drop_invitation(ops: Ops, write: DropInvitation) -> None:
    space, p, code = ops.space, ops.project_id, write.code
    ops.writes.append(["del", ops.key(space.code(p, code.code_hash))])
    ops.writes.append(["del", ops.key(space.invitation(p, code.id or ""))])
    ops.writes.append(["zrem", ops.key(space.team_invitations(p, code.team_id or "")), code.id or ""])
    ops.writes.append(["zrem", ops.key(space.invitations_to(p, code.email or "")), code.id or ""])
