"""Users: read, update (field by field, access type by access type), create, list and delete (reference §3-§4).

The update is the spec's largest operation. Its checks run in the original's order (reference §3.2), and nothing
is written until all of them passed; the write itself is one `Commit` (the changed fields, the e-mail index moves
and, on a password change, the end of every session the flow read, with `user.updated`), guarded by exactly what
the decision read, so a request that fails changes nothing and a concurrent change of what it read re-runs it.
A PATCH whose rules read nothing of the stored user (a display name, metadata...) commits blind: one trip, guarded
by the user's existence and the caller's session, answering with the user and their selected team.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import identity_proto.schemas as schemas
from identity_proto.auth import AccessType
from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    ChannelsAre,
    CommitConflict,
    DropChannel,
    DropMembership,
    DropSession,
    DropUser,
    Exists,
    Flow,
    HashPassword,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListSessions,
    ListUsers,
    LoadMembership,
    LoadTeam,
    LoadUser,
    LoadUserWithTeam,
    StorageEffect,
    Together,
    UserChannels,
    address_taken,
    channel_commit,
    claimed,
    find_user_by_email,
    perform,
)
from identity_proto.effects.api_keys import DropApiKey, UserApiKeysAre
from identity_proto.effects.commit import (
    Announce,
    CommitGuard,
    CommitWrite,
    DropIndex,
    FieldsAre,
    IndexIs,
    IndexName,
    PatchUser,
    RecordKind,
    ReferencedBy,
    SetIndex,
    commit,
)
from identity_proto.effects.oauth import DropProviderTokens, find_user_by_oauth_account, oauth_index_key
from identity_proto.effects.passkeys import SetPasskeys
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.effects.teams import UserTeamsAre
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows.contact_channels import MAX_CHANNELS_PER_USER
from identity_proto.flows.signin import store_new_user
from identity_proto.http import Response
from identity_proto.passwords import MAX_PASSWORD_LENGTH, is_supported_hash, too_long
from identity_proto.records import ApiKeyType, ContactChannel, Project, RiskScores, Session, Team, User, replaced
from identity_proto.render import json_response, render_user
from identity_proto.tokens import new_uuid
from identity_proto.users import checked_profile_image, email_taken, normalize_email, restricted_reason

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ClientUserUpdateBody,
        ListUsersQuery,
        ServerUserUpdateBody,
        UserCreateBody,
        UserIdParams,
    )

__all__ = [
    "create_user",
    "delete_me",
    "delete_user",
    "drop_user",
    "get_me",
    "get_user",
    "list_users",
    "load_rendered_user",
    "patch_user",
    "save_user",
    "update_me",
    "update_user",
]

#: Fields whose rules read the user's current state (e-mail, password, anonymity, restriction): a PATCH touching
#: any of them reads the user first; one touching none of them is a single write.
_NEEDS_CURRENT_USER = frozenset(
    {
        "primary_email",
        "primary_email_verified",
        "primary_email_auth_enabled",
        "password",
        "password_hash",
        "is_anonymous",
        "restricted_by_admin",
        "restricted_by_admin_reason",
        "restricted_by_admin_private_details",
        "passkey_auth_enabled",  # false removes the user's passkeys
    }
)

_EMAIL_FIELDS = frozenset({"primary_email", "primary_email_verified", "primary_email_auth_enabled"})

_RESTRICTION_FIELDS = frozenset(
    {"restricted_by_admin", "restricted_by_admin_reason", "restricted_by_admin_private_details"}
)

#: Fields copied from the body to the record as they are (after validation).
_PLAIN_FIELDS = (
    "display_name",
    "client_metadata",
    "client_read_only_metadata",
    "server_metadata",
    "totp_secret_base64",
    "country_code",
)


def load_rendered_user(ctx: RequestContext, project: Project, user: User) -> Flow[dict[str, Any]]:
    """`user` rendered for the caller, with its selected team."""
    team: Team | None = None
    if user.selected_team_id is not None:
        team = yield from perform(LoadTeam(project.id, user.selected_team_id))
    auth = ctx.require_auth()
    return render_user(user, auth.access_type, project.config, team, caller_id=auth.user_id, compat=ctx.options.compat)


def _read(user: User | None) -> User:
    """The user's current state, which a rule for a field of `_NEEDS_CURRENT_USER` reads (the flow loaded it)."""
    if user is None:
        raise AssertionError("a rule read the current user, which is loaded only for _NEEDS_CURRENT_USER fields")
    return user


