"""Anonymous users (reference part 2, §4): the sign-up, and the upgrade in place that the sign-ups run when the
caller is an anonymous user.

An anonymous user is an ordinary user with `is_anonymous` set: no e-mail, no sign-in method, restricted with the
reason `anonymous`, their access tokens signed with a key of their own (`tokens.access_token_key`) and
accepted only with the allow-anonymous header (`auth`). The official SDK's `getUser({or: "anonymous"})` signs
one up when nobody is signed in; every later sign-up it sends carries the anonymous access token, and then that
same user (same id) becomes the signed-up one instead of a new user being made: password sign-up and code sign-in
of an unknown address call `anonymous_caller` and `upgrade_anonymous_user` here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from identity_proto.changes import TeamChanges, UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    ANONYMOUS_PERSONAL_TEAM_NAME,
    Flow,
    ListTeams,
    LoadUser,
    Together,
    UpgradeRefusal,
    perform,
)
from identity_proto.effects.commit import (
    Announce,
    CommitConflict,
    DropIndex,
    FieldsAre,
    Guard,
    IndexIs,
    IndexName,
    PatchTeam,
    PatchUser,
    RecordKind,
    SetIndex,
    Write,
    commit,
)
from identity_proto.effects.contact_channels import ListContactChannels
from identity_proto.effects.oauth import SetOAuthAccounts, oauth_index_key
from identity_proto.flows.sessions import issue_access_token, new_session
from identity_proto.flows.signin import NewUser, commit_new_user, personal_team_name, sign_up_parts
from identity_proto.http import Response
from identity_proto.records import OAuthAccount, Project, Session, Team, User
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid

__all__ = [
    "Anonymous",
    "anonymous_caller",
    "commit_upgrade",
    "read_anonymous",
    "sign_up_anonymously",
    "store_anonymous_user",
    "upgrade_anonymous_user",
]


@dataclass(frozen=True, slots=True)
class Anonymous:
    """A user as an upgrade reads it, in one trip: the user, the teams it is a member of, and the addresses of its
    stored (non-primary) contact channels."""

    user: User
    teams: tuple[Team, ...] = ()
    channel_values: frozenset[str] = frozenset()


def sign_up_anonymously(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/anonymous/sign-up (any access type, no body): a new anonymous user, its personal team when the
    project gives one ("Personal Team": it has no name or e-mail yet), its default project permissions (reference
    part 2 §4) and a session, in one commit (`store_anonymous_user`) -> {access_token, refresh_token, user_id}.

    Allowed even when sign-up is disabled (reference §4, e2e); a token sent along is ignored: every call makes a
    new user (inferred there; what the SDK relies on). The session lives as long as any other
    (`refresh_token_lifetime_ms`, 365 days by default: the original's)."""
    project = ctx.require_auth().project
    user = User(
        id=new_uuid(ctx.entropy),
        signed_up_at_millis=ctx.now_ms,
        last_active_at_millis=ctx.now_ms,
        is_anonymous=True,
    )
    parts = sign_up_parts(ctx, project, user)
    refresh_token, session = new_session(ctx, user.id)
    stored = yield from store_anonymous_user(project.id, parts, session)
    access_token = issue_access_token(ctx, project, stored, session.id)
    return json_response(200, {"access_token": access_token, "refresh_token": refresh_token, "user_id": stored.id})


def store_anonymous_user(project_id: str, parts: NewUser, session: Session) -> Flow[User]:
    """Store an anonymous sign-up through the one new-user builder (`commit_new_user`): the user (no e-mail, so no
    index entry), its personal team and permissions when given, and its session, together or not at all. A user
    with its id existing already is a conflict (random ids: practically never; the flow runs again)."""
    user = parts.user
    if not user.is_anonymous or user.auth_email is not None:
        raise ValueError("an anonymous sign-up stores an anonymous user without an auth e-mail")
    return (yield from commit_new_user(project_id, parts, session))


def read_anonymous(project_id: str, user_id: str) -> Flow[Anonymous | None]:
    """What an upgrade of `user_id` decides on (`Anonymous`), read together; None when there is no such user."""
    channels, teams = yield from perform(
        Together((ListContactChannels(project_id, user_id), ListTeams(project_id, user_id)))
    )
    if channels is None:
        return None
    return Anonymous(channels.user, tuple(teams), frozenset(c.value for c in channels.stored))


def anonymous_caller(ctx: RequestContext, project: Project) -> Flow[Anonymous | None]:
    """The anonymous user whose access token came with this request, as stored, with what upgrading it reads; None
    when there is no token, or its user is not anonymous (any more) or is gone. A sign-up ignores a non-anonymous
    token (reference §4, e2e), and an anonymous token whose user was upgraded since is not anonymous any more: it
    is ignored too."""
    auth = ctx.require_auth()
    claims = auth.token_claims
    if claims is None or claims.get("is_anonymous") is not True or auth.user_id is None:
        return None  # the claims cannot lie (signed with the anonymous users' key), but may be out of date
    found = yield from read_anonymous(project.id, auth.user_id)
    return found if found is not None and found.user.is_anonymous else None


