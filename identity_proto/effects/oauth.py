"""OAuth storage effects (reference part 2 §7): the sign-in's short-lived records (the authorize request kept for
the callback, the outer authorization code kept for the token exchange), linked provider accounts, and provider
tokens. Each is one atomic step (memory: the store's lock; Redis: one Lua script under the project's hash tag).

Where things live:
- **OAuth states** (`OAuthState`): by the hash of the inner state sent to the provider; 10 minutes (the reference's
  outer timeout), Redis TTL to match. Taken (read and deleted) once by the callback.
- **Outer codes** (`OuterCode`): by the hash of the code; 5 minutes; consumed once by the token exchange (the
  winner of N concurrent exchanges gets it, the others get None).
- **Linked accounts** live on the user record (`User.oauth_accounts`), so every user read renders
  `oauth_providers`. The project's OAuth index maps (provider id, account id) of each sign-in-enabled account to
  its user: sign-in looks it up, and no two sign-in accounts share that pair. Every write of a user's accounts
  is `ChangeOAuthAccounts` (compare-and-set on the list), or the creation/upgrade of a user with accounts.
- **Provider tokens**: one sealed (encrypted) blob per account row (`ProviderTokenSet`), deleted with the account
  or the user; no TTL (a refresh token outlives the access token it came with).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitWrite
from identity_proto.records import Membership, OAuthAccount, Team, User

__all__ = [
    "AccountsWrite",
    "ChangeOAuthAccounts",
    "ConsumeOuterCode",
    "DropProviderTokens",
    "FindUserByOAuthAccount",
    "LoadProviderTokens",
    "OAuthState",
    "OuterCode",
    "SaveOAuthState",
    "SaveOuterCode",
    "SaveProviderTokens",
    "SetOAuthAccounts",
    "SignUpWithOAuth",
    "SignUpWithOAuthRefusal",
    "TakeOAuthState",
    "oauth_index_key",
]


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
class SaveOAuthState(StorageEffect[None]):
    """Keep `state` under `state_hash` (SHA-256 hex of the inner state) until its expiry."""

    state_hash: str
    state: OAuthState


@dataclass(frozen=True, slots=True)
class TakeOAuthState(StorageEffect[OAuthState | None]):
    """The state kept under `state_hash`, deleted in the same step (a callback runs once); None when there is
    none (never saved, already taken, or collected after its expiry: the flow checks the expiry itself)."""

    state_hash: str


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


@dataclass(frozen=True, slots=True)
class SaveOuterCode(StorageEffect[None]):
    """Keep `code` under `code_hash` (SHA-256 hex of the code) until its expiry (5 minutes)."""

    code_hash: str
    code: OuterCode


@dataclass(frozen=True, slots=True)
class ConsumeOuterCode(StorageEffect[OuterCode | None]):
    """The code under `code_hash`, deleted in the same step (single use: of concurrent exchanges exactly one gets
    it); None when there is none. The flow checks its expiry, redirect URI and PKCE."""

    project_id: str
    code_hash: str


@dataclass(frozen=True, slots=True)
class FindUserByOAuthAccount(StorageEffect[User | None]):
    """The user whose sign-in-enabled account (`provider_config_id`, `account_id`) is in the OAuth index."""

    project_id: str
    provider_config_id: str
    account_id: str


class AccountsWrite(Enum):
    """What `ChangeOAuthAccounts` did (every outcome but DONE wrote nothing)."""

    DONE = "done"
    USER_NOT_FOUND = "user_not_found"
    #: The user's accounts are no longer `expected`: read again and retry.
    CONFLICT = "conflict"
    #: A sign-in-enabled account of `accounts` is another user's in the OAuth index.
    ACCOUNT_TAKEN = "account_taken"


@dataclass(frozen=True, slots=True)
class ChangeOAuthAccounts(StorageEffect[tuple[AccountsWrite, User | None]]):
    """Replace the user's linked accounts `expected` (compared by value with the stored list) by `accounts`, in one
    step: the OAuth index follows (entries of sign-in accounts gone or no longer sign-in removed, new ones added:
    refused with ACCOUNT_TAKEN if another user holds one), and the provider tokens of account rows no longer
    present are deleted. Returns the outcome and, on DONE, the updated user."""

    project_id: str
    user_id: str
    expected: tuple[OAuthAccount, ...]
    accounts: tuple[OAuthAccount, ...]


@dataclass(frozen=True, slots=True)
class SaveProviderTokens(StorageEffect[bool]):
    """Store `sealed` (the account's provider tokens, encrypted by the core) for the account row `account_row_id`
    of `user_id`, replacing what was there; False (nothing stored) when the user no longer has that row."""

    project_id: str
    user_id: str
    account_row_id: str
    sealed: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class LoadProviderTokens(StorageEffect[str | None]):
    """The sealed provider tokens of account row `account_row_id`, or None."""

    project_id: str
    account_row_id: str


class SignUpWithOAuthRefusal(Enum):
    """Why `SignUpWithOAuth` wrote nothing."""

    #: A user with the new user's id exists (random ids: practically never).
    ID_TAKEN = "id_taken"
    #: The new user's auth e-mail is another user's (a concurrent sign-up won it).
    EMAIL_TAKEN = "email_taken"
    #: The new user's sign-in account is another user's in the OAuth index (a concurrent callback won it).
    ACCOUNT_TAKEN = "account_taken"


@dataclass(frozen=True, slots=True)
class SignUpWithOAuth(StorageEffect["User | SignUpWithOAuthRefusal"]):
    """Store `new_user` (who carries their provider account in `oauth_accounts`) as one atomic step: the e-mail
    index entry when they have an auth e-mail, the OAuth index entries of their sign-in accounts, and
    `personal_team` with the creator's membership when given (the caller has set `new_user.selected_team_id` to
    it). No session: the token exchange creates one. Returns the user, or a refusal (nothing written)."""

    project_id: str
    new_user: User
    personal_team: tuple[Team, Membership] | None = None

    def __post_init__(self) -> None:
        if not self.new_user.oauth_accounts:
            raise ValueError("an OAuth sign-up stores the user with their provider account")
        if self.personal_team is not None and self.new_user.selected_team_id != self.personal_team[0].id:
            raise ValueError("a new user has their personal team selected")


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
