"""OAuth storage effects (reference part 2 §7): the sign-in's short-lived records (the authorize request kept for
the callback, the outer authorization code kept for the token exchange), linked provider accounts, and provider
tokens.

Where things live:
- **Short-lived values** (`PutShortLived` / `TakeShortLived`, each kind its own keys, `ShortLived`): OAuth states
  (`OAuthState`, by the hash of the inner state, 10 minutes, taken once by the callback), outer codes (`OuterCode`,
  by the hash of the code, 5 minutes, consumed once by the token exchange) and the mock provider's keys, codes,
  tokens and test hooks. The core encodes them (`put_record`, `take_record`); a store keeps text.
- **Linked accounts** live on the user record (`User.oauth_accounts`), so every user read renders
  `oauth_providers`. The project's OAuth index maps (provider id, account id) of each sign-in-enabled account to
  its user: sign-in looks it up, and no two sign-in accounts share that pair. They are written by commits
  (`SetOAuthAccounts`, with `SetIndex` / `DropIndex` on `IndexName.OAUTH`: `identity_proto.flows.oauth_accounts`).
- **Provider tokens**: one sealed (encrypted) blob per account row (`PutProviderTokens`, `DropProviderTokens`),
  deleted with the account or the user; no TTL (a refresh token outlives the access token it came with).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from identity_proto.effects.base import Flow, StorageEffect, perform
from identity_proto.effects.commit import CommitWrite, IndexName
from identity_proto.effects.users import FindUserByIndex
from identity_proto.records import OAuthAccount

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "DropProviderTokens",
    "LoadProviderTokens",
    "OAuthState",
    "OuterCode",
    "PutProviderTokens",
    "PutShortLived",
    "SetOAuthAccounts",
    "ShortLived",
    "TakeShortLived",
    "find_user_by_oauth_account",
    "oauth_index_key",
    "put_record",
    "record_put",
    "take_record",
]

R = TypeVar("R")


def oauth_index_key(provider_config_id: str, account_id: str) -> str:
    """The OAuth index's key for a provider account (provider ids are `[a-z0-9_-]`: no newline inside)."""
    return f"{provider_config_id}\n{account_id}"


@dataclass(frozen=True, slots=True)
class OAuthState:
    """An authorize request, kept for its callback (reference §7.2 "the request is stored 10 minutes")."""

    project_id: str
    #: The branch part of the client id (`<project>#<branch>`), or None.
    branch_id: str | None
    provider_id: str
    #: "authenticate" or "link".
    type: str
    #: The redirect URI and state of the *outer* flow (the app's), returned with the outer code.
    redirect_uri: str
    outer_state: str
    code_challenge: str
    #: "S256" or "plain".
    code_challenge_method: str
    #: Our own PKCE verifier for the provider, and the OIDC nonce.
    inner_code_verifier: str = field(repr=False)
    nonce: str | None = field(repr=False)
    #: The user the access token named (link, anonymous upgrade), else None.
    user_id: str | None
    provider_scope: str | None
    error_redirect_uri: str | None
    after_callback_redirect_url: str | None
    #: "redirect" (the cookie is required at the callback) or "json".
    response_mode: str
    created_at_millis: int
    expires_at_millis: int


@dataclass(frozen=True, slots=True)
class OuterCode:
    """The authorization code our callback hands the app, bound to everything the token exchange checks, and
    carrying what the provider said, for the exchange to act on.

    The callback changes no user: it cannot tell whose browser came back (in json mode nothing binds the flow to the
    browser that started it). Finding or creating the user, linking the account, upgrading an anonymous user and
    storing the provider's tokens all wait for the exchange, where the PKCE verifier proves that the party that
    started the flow is the one that got the code (`identity_proto.flows.oauth`)."""

    project_id: str
    #: The user the authorize request's `?token=` named (link, anonymous upgrade), else None.
    token_user_id: str | None
    redirect_uri: str
    code_challenge: str
    code_challenge_method: str
    #: "authenticate" or "link".
    type: str
    after_callback_redirect_url: str | None
    expires_at_millis: int
    #: The project's provider and who signed in there (`ProviderIdentity`'s fields).
    provider_id: str = ""
    account_id: str = ""
    email: str | None = None
    email_verified: bool = False
    display_name: str | None = None
    profile_image_url: str | None = None
    #: The provider's tokens, sealed for this code (`identity_proto.provider_tokens`, bound to the code's hash), or
    #: None when no key is configured; sealed again for the account row once the exchange knows it.
    sealed_tokens: str | None = field(default=None, repr=False)
    #: A cross-domain handoff's (`flows.oauth.cross_domain_authorize`): the session handed over, and its refresh
    #: token, hex, masked with a pad only the code derives.
    session_id: str | None = None
    handoff_refresh_token: str | None = field(default=None, repr=False)


