"""Export and import of a project's data as one JSON document: what a test suite seeds, carried whole, secrets as
the store keeps them: hashes of passwords, API keys and invitation codes (their plaintext is never stored, so never
exported); the two secrets the service must keep in plaintext to use them (webhook signing secrets, OAuth client
secrets) as they are, which is why export and import are dev/test-mode routes (below).

What a version 2 document carries (`export_project_data`), each kind a list of JSON objects of its stored fields:

- `project`: the source's id and display name (for the reader; an import keeps the target's) and its `config`
  (sign-up switches, trusted domains, the permission definitions of both scopes, API-key switches, OAuth providers;
  an import of version 2 applies it, so grants, keys and OAuth accounts are defined in the target as in the
  source; a document without `project.config` leaves the target's config as it is). The config holds the OAuth
  providers' client secrets as stored (in plaintext: the service needs them to call the provider), as it did in
  version 1;
- `users`: every field as stored: password hashes (bcrypt/argon2 MCF), TOTP secrets and the last TOTP step as
  stored (base64 of the raw secret: the store keeps it so, as a code must be computed from it), metadata, the
  restriction, risk scores, the primary e-mail channel (`primary_email*`) and the linked OAuth accounts
  (`oauth_accounts`: provider, the provider's account id, e-mail, flags; no provider tokens, below) and the
  passkeys (`passkeys`: credential id, public key, signature counter, transports, AAGUID, RP ID: nothing secret;
  an imported passkey signs its user in on the target, from an origin the target trusts);
- `contact_channels`: every channel but the primaries (a primary is its user's `primary_email*` fields), with its
  verification and used-for-auth state and `signs_in`: whether the project's e-mail index gives its address to its
  user (an unverified auth channel a client added does not sign in until verified: the import keeps it so);
- `teams`; `memberships` (each with the member's profile and team permissions);
- `project_permissions`: the project permissions granted to each user directly;
- `api_keys` (user and team keys): the SHA-256 of the key and its last four characters, never the key: an imported
  key authenticates with the same text as before;
- `team_invitations`: the open ones (unused, unexpired at the export), as the hashes of their code and its nonce:
  the code mailed before the export is accepted after the import, until it expires;
- `webhook_endpoints`: with their signing secrets (and a rotated-out one still signing), in plaintext as the store
  keeps them, because a signature needs the secret itself and receivers keep verifying with the one they have. This
  is the one plaintext secret a document holds besides the config's OAuth client secrets, and why the export is a
  dev/test-mode route of the internal project's admin only (`flows.testing`) and of the in-process fake.

Never carried, by design: sessions and refresh tokens (sign-ins of the source deployment, signed with its project
key: a seeded suite signs in again); one-time codes other than invitations (sign-in, MFA, verification and reset
codes live minutes) and their attempt counters; sent mail; webhook events and deliveries (history of the source);
rate-limit counters; the project's own keys, signing key and id (the target keeps its own); OAuth provider tokens
(sealed with the service's token key and bound to the source project's id and the account row,
`identity_proto.provider_tokens`: they would not open in another project, and in dev mode the key sealing them is
public, so a document holding them would hold them in effect in plaintext; a connected account is connected again).

An import (`import_project_data`) reads version 1 documents as before (users, teams, memberships; the target's
config untouched) and version 2 ones. It validates the whole document first (shapes and types of every record,
unique ids and addresses, references inside the document), answering 400 SCHEMA_ERROR with nothing written, then
writes everything in ONE commit guarded on the ids and index entries it takes being free: all or nothing. A user
id or auth address already taken in the target is 409 USER_EMAIL_ALREADY_EXISTS (as in version 1), a sign-in OAuth
account 409 OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER; any other record of the document that exists there
already is 409 IMPORT_CONFLICT.

A round trip (export, import into an empty project, export) gives the same document but for `exported_at_millis`
and `project.id` / `project.display_name` (the target's), and invitations that expired meanwhile.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import (
    CommitConflict,
    EndpointCountIs,
    EndpointIs,
    FindApiKeyByHash,
    Flow,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListProjectContactChannels,
    ListProjectPermissions,
    ListTeamInvitations,
    ListTeams,
    ListUsers,
    ListWebhookEndpoints,
    LoadApiKey,
    LoadProject,
    LoadTeamInvitation,
    PatchProject,
    PutApiKey,
    PutChannel,
    PutInvitation,
    PutWebhookEndpoint,
    RecordExists,
    StorageEffect,
    Together,
    WebhookEndpoint,
    perform,
)
from identity_proto.effects.commit import (
    Announce,
    CommitGuard,
    CommitWrite,
    GrantPermissions,
    IndexIs,
    IndexName,
    IsAbsent,
    PutMembership,
    PutTeam,
    PutUser,
    RecordKind,
    SetIndex,
    commit,
)
from identity_proto.effects.oauth import oauth_index_key
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.teams import membership_created
from identity_proto.records import (
    ApiKey,
    ApiKeyType,
    CodePurpose,
    ContactChannel,
    Membership,
    ProjectConfig,
    Team,
    User,
    VerificationCode,
    config_from_json,
    config_to_json,
    user_from_json,
    user_to_json,
)
from identity_proto.users import checked_email, email_taken

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "export_project_data", "import_project_data"]

EXPORT_FORMAT = "identity-service/project-data"
#: The version `export_project_data` writes; an import reads this one and every earlier one.
EXPORT_VERSION = 2
_VERSIONS = (1, 2)


# ---------------------------------------------------------------------------------------------------------------
# Export


def export_project_data(project_id: str, now_ms: int) -> Flow[dict[str, Any]]:
    """The project's data as a version 2 document (the module docstring says what it carries and what never)."""
    project = yield from perform(LoadProject(project_id))
    if project is None:
        raise _project_not_found(project_id)
    users, teams, memberships, channels, grants, endpoints = yield from perform(
        Together(
            (
                ListUsers(project_id),
                ListTeams(project_id),
                ListMemberships(project_id),
                ListProjectContactChannels(project_id),
                ListProjectPermissions(project_id),
                ListWebhookEndpoints(project_id),
            )
        )
    )
    stored = [c for c in channels if not c.is_primary]
    # Second trip: per owner its keys, per team its invitations, per user with a stored auth channel the index
    # entries of their addresses (whether each such channel signs in).
    holders_of = sorted({c.user_id for c in stored if c.used_for_auth})
    reads: list[StorageEffect[Any]] = [ListApiKeys(project_id, ApiKeyType.USER, u.id) for u in users]
    reads += [ListApiKeys(project_id, ApiKeyType.TEAM, t.id) for t in teams]
    reads += [ListTeamInvitations(project_id, team_id=t.id) for t in teams]
    reads += [ListContactChannels(project_id, user_id) for user_id in holders_of]
    found: tuple[Any, ...] = (yield from perform(Together(tuple(reads)))) if reads else ()
    owners = len(users) + len(teams)
    keys = [key for listed in found[:owners] for key in listed]
    invitations = [code for listed in found[owners : owners + len(teams)] for code in listed]
    holders: dict[tuple[str, str], str | None] = {}
    for user_channels in found[owners + len(teams) :]:
        if user_channels is not None:
            for address, holder in user_channels.holders.items():
                holders[(user_channels.user.id, address)] = holder
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at_millis": now_ms,
        "project": {"id": project.id, "display_name": project.display_name, "config": config_to_json(project.config)},
        "users": [user_to_json(user) for user in users],
        "contact_channels": [
            {
                **_channel_json(c),
                "signs_in": c.used_for_auth and holders.get((c.user_id, c.value)) == c.user_id,
            }
            for c in stored
        ],
        "teams": [dataclasses.asdict(team) for team in teams],
        "memberships": [{**dataclasses.asdict(m), "permissions": list(m.permissions)} for m in memberships],
        "project_permissions": [{"user_id": user_id, "permission_ids": list(ids)} for user_id, ids in grants],
        "api_keys": sorted((_api_key_json(key) for key in keys), key=lambda k: (k["created_at_millis"], k["id"])),
        "team_invitations": sorted(
            (_invitation_json(code) for code in invitations if not code.used and now_ms < code.expires_at_millis),
            key=lambda i: (i["created_at_millis"], i["id"]),
        ),
        "webhook_endpoints": [_endpoint_json(e) for e in endpoints],
    }