def _my_id(ctx: RequestContext) -> str:
    user_id = ctx.require_auth().user_id
    if user_id is None:
        raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
    return user_id


# --------------------------------------------------------------------------------------------------------------
# Reading


def get_me(ctx: RequestContext) -> Flow[Response]:
    """GET /users/me: the signed-in user, in the caller's view."""
    auth = ctx.require_auth()
    found = yield from perform(LoadUserWithTeam(auth.project.id, _my_id(ctx)))
    if found is None:  # deleted since the token was issued: there is no "me" any more
        raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
    rendered = render_user(
        found[0], auth.access_type, auth.project.config, found[1], caller_id=auth.user_id, compat=ctx.options.compat
    )
    return json_response(200, rendered)


def get_user(ctx: RequestContext[None, object, UserIdParams]) -> Flow[Response]:
    """GET /users/{user_id} (server, admin)."""
    auth = ctx.require_auth()
    found = yield from perform(LoadUserWithTeam(auth.project.id, ctx.params.user_id))
    if found is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    rendered = render_user(
        found[0], auth.access_type, auth.project.config, found[1], caller_id=auth.user_id, compat=ctx.options.compat
    )
    return json_response(200, rendered)


def list_users(ctx: RequestContext[None, ListUsersQuery]) -> Flow[Response]:
    """GET /users (server, admin): filtered, ordered by sign-up time then id, with the original's inclusive
    cursor: `next_cursor` is the id of the first user of the next page."""
    project = ctx.require_auth().project
    query: ListUsersQuery = ctx.query
    include_anonymous = query.include_anonymous == "true"
    only_anonymous = query.only_anonymous == "true"
    if only_anonymous and not include_anonymous:
        raise KnownError(ErrorCode.ONLY_ANONYMOUS_REQUIRES_INCLUDE_ANONYMOUS)
    include_restricted = include_anonymous or query.include_restricted == "true"
    members: set[str] | None = None
    if query.team_id is not None:
        memberships = yield from perform(ListMemberships(project.id, team_id=query.team_id))
        members = {m.user_id for m in memberships}
    needle = query.query.lower() if query.query else None
    id_needle = re.sub(r"[^A-Za-z0-9\-_.]", "", query.query or "").lower()

    def wanted(user: User) -> bool:
        if (only_anonymous and not user.is_anonymous) or (user.is_anonymous and not include_anonymous):
            return False
        if not include_restricted and restricted_reason(user, project.config) is not None:
            return False
        if members is not None and user.id not in members:
            return False
        if needle is not None:
            haystacks = (user.display_name or "", user.primary_email or "")
            return any(needle in h.lower() for h in haystacks) or user.id == id_needle
        return True

    want = None if query.limit is None else query.limit + 1
    found: list[User] = []
    cursor = query.cursor
    chunk = 256 if want is None else max(2 * want, 64)
    while want is None or len(found) < want:
        batch = yield from perform(ListUsers(project.id, limit=chunk, cursor=cursor, descending=query.desc == "true"))
        found.extend(u for u in (batch if cursor is None or not found else batch[1:]) if wanted(u))
        if len(batch) < chunk:
            break
        cursor = batch[-1].id  # inclusive: the next batch starts with it again, and skips it above
    next_cursor = None
    if want is not None and len(found) >= want:
        next_cursor = found[want - 1].id
        found = found[: want - 1]
    items = []
    for user in found:
        items.append((yield from load_rendered_user(ctx, project, user)))
    return json_response(200, {"items": items, "is_paginated": True, "pagination": {"next_cursor": next_cursor}})


# --------------------------------------------------------------------------------------------------------------
# Updating


def update_me(ctx: RequestContext[ClientUserUpdateBody]) -> Flow[Response]:
    """PATCH /users/me: clients may send only the client fields (others are a SCHEMA_ERROR before this runs)."""
    return (yield from _update(ctx, _my_id(ctx), ctx.body, me=True))


def update_user(ctx: RequestContext[ServerUserUpdateBody, None, UserIdParams]) -> Flow[Response]:
    """PATCH /users/{user_id} (server, admin)."""
    return (yield from _update(ctx, ctx.params.user_id, ctx.body, me=False))


