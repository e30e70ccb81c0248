"""The memory store: team invitations (one-time codes in `Tenant.codes`, found by id through
`Tenant.team_invitations`): reads, and the guards and writes a `Commit` of them uses."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    DropInvitation,
    InvitationIsStored,
    ListTeamInvitations,
    LoadTeamInvitation,
    PutInvitation,
)
from identity_proto.records import CodePurpose, VerificationCode

#: Ids whose code is gone (swept by `codes` once expired) are dropped every this many new invitations.
_PRUNE_EVERY = 256


def _invitation(tenant: Tenant, invitation_id: str) -> VerificationCode | None:
    code_hash = tenant.team_invitations.get(invitation_id)
    code = None if code_hash is None else tenant.codes.get(code_hash)
    return code if code is not None and code.purpose == CodePurpose.TEAM_INVITATION else None


@_performs(LoadTeamInvitation)
def _load_team_invitation(store: MemoryStore, effect: LoadTeamInvitation) -> VerificationCode | None:
    return _invitation(store.tenant(effect.project_id), effect.invitation_id)


@_performs(ListTeamInvitations)
def _list_team_invitations(store: MemoryStore, effect: ListTeamInvitations) -> tuple[VerificationCode, ...]:
    tenant = store.tenant(effect.project_id)
    found = []
    for invitation_id in tenant.team_invitations:
        code = _invitation(tenant, invitation_id)
        if code is None:
            continue
        if code.team_id == effect.team_id if effect.team_id is not None else code.email in effect.emails:
            found.append(code)
    return tuple(sorted(found, key=lambda c: (c.created_at_millis, c.id or "")))


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes


@checks(InvitationIsStored)
def _invitation_is_stored(tenant: Tenant, guard: InvitationIsStored) -> bool:
    return guard.code_hash in tenant.codes


@applies(PutInvitation)
def _put_invitation(tenant: Tenant, write: PutInvitation) -> None:
    code = write.code
    tenant.codes[code.code_hash] = code
    tenant.team_invitations[code.id or ""] = code.code_hash
    if len(tenant.team_invitations) % _PRUNE_EVERY == 0:
        for gone in [i for i, code_hash in tenant.team_invitations.items() if code_hash not in tenant.codes]:
            del tenant.team_invitations[gone]


@applies(DropInvitation)
def _drop_invitation(tenant: Tenant, write: DropInvitation) -> None:
    code = write.code
    del tenant.codes[code.code_hash]
    tenant.team_invitations.pop(code.id or "", None)
    if not any(other.nonce_hash == code.nonce_hash for other in tenant.codes.values()):
        tenant.nonce_attempts.pop(code.nonce_hash, None)