def find_user_by_oauth_account(project_id: str, provider_config_id: str, account_id: str) -> FindUserByIndex:
    """The user whose sign-in-enabled account (`provider_config_id`, `account_id`) is in the OAuth index."""
    return FindUserByIndex(project_id, IndexName.OAUTH, oauth_index_key(provider_config_id, account_id))


@dataclass(frozen=True, slots=True)
class LoadProviderTokens(StorageEffect[str | None]):
    """The sealed provider tokens of account row `account_row_id`, or None."""

    project_id: str
    account_row_id: str


@dataclass(frozen=True, slots=True)
class DropProviderTokens(CommitWrite):
    """A commit's write: remove the provider tokens of one account row (none stored is no error)."""

    account_row_id: str


@dataclass(frozen=True, slots=True)
class SetOAuthAccounts(CommitWrite):
    """A commit's write: the user's linked accounts become `accounts` (a change set never sets them; guard the list
    the flow decided on with `FieldsAre(user, ("oauth_accounts",))`). The OAuth index is the flow's to keep in
    step (`SetIndex`, `DropIndex`)."""

    user_id: str
    accounts: tuple[OAuthAccount, ...]


@dataclass(frozen=True, slots=True)
class PutProviderTokens(CommitWrite):
    """A commit's write: `sealed` (the row's provider tokens, encrypted by the core) for account row
    `account_row_id`, replacing what was there. Guard the row with `FieldsAre(user, ("oauth_accounts",))`."""

    account_row_id: str
    sealed: str = field(repr=False)


class ShortLived(StrEnum):
    """The kinds of short-lived values, each kept under its own keys."""

    OAUTH_STATE = "oauth-state"
    #: A project's (`project_id` given).
    OUTER_CODE = "oauth-code"
    #: The mock provider's (dev/test mode only: `identity_proto.flows.mock_oauth`).
    MOCK_KEYS = "mock-keys"
    MOCK_CODE = "mock-code"
    MOCK_TOKEN = "mock-token"  # noqa: S105 (a kind)
    MOCK_FAILURE = "mock-failure"


@dataclass(frozen=True, slots=True)
class PutShortLived(StorageEffect[bool]):
    """Keep `value` under (`kind`, `project_id`, `key`) until `expires_at_millis` (None: for good), replacing what
    was there, or with `only_if_absent` only if nothing is. Whether it was kept (nothing is when it expired by
    `now_ms`). The core judges expiry; a store forgets expired values only to free memory."""

    kind: ShortLived
    key: str
    value: str = field(repr=False)
    now_ms: int
    expires_at_millis: int | None
    project_id: str | None = None
    only_if_absent: bool = False


@dataclass(frozen=True, slots=True)
class TakeShortLived(StorageEffect[str | None]):
    """The value under (`kind`, `project_id`, `key`), deleted in the same step unless `keep` (of concurrent takes
    exactly one gets it); None when there is none."""

    kind: ShortLived
    key: str
    project_id: str | None = None
    keep: bool = False


def record_put(
    kind: ShortLived, key: str, record: Any, now_ms: int, *, project_id: str | None = None, only_if_absent: bool = False
) -> PutShortLived:
    """The `PutShortLived` of a dataclass record (as JSON), until its `expires_at_millis` if it has one."""
    value = orjson.dumps(dataclasses.asdict(record)).decode()
    expires = getattr(record, "expires_at_millis", None)
    return PutShortLived(kind, key, value, now_ms, expires, project_id, only_if_absent)


def put_record(
    kind: ShortLived, key: str, record: Any, now_ms: int, *, project_id: str | None = None, only_if_absent: bool = False
) -> Flow[bool]:
    """Perform `record_put`: whether the record was kept."""
    return (
        yield from perform(record_put(kind, key, record, now_ms, project_id=project_id, only_if_absent=only_if_absent))
    )


def take_record(
    cls: type[R], kind: ShortLived, key: str, *, project_id: str | None = None, keep: bool = False
) -> Flow[R | None]:
    """`TakeShortLived` of a record `put_record` kept; None when there is none, or it was kept by an older version
    in another shape (as good as none: the flow starts again)."""
    text = yield from perform(TakeShortLived(kind, key, project_id, keep))
    if text is None:
        return None
    data = orjson.loads(text)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    try:
        return cls(**{name: value for name, value in data.items() if name in known})
    except TypeError:
        return None