def _update(ctx: RequestContext, user_id: str, body: ClientUserUpdateBody, *, me: bool) -> Flow[Response]:
    auth = ctx.require_auth()
    project = auth.project
    given = body.model_fields_set
    server_body = body if isinstance(body, schemas.ServerUserUpdateBody) else None

    # 1. password checks, before anything is looked up (reference §3.2 order)
    if server_body is not None:
        _check_password_fields(server_body, given)

    # 2. the user, when a rule needs its current state (a PATCH of plain fields goes straight to the write: one
    #    round trip; the commit itself says whether the user exists). Read with it, in the same trip: the user's
    #    channels and the holder of the new address (a new primary e-mail), their sessions (a new password).
    current: User | None = None  # read only when a rule needs it: the rules below take None otherwise
    read = _NOTHING_READ
    if given & _NEEDS_CURRENT_USER:
        password = server_body is not None and ("password" in given or "password_hash" in given)
        read = yield from _read_current(project.id, user_id, body.primary_email, "primary_email" in given, password)
        current = read.user
        if current is None:  # through `me`, a deleted user is no "me" (reference §1.2 step 9)
            raise _missing(me=me)

    changes: dict[str, Any] = {}

    # 3. the selected team must be one of the user's teams
    if "selected_team_id" in given:
        if body.selected_team_id is not None:
            membership = yield from perform(LoadMembership(project.id, body.selected_team_id, user_id))
            if membership is None:
                raise KnownError(
                    ErrorCode.TEAM_MEMBERSHIP_NOT_FOUND, details={"team_id": body.selected_team_id, "user_id": user_id}
                )
        changes["selected_team_id"] = body.selected_team_id

    # 4.-5. e-mail and sign-in methods (the rules creating a user follows too), then the password; a new primary
    #    e-mail (or none) moves the primary channel
    changes.update(sign_in_changes(current, body, given, project))
    switch: tuple[tuple[CommitGuard, ...], tuple[CommitWrite, ...]] = ((), ())
    if "primary_email" in changes and read.channels is not None:
        by_client = server_body is None
        switch = _primary_switch(read.channels, changes, given, by_client, new_uuid(ctx.entropy), ctx.now_ms)
    if body.passkey_auth_enabled is False and current is not None and current.passkeys:
        # reference §3.2: `passkey_auth_enabled: false` removes the user's passkeys (guarded: `_read_fields`)
        removed = tuple(DropIndex(IndexName.PASSKEY, passkey.credential_id) for passkey in current.passkeys)
        switch = (switch[0], (*switch[1], *removed, SetPasskeys(user_id, ())))
    password_changed = server_body is not None and ("password" in given or "password_hash" in given)
    if server_body is not None and password_changed:
        changes["password_hash"] = yield from _new_password_hash(ctx, project, _read(current), server_body)

    # 6. anonymous -> not anonymous: a fresh sign-up time
    if server_body is not None and "is_anonymous" in given and _read(current).is_anonymous:
        changes["is_anonymous"] = False
        changes["signed_up_at_millis"] = ctx.now_ms

    # 7.-8. restriction, the profile image and the plain fields (shared with creating, too)
    changes.update(profile_changes(current, body, given, auth.access_type))

    # 9. one commit (and, after a password change, no session survives), answering what the response renders:
    #    the user and their selected team (no second read); only while the caller's session lives
    #    (webhooks: every PATCH records `user.updated`, even one that changes nothing)
    live = ctx.live_session
    user_changes = UserChanges.of(changes.items())
    try:
        updated, team = yield from save_user(
            project.id,
            user_id,
            user_changes,
            current=current,
            read=read,
            read_fields=() if current is None else _read_fields(given),
            live=live,
            switch=switch,
        )
    except _UserGone:
        raise _missing(me=me) from None
    rendered = render_user(
        updated, auth.access_type, project.config, team, caller_id=auth.user_id, compat=ctx.options.compat
    )
    return json_response(200, rendered)


#: Bound once: reading a member off an enum class is several times slower than a global (EnumType.__getattr__).
_USER, _TEAM = RecordKind.USER, RecordKind.TEAM


def _missing(*, me: bool) -> KnownError:
    """The error of an update whose user is not there: through `me`, a deleted user is no "me"."""
    return KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER if me else ErrorCode.USER_NOT_FOUND)