def _channel_json(channel: ContactChannel) -> dict[str, Any]:
    return {
        "id": channel.id,
        "user_id": channel.user_id,
        "value": channel.value,
        "is_verified": channel.is_verified,
        "used_for_auth": channel.used_for_auth,
        "created_at_millis": channel.created_at_millis,
    }


def _api_key_json(key: ApiKey) -> dict[str, Any]:
    # `key_hash` is the SHA-256 of the key: the key itself is never stored, so never exported.
    return {**dataclasses.asdict(key), "type": key.type.value}


#: The fields of an invitation's code a document carries (its purpose is implied; `used` is always false).
_INVITATION_FIELDS = ("id", "team_id", "email", "code_hash", "nonce_hash", "created_at_millis", "expires_at_millis")


def _invitation_json(code: VerificationCode) -> dict[str, Any]:
    return {name: getattr(code, name) for name in _INVITATION_FIELDS}


def _endpoint_json(endpoint: WebhookEndpoint) -> dict[str, Any]:
    data = dataclasses.asdict(endpoint)
    data["event_types"] = None if endpoint.event_types is None else list(endpoint.event_types)
    return data


# ---------------------------------------------------------------------------------------------------------------
# Import: parse and validate everything, then one commit


@dataclasses.dataclass(frozen=True, slots=True)
class _Document:
    """A document's records, parsed and checked (`_parse`)."""

    version: int
    config: ProjectConfig | None
    users: tuple[User, ...]
    channels: tuple[tuple[ContactChannel, bool], ...]  # with `signs_in`
    teams: tuple[Team, ...]
    memberships: tuple[Membership, ...]
    grants: tuple[tuple[str, tuple[str, ...]], ...]
    keys: tuple[ApiKey, ...]
    invitations: tuple[VerificationCode, ...]
    endpoints: tuple[WebhookEndpoint, ...]

    def counts(self) -> dict[str, int]:
        counts = {"users": len(self.users), "teams": len(self.teams), "memberships": len(self.memberships)}
        if self.version == 1:  # what version 1 answered
            return counts
        return {
            **counts,
            "contact_channels": len(self.channels),
            "project_permissions": sum(len(ids) for _user, ids in self.grants),
            "api_keys": len(self.keys),
            "team_invitations": len(self.invitations),
            "webhook_endpoints": len(self.endpoints),
        }


