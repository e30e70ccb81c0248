"""Anonymous users (reference part 2, §4): the sign-up, and the upgrade in place that the sign-ups run when the
caller is an anonymous user.

An anonymous user is an ordinary user with `is_anonymous` set: no e-mail, no sign-in method, restricted with the
reason `anonymous`, their access tokens signed with a key of their own (`tokens.anonymous_users_scalar`) and
accepted only with the allow-anonymous header (`auth`). The official SDK's `getUser({or: "anonymous"})` signs
one up when nobody is signed in; every later sign-up it sends carries the anonymous access token, and then that
same user (same id) becomes the signed-up one instead of a new user being made: password sign-up and code sign-in
of an unknown address call `anonymous_caller` and `upgrade_anonymous_user` here.
"""

from __future__ import annotations

from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    LoadUser,
    UpgradeAnonymousUser,
    UpgradeRefusal,
    perform,
)
from identity_proto.flows.sessions import issue_access_token, new_session
from identity_proto.flows.signin import NewUser, commit_new_user, personal_team_name, sign_up_parts
from identity_proto.http import Response
from identity_proto.records import Project, Session, User
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid

__all__ = ["anonymous_caller", "sign_up_anonymously", "store_anonymous_user", "upgrade_anonymous_user"]


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


def anonymous_caller(ctx: RequestContext, project: Project) -> Flow[User | None]:
    """The anonymous user whose access token came with this request, as stored; None when there is no token, or
    its user is not anonymous (any more) or is gone. A sign-up ignores a non-anonymous token (reference §4, e2e),
    and an anonymous token whose user was upgraded since is not anonymous any more: it is ignored too."""
    auth = ctx.require_auth()
    claims = auth.token_claims
    if claims is None or claims.get("is_anonymous") is not True or auth.user_id is None:
        return None  # the claims cannot lie (signed with the anonymous users' key), but may be out of date
    user = yield from perform(LoadUser(project.id, auth.user_id))
    return user if user is not None and user.is_anonymous else None


def upgrade_anonymous_user(
    ctx: RequestContext, project: Project, user: User, changes: dict[str, object]
) -> Flow[User | UpgradeRefusal]:
    """Make the anonymous `user` a signed-up user in place (same id), with `changes` (its new address and sign-in
    method): no longer anonymous, signed up now (never earlier than it was: the clock may have been moved back),
    active now; its display name and metadata stay. Its "Personal Team" is renamed as a new user's personal team
    would be named ("<display name>'s Team", else "<e-mail>'s Team"). One atomic step (`UpgradeAnonymousUser`):
    EMAIL_TAKEN when the address was taken meanwhile, NOT_ANONYMOUS / NOT_FOUND when the user was upgraded or
    deleted meanwhile (nothing written)."""
    all_changes = UserChanges.of(
        {
            **changes,
            "is_anonymous": False,
            "signed_up_at_millis": max(ctx.now_ms, user.signed_up_at_millis),
            "last_active_at_millis": max(ctx.now_ms, user.last_active_at_millis),
        }.items()
    )
    # The original names it from the sign-up's own fields, which carry no display name, so it would call Ada's
    # team "ada@example.com's Team" even when she set her name while anonymous; her name is what she would expect.
    team_name = personal_team_name(all_changes.apply(user))
    return (yield from perform(UpgradeAnonymousUser(project.id, user.id, all_changes, team_name)))