class _UserGone(Exception):
    """`save_user` found no such user (a blind write's existence guard did not hold)."""


def save_user(
    project_id: str,
    user_id: str,
    changes: UserChanges,
    *,
    current: User | None,
    read: _Read,
    read_fields: tuple[str, ...] = (),
    live: CommitGuard | None = None,
    switch: tuple[tuple[CommitGuard, ...], tuple[CommitWrite, ...]] = ((), ()),
) -> Flow[tuple[User, Team | None]]:
    """Commit an update decided on `current` (None: decided without reading the user; then its e-mail fields must
    not change): the changed fields, the e-mail index moves, the end of the sessions `read` holds (a password
    change: no session survives), `user.updated`; guarded by `read_fields` of `current` (or the user's existence),
    the index entries moved and `live`; with the guards and writes of a primary e-mail `switch`. Answers the user
    and their selected team as stored. Raises `_UserGone`, `email_taken`, or `CommitConflict` (the flow is re-run)."""
    exists = Exists(_USER, user_id)
    patch = PatchUser(user_id, changes)
    guards: tuple[CommitGuard, ...]
    writes: tuple[CommitWrite, ...]
    if current is None:  # a blind write (most PATCHes): its tuples made directly (a switch needs the user read)
        guards = (exists,) if live is None else (live, exists)
        writes = (patch,)
    else:
        moves = yield from _email_index_moves(project_id, current, changes.apply(current), read, dict(changes))
        guards = (*(() if live is None else (live,)), *switch[0], FieldsAre(current, read_fields), *moves[0])
        writes = (*switch[1], *moves[1], patch)
    if read.sessions:
        writes += tuple([DropSession(session) for session in read.sessions])
    user = (_USER, user_id)
    try:
        updated, team = yield from commit(
            project_id,
            guards,
            writes,
            (Announce("user.updated", user, with_team=True),),
            (user, ReferencedBy(_TEAM, user, "selected_team_id")),
        )
    except CommitConflict as conflict:
        if conflict.guard is exists:
            raise _UserGone from None
        raise
    return updated, team


def patch_user(
    project_id: str,
    user_id: str,
    changes: UserChanges,
    *,
    revoke_sessions: bool = False,
    live: CommitGuard | None = None,
) -> Flow[tuple[User, Team | None] | None]:
    """An update of `changes` as they are (no body rules): read what the e-mail index rules and the end of the
    user's sessions need, then `save_user`. None when there is no such user; `email_taken` when refused."""
    fields = dict(changes)
    if not (fields.keys() & _EMAIL_FIELDS) and not revoke_sessions:
        try:
            return (yield from save_user(project_id, user_id, changes, current=None, read=_NOTHING_READ, live=live))
        except _UserGone:
            return None
    new = fields.get("primary_email")
    read = yield from _read_current(project_id, user_id, new, "primary_email" in fields, revoke_sessions)
    if read.user is None:
        return None
    names = ("primary_email", "primary_email_auth_enabled")  # what the e-mail index moves were decided on
    return (yield from save_user(project_id, user_id, changes, current=read.user, read=read, read_fields=names))


class _Read:
    """What an update read before deciding (`_read_current`)."""

    __slots__ = ("channels", "holder", "holder_read", "sessions", "user")

    def __init__(self) -> None:
        self.user: User | None = None
        #: the user's channels, with the index entries of their addresses and the new one's (primary e-mail given)
        self.channels: UserChannels | None = None
        #: the user the e-mail index gives the new primary e-mail to (`holder_read`: it was read)
        self.holder: str | None = None
        self.holder_read = False
        self.sessions: tuple[Session, ...] = ()


#: What a blind write read: nothing (shared: never changed; `_read_current` makes a `_Read` of its own).
_NOTHING_READ = _Read()