def import_project_data(project_id: str, data: dict[str, Any]) -> Flow[dict[str, int]]:
    """Add the records of an export to a project (which keeps its own id and keys; a version 2 document sets its
    config), all in one commit or nothing: 400 SCHEMA_ERROR for a document that is not valid (nothing written),
    409 for a record the target holds already. Answers how many records of each kind were imported."""
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT or version not in _VERSIONS:
        raise _invalid(f"not a {EXPORT_FORMAT} document of version {' or '.join(map(str, _VERSIONS))}")
    try:
        document = _parse(data, version)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _invalid(f"invalid export document: {exc}") from None
    if (yield from perform(LoadProject(project_id))) is None:
        raise _project_not_found(project_id)
    yield from _refuse_existing(project_id, document)
    existing = (yield from perform(ListWebhookEndpoints(project_id))) if document.endpoints else ()
    guards, writes, events, meanings = _commit_parts(project_id, document, len(existing))
    try:
        yield from commit(project_id, tuple(guards), tuple(writes), tuple(events))
    except CommitConflict as conflict:
        meaning = meanings.get(id(conflict.guard))
        if meaning is None:  # the project's endpoints changed meanwhile: the service runs the import again
            raise
        raise meaning() from None
    return document.counts()


def _project_not_found(project_id: str) -> KnownError:
    return KnownError(ErrorCode.PROJECT_NOT_FOUND, details={"project_id": project_id})


def _invalid(message: str) -> KnownError:
    return KnownError(ErrorCode.SCHEMA_ERROR, details={"message": message})


def _exists(message: str) -> Callable[[], KnownError]:
    return lambda: KnownError(ErrorCode.IMPORT_CONFLICT, details={"message": message})


def _items(data: dict[str, Any], name: str) -> list[Any]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise TypeError(f"{name} must be a list of objects")
    return value


