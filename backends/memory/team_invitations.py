"""The memory store: team invitations (one-time codes in `Tenant.codes`, found by id through
`Tenant.team_invitations`)."""

from __future__ import annotations

from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    AcceptTeamInvitation,
    CreateTeamInvitation,
    InvitationAcceptance,
    ListTeamInvitations,
    LoadTeamInvitation,
    RevokeTeamInvitation,
)
from identity_proto.records import CodePurpose, Membership, VerificationCode, replaced


def record_membership_created(tenant: Tenant, membership: Membership) -> None:
    """`team_membership.created`, then one `team_permission.created` per permission the membership got."""
    team_id, user_id = membership.team_id, membership.user_id
    tenant.record_event("team_membership.created", ids=(team_id, user_id))
    for permission_id in membership.permissions:
        tenant.record_event("team_permission.created", ids=(permission_id, team_id, user_id))


#: Ids whose code is gone (swept by `codes` once expired) are dropped every this many new invitations.
_PRUNE_EVERY = 256


def _invitation(tenant: Tenant, invitation_id: str) -> VerificationCode | None:
    code_hash = tenant.team_invitations.get(invitation_id)
    code = None if code_hash is None else tenant.codes.get(code_hash)
    return code if code is not None and code.purpose == CodePurpose.TEAM_INVITATION else None


@_performs(CreateTeamInvitation)
def _create_team_invitation(store: MemoryStore, effect: CreateTeamInvitation) -> bool:
    tenant = store.tenant(effect.project_id)
    code = effect.code
    if code.id is None or code.email is None or code.team_id not in tenant.teams:
        return False
    tenant.codes[code.code_hash] = code
    tenant.team_invitations[code.id] = code.code_hash
    if len(tenant.team_invitations) % _PRUNE_EVERY == 0:
        for gone in [i for i, code_hash in tenant.team_invitations.items() if code_hash not in tenant.codes]:
            del tenant.team_invitations[gone]
    return True


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


@_performs(RevokeTeamInvitation)
def _revoke_team_invitation(store: MemoryStore, effect: RevokeTeamInvitation) -> bool:
    tenant = store.tenant(effect.project_id)
    code = _invitation(tenant, effect.invitation_id)
    if code is None or code.team_id != effect.team_id:
        return False
    del tenant.codes[code.code_hash]
    del tenant.team_invitations[effect.invitation_id]
    if not any(other.nonce_hash == code.nonce_hash for other in tenant.codes.values()):
        tenant.nonce_attempts.pop(code.nonce_hash, None)
    return True


@_performs(AcceptTeamInvitation)
def _accept_team_invitation(store: MemoryStore, effect: AcceptTeamInvitation) -> InvitationAcceptance:
    tenant = store.tenant(effect.project_id)
    membership = effect.membership
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.purpose != CodePurpose.TEAM_INVITATION or code.team_id != membership.team_id:
        return InvitationAcceptance.NOT_FOUND
    if effect.now_ms >= code.expires_at_millis:
        return InvitationAcceptance.EXPIRED
    if code.used:
        return InvitationAcceptance.ALREADY_USED
    if membership.user_id not in tenant.users:
        return InvitationAcceptance.USER_NOT_FOUND
    if membership.team_id not in tenant.teams:
        return InvitationAcceptance.TEAM_NOT_FOUND
    tenant.codes[code.code_hash] = replaced(code, {"used": True})
    key = (membership.team_id, membership.user_id)
    if key in tenant.memberships:
        return InvitationAcceptance.ALREADY_MEMBER
    tenant.memberships[key] = membership
    record_membership_created(tenant, membership)  # webhooks
    return InvitationAcceptance.ACCEPTED