def _read_current(
    project_id: str, user_id: str, primary_email: str | None, email_given: bool, password: bool
) -> Flow[_Read]:
    """The user, and in the same trip what else the rules read: with a new primary e-mail given, the user's
    channels and the address's holder; with a new password, the user's sessions."""
    read = _Read()
    new_address = normalize_email(primary_email) if email_given and primary_email else None
    reads: list[StorageEffect[Any]] = [
        ListContactChannels(project_id, user_id, (new_address,) if new_address else ())
        if email_given
        else LoadUser(project_id, user_id)
    ]
    if new_address is not None:
        reads.append(find_user_by_email(project_id, new_address))
    if password:
        reads.append(ListSessions(project_id, user_id))
    if len(reads) > 1:
        answers = yield from perform(Together(tuple(reads)))
    else:
        answers = ((yield from perform(reads[0])),)
    first = answers[0]
    if email_given:
        if first is not None:
            read.user, read.channels = first.user, first
    else:
        read.user = first
    if new_address is not None:
        holder = answers[1]
        read.holder, read.holder_read = (None if holder is None else holder.id), True
    if password:
        read.sessions = answers[-1]
    return read


def _primary_switch(
    before: UserChannels, changes: dict[str, Any], given: set[str], by_client: bool, new_id: str, now_ms: int
) -> tuple[tuple[CommitGuard, ...], tuple[CommitWrite, ...]]:
    """A new primary e-mail (or none), as the original moves it: the old primary stays a channel of the user, no
    longer primary, its flags kept; the user's own channel with the new address becomes the primary, keeping its
    verification unless `primary_email_verified` is given and used for auth as the old primary was unless
    `primary_email_auth_enabled` is given; another address is a new channel (`new_id`, unverified unless given).
    A client's promoted or new channel follows the contact channels' rule (`claimed`): unverified, it does not sign
    in. The e-mail fields leave `changes`: the channel commit writes them. 409 USER_EMAIL_ALREADY_EXISTS when the
    new primary would sign in with an address another user holds; a client beyond `MAX_CHANNELS_PER_USER`: 400."""
    user = before.user
    new = changes.pop("primary_email")
    verified = changes.pop("primary_email_verified", False)
    auth = changes.pop("primary_email_auth_enabled", user.primary_email_auth_enabled)
    channels = list(before.channels)
    target = next((c for c in channels if c.value == new), None) if new is not None else None
    if new is not None:
        if target is None:
            if by_client and len(channels) >= MAX_CHANNELS_PER_USER:
                raise PlainError(400, f"A user can have at most {MAX_CHANNELS_PER_USER} contact channels")
            target = ContactChannel(new_id, user.id, new, bool(verified), auth, now_ms)
            channels.append(target)
        else:
            auth_given = "primary_email_auth_enabled" in given
            kept: dict[str, Any] = {"used_for_auth": auth if auth_given else user.primary_email_auth_enabled}
            if "primary_email_verified" in given:
                kept["is_verified"] = bool(verified)
            changed = replaced(target, kept)
            channels = [changed if c.id == changed.id else c for c in channels]
            target = changed
        if address_taken(target, before.holder(new)):
            raise email_taken(new)
    target_id = "" if target is None else target.id
    channels = [replaced(c, {"is_primary": c.id == target_id}) for c in channels]
    claim = None
    if target is not None:
        channels, claim = claimed(before, channels, target_id, trusted=not by_client)
    guards, writes, _after = channel_commit(before, channels, new_id, claim)
    return guards, writes


def _read_fields(given: set[str]) -> tuple[str, ...]:
    """The stored fields the rules of a body giving `given` read (what the commit guards)."""
    names: set[str] = set()
    if given & _EMAIL_FIELDS:
        names |= {"primary_email", "primary_email_auth_enabled"}
    if given & {"password", "password_hash"}:
        names.add("password_hash")
    if "is_anonymous" in given:
        names.add("is_anonymous")
    if "passkey_auth_enabled" in given:
        names.add("passkeys")
    if given & _RESTRICTION_FIELDS:
        names.add("restricted_by_admin")
    return tuple(sorted(names))


def _email_index_moves(
    project_id: str, current: User, updated: User, read: _Read, changes: dict[str, Any]
) -> Flow[tuple[list[CommitGuard], list[CommitWrite]]]:
    """The e-mail index entries an update moves, with the guards they depend on; EMAIL_TAKEN when the new primary
    e-mail is one of the user's other channels or another user signs in with it."""
    guards: list[CommitGuard] = []
    writes: list[CommitWrite] = []
    taken = changes.get("primary_email") or current.primary_email or ""
    new_primary = updated.primary_email
    # contact channels: one address is never two channels of one user (effects.contact_channels)
    stored = () if read.channels is None else read.channels.stored
    if new_primary is not None and new_primary != current.primary_email and any(c.value == new_primary for c in stored):
        raise email_taken(taken)
    old, new = current.auth_email, updated.auth_email
    if new == old:
        return guards, writes
    if new is not None:
        holder = read.holder
        if not read.holder_read or new != new_primary:
            found = yield from perform(find_user_by_email(project_id, new))
            holder = None if found is None else found.id
        if holder not in (None, current.id):
            raise email_taken(taken)
        guards.append(IndexIs(IndexName.EMAIL, new, holder))
    if old is not None:
        writes.append(DropIndex(IndexName.EMAIL, old))
    if new is not None:
        writes.append(SetIndex(IndexName.EMAIL, new, current.id))
    return guards, writes