def _parse(data: dict[str, Any], version: int) -> _Document:
    """Every record of the document, checked on its own (fields and types) and together (unique ids and addresses,
    references inside the document). Raises TypeError, KeyError or ValueError naming the problem."""
    config = None
    project = data.get("project")
    if version >= 2 and project is not None:  # no `project` (or no config in it): the target keeps its config
        if not isinstance(project, dict) or not isinstance(project.get("config", {}), dict):
            raise TypeError("project must be an object, its config an object")
        if "config" in project:
            config = _checked(config_from_json(project["config"]), "project.config")
    users = tuple(_user(item) for item in _items(data, "users"))
    teams = tuple(_checked(Team(**item), "team") for item in _items(data, "teams"))
    memberships = tuple(
        _checked(
            Membership(**{**item, "permissions": tuple(sorted(_strings(item.get("permissions", []))))}), "membership"
        )
        for item in _items(data, "memberships")
    )
    channels = tuple(_channel(item) for item in _items(data, "contact_channels")) if version >= 2 else ()
    grants = tuple(_grant(item) for item in _items(data, "project_permissions")) if version >= 2 else ()
    keys = tuple(_api_key(item) for item in _items(data, "api_keys")) if version >= 2 else ()
    invitations = tuple(_invitation(item) for item in _items(data, "team_invitations")) if version >= 2 else ()
    endpoints = tuple(_endpoint(item) for item in _items(data, "webhook_endpoints")) if version >= 2 else ()
    document = _Document(version, config, users, channels, teams, memberships, grants, keys, invitations, endpoints)
    _check_together(document)
    return document


def _user(item: dict[str, Any]) -> User:
    user = _checked(user_from_json(item), "user")
    if user.primary_email is not None:  # the rule every e-mail input follows (a ValueError names the problem)
        user = dataclasses.replace(user, primary_email=checked_email(user.primary_email))
    return user


def _channel(item: dict[str, Any]) -> tuple[ContactChannel, bool]:
    fields = {name: item[name] for name in ("id", "user_id", "is_verified", "used_for_auth", "created_at_millis")}
    channel = _checked(ContactChannel(**fields, value=checked_email(item["value"])), "contact channel")
    signs_in = item.get("signs_in", False)
    if not isinstance(signs_in, bool) or (signs_in and not channel.used_for_auth):
        raise ValueError(f"contact channel {channel.id}: signs_in must be a boolean, true only when used_for_auth")
    return channel, signs_in


def _grant(item: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    user_id = item["user_id"]
    if not isinstance(user_id, str):
        raise TypeError("a project permission grant's user_id is a string")
    return user_id, tuple(sorted(set(_strings(item["permission_ids"]))))


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"expected a list of strings, not {value!r}")
    return value


def _api_key(item: dict[str, Any]) -> ApiKey:
    return _checked(ApiKey(**{**item, "type": ApiKeyType(item["type"])}), "API key")


def _invitation(item: dict[str, Any]) -> VerificationCode:
    fields = {name: item[name] for name in _INVITATION_FIELDS}
    if not all(isinstance(fields[name], str) for name in ("id", "team_id", "email")):
        raise TypeError("a team invitation's id, team_id and email are strings")
    code = VerificationCode(**{**fields, "email": checked_email(fields["email"])}, purpose=CodePurpose.TEAM_INVITATION)
    return _checked(code, "team invitation")


def _endpoint(item: dict[str, Any]) -> WebhookEndpoint:
    types_ = item.get("event_types")
    endpoint = WebhookEndpoint(**{**item, "event_types": None if types_ is None else tuple(_strings(types_))})
    return _checked(endpoint, "webhook endpoint")


def _taken_account(provider_config_id: str, account_id: str) -> Callable[[], KnownError]:
    message = f"The {provider_config_id} account {account_id} signs another user in already."
    return lambda: KnownError(ErrorCode.OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER, message=message)


def _taken_passkey(credential_id: str) -> Callable[[], KnownError]:
    return _exists(f"The passkey {credential_id} signs another user in already.")


_R = typing.TypeVar("_R")