def upgrade_anonymous_user(
    ctx: RequestContext,
    project: Project,
    caller: Anonymous,
    changes: dict[str, object],
    *,
    keep_when_absent: Iterable[str] = (),
    oauth_account: OAuthAccount | None = None,
) -> Flow[User | UpgradeRefusal]:
    """Make the anonymous user of `caller` a signed-up user in place (same id), with `changes` (its new address and
    sign-in method; those named in `keep_when_absent` only when given): no longer anonymous, signed up now (never
    earlier than it was: the clock may have been moved back), active now; its display name and metadata stay. Its
    "Personal Team" is renamed as a new user's personal team would be named ("<display name>'s Team", else
    "<e-mail>'s Team"). One commit (`commit_upgrade`)."""
    user, kept = caller.user, set(keep_when_absent)
    all_changes = UserChanges.of(
        {
            **{k: v for k, v in changes.items() if v is not None or k not in kept},
            "is_anonymous": False,
            "signed_up_at_millis": max(ctx.now_ms, user.signed_up_at_millis),
            "last_active_at_millis": max(ctx.now_ms, user.last_active_at_millis),
        }.items()
    )
    # The original names it from the sign-up's own fields, which carry no display name, so it would call Ada's
    # team "ada@example.com's Team" even when she set her name while anonymous; her name is what she would expect.
    team_name = personal_team_name(all_changes.apply(user))
    return (yield from commit_upgrade(project.id, caller, all_changes, team_name, oauth_account))


#: What an upgrade decides on in the user: that it is anonymous, its address (the e-mail index moves) and its
#: linked accounts (an OAuth upgrade appends one).
_UPGRADE_READS = ("is_anonymous", "primary_email", "primary_email_auth_enabled", "oauth_accounts")


def commit_upgrade(
    project_id: str,
    read: Anonymous,
    changes: Any,
    personal_team_name: str,
    oauth_account: OAuthAccount | None = None,
) -> Flow[User | UpgradeRefusal]:
    """Upgrade the anonymous user of `read` in one commit: only while it exists and is anonymous (NOT_FOUND /
    NOT_ANONYMOUS otherwise), and only if its new auth e-mail is none of its other channels and nobody's in the
    e-mail index (EMAIL_TAKEN): `changes` (which make it non-anonymous and give it its address), the e-mail index
    in step, every team it is a member of still called "Personal Team" renamed `personal_team_name`, and with
    `oauth_account`, that provider account appended to its accounts and, when it signs in, claimed in the OAuth
    index (ACCOUNT_TAKEN if another user holds it; checked before the address). Records `user.updated`. Guarded on
    what it read; a refusal writes nothing; a concurrent change of a renamed team raises `CommitConflict`."""
    changes = UserChanges.of(changes)
    if changes.as_dict().get("is_anonymous", True) is not False:
        raise ValueError("an upgrade makes the user non-anonymous")
    user = read.user
    if not user.is_anonymous:
        return UpgradeRefusal.NOT_ANONYMOUS
    upgraded = changes.apply(user)
    if upgraded.primary_email not in (None, user.primary_email) and upgraded.primary_email in read.channel_values:
        return UpgradeRefusal.EMAIL_TAKEN  # contact channels: one address is never two channels of one user
    user_guard = FieldsAre(user, _UPGRADE_READS)
    guards: list[Guard] = [user_guard]
    writes: list[Write] = [PatchUser(user.id, changes)]
    account_guard = email_guard = None
    if oauth_account is not None:
        writes.append(SetOAuthAccounts(user.id, (*user.oauth_accounts, oauth_account)))
        if oauth_account.allow_sign_in:
            key = oauth_index_key(oauth_account.provider_config_id, oauth_account.account_id)
            account_guard = IndexIs(IndexName.OAUTH, key, None)
            guards.append(account_guard)
            writes.append(SetIndex(IndexName.OAUTH, key, user.id))
    old, new = user.auth_email, upgraded.auth_email
    if new != old:
        if old is not None:
            writes.append(DropIndex(IndexName.EMAIL, old))
        if new is not None:
            email_guard = IndexIs(IndexName.EMAIL, new, None)
            guards.append(email_guard)
            writes.append(SetIndex(IndexName.EMAIL, new, user.id))
    for team in read.teams:
        if team.display_name == ANONYMOUS_PERSONAL_TEAM_NAME:
            guards.append(FieldsAre(team, ("display_name",)))
            writes.append(PatchTeam(team.id, TeamChanges.of(display_name=personal_team_name)))
    try:
        (stored,) = yield from commit(
            project_id,
            tuple(guards),
            tuple(writes),
            (Announce("user.updated", (RecordKind.USER, user.id), with_team=True),),
            ((RecordKind.USER, user.id),),
        )
    except CommitConflict as conflict:
        if conflict.guard is account_guard:
            return UpgradeRefusal.ACCOUNT_TAKEN
        if conflict.guard is email_guard:
            return UpgradeRefusal.EMAIL_TAKEN
        if conflict.guard is user_guard:
            now = yield from perform(LoadUser(project_id, user.id))
            if now is None:
                return UpgradeRefusal.NOT_FOUND
            if not now.is_anonymous:
                return UpgradeRefusal.NOT_ANONYMOUS
        raise
    assert isinstance(stored, User)
    return stored