def sign_in_changes(user: User | None, body: ClientUserUpdateBody, given: set[str], project: Project) -> dict[str, Any]:
    """The first half of the field changes a user body (an update's or a creation's) asks of `user`: e-mail and
    sign-in methods (reference §3.2 order). Pure: a rule that fails raises its KnownError. Creating and updating
    share these rules and `profile_changes`; what needs storage or hashing (the selected team, a password) and
    what differs between the two (anonymity) come between or before, in the callers. `user` is None when `given`
    holds none of `_NEEDS_CURRENT_USER` (no rule here reads it then)."""
    changes: dict[str, Any] = {}
    if given & _EMAIL_FIELDS:
        by_client = not isinstance(body, schemas.ServerUserUpdateBody)
        changes = _email_changes(_read(user), body, given, by_client=by_client)
    if "otp_auth_enabled" in given:
        if body.otp_auth_enabled and not project.config.magic_link_enabled:
            raise KnownError(ErrorCode.OTP_AUTH_NOT_ENABLED)
        changes["otp_auth_enabled"] = body.otp_auth_enabled
    if body.passkey_auth_enabled:
        raise KnownError(ErrorCode.PASSKEY_AUTH_CANNOT_BE_ENABLED)
    return changes


def profile_changes(
    user: User | None, body: ClientUserUpdateBody, given: set[str], access_type: AccessType
) -> dict[str, Any]:
    """The second half (see `sign_in_changes`): restriction by an administrator, the profile image, the plain
    fields and risk scores."""
    changes: dict[str, Any] = {}
    server_body = body if isinstance(body, schemas.ServerUserUpdateBody) else None
    if server_body is not None and given & _RESTRICTION_FIELDS:
        # (the schema already refused a reason without restricted_by_admin: true)
        changes.update(_restriction_changes(_read(user), server_body, given))
    if "profile_image_url" in given:
        changes["profile_image_url"] = checked_profile_image(body.profile_image_url, access_type)
    for name in _PLAIN_FIELDS:
        if name in given:
            changes[name] = getattr(body, name)
    if server_body is not None and server_body.risk_scores is not None:
        scores = server_body.risk_scores.sign_up
        changes["risk_scores"] = RiskScores(bot=scores.bot, free_trial_abuse=scores.free_trial_abuse)
    return changes


def _check_password_fields(body: ServerUserUpdateBody, given: set[str]) -> None:
    if "password" in given and "password_hash" in given:
        raise KnownError(ErrorCode.CANNOT_SET_BOTH_PASSWORD_AND_HASH)
    if body.password_hash is not None and not is_supported_hash(body.password_hash):
        raise KnownError(ErrorCode.INVALID_PASSWORD_HASH)
    if body.password is not None and too_long(body.password):
        raise KnownError(ErrorCode.PASSWORD_TOO_LONG, details={"maxLength": MAX_PASSWORD_LENGTH})


def _new_password_hash(
    ctx: RequestContext, project: Project, user: User, body: ServerUserUpdateBody
) -> Flow[str | None]:
    """The stored hash for a `password` or `password_hash` update (None removes password sign-in)."""
    if body.password_hash is not None:
        return body.password_hash
    if body.password is None:
        return None
    if user.password_hash is None and not project.config.credential_enabled:
        raise KnownError(ErrorCode.PASSWORD_AUTHENTICATION_NOT_ENABLED)
    return (yield from perform(HashPassword(body.password, ctx.options.password_rounds)))