def _checked(record: _R, what: str) -> _R:
    """`record` if every field holds a value of its declared type (nested records and tuples too; `Any` fields,
    metadata, hold any JSON), else TypeError naming the field: a document must not store what no write would."""
    for name, hint in _hints(type(record)).items():  # type: ignore[arg-type]
        if not _fits(getattr(record, name), hint):
            label = getattr(record, "id", None)
            raise TypeError(f"{what}{f' {label}' if isinstance(label, str) else ''}: {name} has the wrong type")
    return record


@functools.cache
def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _fits(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return isinstance(value, tuple) and all(_fits(v, item) for v in value)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return isinstance(value, hint) and all(_fits(getattr(value, n), h) for n, h in _hints(hint).items())
    return isinstance(value, hint) if isinstance(hint, type) else True


def _unique(values: Iterable[Any], what: str) -> None:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} {value!r} appears twice")
        seen.add(value)


def _check_together(d: _Document) -> None:
    """What holds between the records: unique ids and addresses, every reference to a record of the document."""
    user_ids, team_ids = {u.id for u in d.users}, {t.id for t in d.teams}
    _unique((u.id for u in d.users), "user id")
    _unique((t.id for t in d.teams), "team id")
    _unique(((m.team_id, m.user_id) for m in d.memberships), "membership")
    _unique(((c.user_id, c.id) for c, _ in d.channels), "contact channel")
    _unique((user_id for user_id, _ in d.grants), "project permissions of user")
    _unique((k.id for k in d.keys), "API key id")
    _unique((k.key_hash for k in d.keys), "API key hash")
    _unique((i.id for i in d.invitations), "team invitation id")
    _unique((i.code_hash for i in d.invitations), "team invitation code hash")
    _unique((e.id for e in d.endpoints), "webhook endpoint id")
    _unique((address for address, _ in _auth_addresses(d)), "sign-in address")
    _unique(_sign_in_accounts(d), "sign-in OAuth account")
    primaries = {u.id: u.primary_email for u in d.users}
    _unique(((c.user_id, c.value) for c, _ in d.channels), "contact channel address of user")
    _unique((a.id for u in d.users for a in u.oauth_accounts), "OAuth account id")
    _unique((p.credential_id for u in d.users for p in u.passkeys), "passkey credential id")
    for user in d.users:
        if user.selected_team_id is not None and user.selected_team_id not in team_ids:
            raise ValueError(f"user {user.id} selects team {user.selected_team_id}, which the document lacks")
    references: list[tuple[str, str, set[str]]] = [("membership of user", m.user_id, user_ids) for m in d.memberships]
    references += [("membership of team", m.team_id, team_ids) for m in d.memberships]
    references += [("contact channel of user", c.user_id, user_ids) for c, _ in d.channels]
    references += [("project permissions of user", user_id, user_ids) for user_id, _ in d.grants]
    references += [
        (f"{k.type.value} API key of", k.owner_id, user_ids if k.type is ApiKeyType.USER else team_ids) for k in d.keys
    ]
    references += [("team invitation to team", i.team_id or "", team_ids) for i in d.invitations]
    for what, ref, known in references:
        if ref not in known:
            raise ValueError(f"{what} {ref!r}, which the document lacks")
    for channel, _ in d.channels:
        if channel.value == primaries.get(channel.user_id):
            raise ValueError(f"contact channel {channel.id} repeats its user's primary e-mail")


def _auth_addresses(d: _Document) -> list[tuple[str, str]]:
    """Every entry the import gives the e-mail index (address, user id): users' auth primaries and the channels
    that sign in."""
    primaries = [(u.auth_email, u.id) for u in d.users if u.auth_email is not None]
    return primaries + [(c.value, c.user_id) for c, signs_in in d.channels if signs_in]


def _sign_in_accounts(d: _Document) -> list[tuple[str, str]]:
    return [(a.provider_config_id, a.account_id) for u in d.users for a in u.oauth_accounts if a.allow_sign_in]