def _email_changes(user: User, body: ClientUserUpdateBody, given: set[str], *, by_client: bool) -> dict[str, Any]:
    """reference §3.3: a new address starts unverified and keeps the auth flag; null clears both; the flags can be
    set on their own; neither may be true without an address.

    Except that a new address set by a client (`by_client`) does not sign anyone in: the original keeps the auth
    flag, so a client could take any address as its auth e-mail unproven, sign in by password "as" it, and lock
    its real owner out (409 at their sign-up). Here it stays unverified and not for sign-in until a server says
    otherwise, so it is not in the auth e-mail index: the real owner's code sign-in finds nobody holding it and
    creates their own account. (A server may still set the flags, as in the original.)"""
    verified_given = "primary_email_verified" in given
    auth_given = "primary_email_auth_enabled" in given
    # Only server bodies have the flags (read only when given: a missing attribute costs pydantic an exception).
    verified = body.primary_email_verified if verified_given else None  # type: ignore[attr-defined]
    auth_enabled = body.primary_email_auth_enabled if auth_given else None  # type: ignore[attr-defined]
    changes: dict[str, Any] = {}
    email = user.primary_email
    if "primary_email" in given:
        new = normalize_email(body.primary_email) if body.primary_email is not None else None
        if new is None:
            changes.update(primary_email=None, primary_email_verified=False, primary_email_auth_enabled=False)
        elif new != user.primary_email:
            changes.update(primary_email=new, primary_email_verified=False)
            if by_client:
                changes["primary_email_auth_enabled"] = False
        email = new
    if verified_given:
        if verified and email is None:
            raise KnownError(ErrorCode.PRIMARY_EMAIL_REQUIRED, context={"field": "primary_email_verified"})
        changes["primary_email_verified"] = bool(verified) and email is not None
    if auth_given:
        if auth_enabled and email is None:
            raise KnownError(ErrorCode.PRIMARY_EMAIL_REQUIRED, context={"field": "primary_email_auth_enabled"})
        changes["primary_email_auth_enabled"] = bool(auth_enabled) and email is not None
    return changes


def _restriction_changes(user: User, body: ServerUserUpdateBody, given: set[str]) -> dict[str, Any]:
    restricted = body.restricted_by_admin if "restricted_by_admin" in given else user.restricted_by_admin
    changes: dict[str, Any] = {}
    if "restricted_by_admin" in given:
        changes["restricted_by_admin"] = restricted
    if not restricted:
        # No longer restricted: the reason and the private details go too (reference §3.2).
        changes.update(restricted_by_admin_reason=None, restricted_by_admin_private_details=None)
    else:
        for name in ("restricted_by_admin_reason", "restricted_by_admin_private_details"):
            if name in given:
                changes[name] = getattr(body, name)
    return changes


# --------------------------------------------------------------------------------------------------------------
# Creating and deleting


def create_user(ctx: RequestContext[UserCreateBody]) -> Flow[Response]:
    """POST /users (server, admin) -> 201: the update rules, plus `is_anonymous`; the uniqueness of an auth
    e-mail is always checked. Answers the user before its personal team existed (none selected), as the original."""
    auth = ctx.require_auth()
    project = auth.project
    body: UserCreateBody = ctx.body
    given = body.model_fields_set
    _check_password_fields(body, given)
    if body.oauth_providers:
        provider = body.oauth_providers[0].get("id", "")
        raise KnownError(ErrorCode.OAUTH_PROVIDER_NOT_FOUND, context={"provider_id": provider})
    blank = User(id=new_uuid(ctx.entropy), signed_up_at_millis=ctx.now_ms, last_active_at_millis=ctx.now_ms)
    changes = sign_in_changes(blank, body, given, project)
    if "password" in given or "password_hash" in given:
        changes["password_hash"] = yield from _new_password_hash(ctx, project, blank, body)
    changes["is_anonymous"] = bool(body.is_anonymous)
    changes.update(profile_changes(blank, body, given, auth.access_type))
    user = UserChanges.of(changes.items()).apply(blank)
    if user.auth_email is not None and (yield from perform(find_user_by_email(project.id, user.auth_email))):
        raise email_taken(user.auth_email)
    created = yield from store_new_user(ctx, project, user)  # a concurrent sign-up of the address: re-run, 409
    # as the original answers: the user as it was before its personal team (selected, as a later read shows)
    unselected = replaced(created, {"selected_team_id": None})
    return json_response(
        201,
        render_user(unselected, auth.access_type, project.config, caller_id=auth.user_id, compat=ctx.options.compat),
    )


def delete_me(ctx: RequestContext) -> Flow[Response]:
    """DELETE /users/me: clients only when the project allows it."""
    auth = ctx.require_auth()
    user_id = _my_id(ctx)
    if auth.access_type is AccessType.CLIENT and not auth.project.config.client_user_deletion_enabled:
        raise KnownError(ErrorCode.CLIENT_USER_DELETION_NOT_ENABLED)
    if not (yield from drop_user(auth.project.id, user_id)):
        raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
    return json_response(200, {"success": True})


def delete_user(ctx: RequestContext[None, None, UserIdParams]) -> Flow[Response]:
    """DELETE /users/{user_id} (server, admin): the user, their sessions and memberships, at once."""
    project = ctx.require_auth().project
    if not (yield from drop_user(project.id, ctx.params.user_id)):
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return json_response(200, {"success": True})


#: The fields of a user its deletion decides on: which e-mail index entries and OAuth records point at it.
_DELETION_FIELDS = ("primary_email", "primary_email_auth_enabled", "oauth_accounts", "passkeys")


def drop_user(project_id: str, user_id: str) -> Flow[bool]:
    """Remove a user with everything that points at them, in one commit: their sessions, memberships (announced
    `team_membership.deleted` per team, in membership order, then `user.deleted` naming the user and those teams),
    contact channels, the e-mail index entries of their auth addresses and the OAuth index entries of their
    sign-in accounts (those that name them), their accounts' provider tokens, API keys and project permission
    grants. Guarded by what it read: a session, membership, channel or key added meanwhile conflicts, and the
    request is re-run. False when there is no such user.

    Round trips: the reads (one), the OAuth index entries when the user has sign-in accounts (one), the commit."""
    read, sessions, memberships, api_keys = yield from perform(
        Together(
            (
                ListContactChannels(project_id, user_id),
                ListSessions(project_id, user_id),
                ListMemberships(project_id, user_id=user_id),
                ListApiKeys(project_id, ApiKeyType.USER, user_id),
            )
        )
    )
    if read is None:
        return False
    user = read.user
    sign_in = [account for account in user.oauth_accounts if account.allow_sign_in]
    holders: tuple[User | None, ...] = ()
    if sign_in:
        holders = yield from perform(
            Together(tuple(find_user_by_oauth_account(project_id, a.provider_config_id, a.account_id) for a in sign_in))
        )
    team_ids = tuple(membership.team_id for membership in memberships)
    guards: list[CommitGuard] = [
        FieldsAre(user, _DELETION_FIELDS),
        ChannelsAre(user.id, read.stored),
        UserSessionsAre(user.id, tuple(session.id for session in sessions)),
        UserTeamsAre(user.id, team_ids),
        UserApiKeysAre(user.id, tuple(key.id for key in api_keys)),
    ]
    writes: list[CommitWrite] = []
    # the index entries that name the user (an entry another user holds stays theirs)
    for address in dict.fromkeys(c.value for c in read.channels if c.used_for_auth):
        if read.holder(address) == user.id:
            guards.append(IndexIs(IndexName.EMAIL, address, user.id))
            writes.append(DropIndex(IndexName.EMAIL, address))
    for account, holder in zip(sign_in, holders, strict=True):
        if holder is not None and holder.id == user.id:
            key = oauth_index_key(account.provider_config_id, account.account_id)
            guards.append(IndexIs(IndexName.OAUTH, key, user.id))
            writes.append(DropIndex(IndexName.OAUTH, key))
    writes += [DropProviderTokens(account.id) for account in user.oauth_accounts]
    # passkeys: every passkey's index entry names its user (`effects.passkeys`)
    writes += [DropIndex(IndexName.PASSKEY, passkey.credential_id) for passkey in user.passkeys]
    writes += [DropChannel(user.id, channel.id) for channel in read.stored]
    writes += [DropSession(session) for session in sessions]
    writes += [DropMembership(team_id, user.id) for team_id in team_ids]
    writes += [DropApiKey(key) for key in api_keys]
    writes += [DropProjectGrants(user.id), DropUser(user.id)]
    events = tuple(Announce("team_membership.deleted", ids=(team_id, user.id)) for team_id in team_ids)
    events += (Announce("user.deleted", ids=(user.id, *team_ids)),)
    yield from commit(project_id, tuple(guards), tuple(writes), events)
    return True