def _refuse_existing(project_id: str, d: _Document) -> Flow[None]:
    """409 IMPORT_CONFLICT when the target holds an API key or invitation of the document already (no commit
    guard names those by id; their owners are new records the commit guards, so only a document edited to reuse
    an existing key or invitation meets this)."""
    reads: list[StorageEffect[Any]] = [LoadApiKey(project_id, k.id) for k in d.keys]
    reads += [FindApiKeyByHash(project_id, k.key_hash) for k in d.keys]
    reads += [LoadTeamInvitation(project_id, i.id or "") for i in d.invitations]
    if not reads:
        return
    found = yield from perform(Together(tuple(reads)))
    n = len(d.keys)
    for key, by_id, by_hash in zip(d.keys, found[:n], found[n : 2 * n], strict=True):
        if by_id is not None or by_hash is not None:
            raise _exists(f"API key {key.id} exists already.")()
    for invitation, stored in zip(d.invitations, found[2 * n :], strict=True):
        if stored is not None:
            raise _exists(f"Team invitation {invitation.id} exists already.")()


def _commit_parts(
    project_id: str, d: _Document, endpoints_before: int
) -> tuple[list[CommitGuard], list[CommitWrite], list[Announce], dict[int, Callable[[], KnownError]]]:
    """The one commit of an import, and what each of its guards means when it does not hold (by the guard's id;
    none: a concurrent change to run the import again over)."""
    guards: list[CommitGuard] = []
    writes: list[CommitWrite] = []
    events: list[Announce] = []
    meanings: dict[int, Callable[[], KnownError]] = {}

    def guard(g: CommitGuard, meaning: Callable[[], KnownError] | None = None) -> None:
        guards.append(g)
        if meaning is not None:
            meanings[id(g)] = meaning

    guard(RecordExists(RecordKind.PROJECT, project_id), functools.partial(_project_not_found, project_id))
    if d.config is not None:
        changes = ProjectConfigChanges.of((f.name, getattr(d.config, f.name)) for f in dataclasses.fields(d.config))
        writes.append(PatchProject(project_id, config=changes))
    for user in d.users:
        guard(
            IsAbsent(RecordKind.USER, user.id),
            functools.partial(
                KnownError, ErrorCode.USER_EMAIL_ALREADY_EXISTS, message=f"User {user.id} exists already."
            ),
        )
        writes.append(PutUser(user))
        events.append(Announce("user.created", (RecordKind.USER, user.id)))
    for address, _ in _auth_addresses(d):
        guard(IndexIs(IndexName.EMAIL, address, None), functools.partial(email_taken, address))
    for user in d.users:
        for account in user.oauth_accounts:
            if account.allow_sign_in:
                key = oauth_index_key(account.provider_config_id, account.account_id)
                guard(
                    IndexIs(IndexName.OAUTH, key, None),
                    _taken_account(account.provider_config_id, account.account_id),
                )
                writes.append(SetIndex(IndexName.OAUTH, key, user.id))
        for passkey in user.passkeys:
            guard(IndexIs(IndexName.PASSKEY, passkey.credential_id, None), _taken_passkey(passkey.credential_id))
            writes.append(SetIndex(IndexName.PASSKEY, passkey.credential_id, user.id))
    writes += [SetIndex(IndexName.EMAIL, address, user_id) for address, user_id in _auth_addresses(d)]
    writes += [PutChannel(channel) for channel, _ in d.channels]
    for team in d.teams:
        guard(IsAbsent(RecordKind.TEAM, team.id), _exists(f"Team {team.id} exists already."))
        writes.append(PutTeam(team))
        events.append(Announce("team.created", (RecordKind.TEAM, team.id)))
    for membership in d.memberships:
        writes.append(PutMembership(membership))
        events += membership_created(membership)
    for user_id, ids in d.grants:
        writes.append(GrantPermissions(user_id, ids))
        events += [Announce("project_permission.created", ids=(p, user_id)) for p in ids]
    writes += [PutApiKey(key) for key in d.keys]  # their owners are new: guarded above, written in this commit
    writes += [PutInvitation(code) for code in d.invitations]
    if d.endpoints:
        guard(EndpointCountIs(endpoints_before))
        for endpoint in d.endpoints:
            guard(EndpointIs(endpoint.id, None), _exists(f"Webhook endpoint {endpoint.id} exists already."))
        for n, endpoint in enumerate(d.endpoints):
            writes.append(PutWebhookEndpoint(endpoint, new=True, skip_history=endpoints_before == 0 and n == 0))
    return guards, writes, events, meanings
