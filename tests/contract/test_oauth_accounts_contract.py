"""Linked accounts (`/oauth-providers`) and connected accounts (`/connected-accounts`, reference part 2 §7.6) over
every store, the whole service driven in process. The OAuth provider is a boundary we do not own: a scripted
`ProviderClient` stands in for it (which access tokens it accepts, what each refresh token gives)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from identity_proto import Request, ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import LoadUser, perform
from identity_proto.effects.commit import Commit
from identity_proto.effects.oauth import LoadProviderTokens, SetOAuthAccounts
from identity_proto.effects.oauth_provider import (
    CheckProviderAccessToken,
    ProviderEffect,
    ProviderFailure,
    ProviderTokens,
    RefreshProviderToken,
)
from identity_proto.flows.oauth_accounts import commit_accounts, save_provider_tokens
from identity_proto.provider_tokens import seal, unseal
from identity_proto.records import OAuthAccount
from identity_proto.service import Service
from identity_proto.tokens import SeededEntropy
from tests.contract.service import ServiceOver
from tests.support import PROJECT_ID, Reply, admin_headers, client_headers, server_headers

KEY = b"k" * 32
V1 = "/api/v1"
PROVIDERS = [
    {"id": "github", "type": "github", "client_id": "gh-client", "client_secret": "gh-secret-0001"},
    {"id": "spotify", "type": "spotify", "client_id": "sp-client", "client_secret": "sp-secret-0002"},
    {"id": "work-gitlab", "type": "gitlab", "client_id": "gl-client", "client_secret": "gl-secret-0003"},
]


@dataclass
class ScriptedProvider:
    """The provider: accepts the access tokens in `accepted`; a refresh of token R answers `refreshes[R]`."""

    accepted: set[str] = field(default_factory=set)
    refreshes: dict[str, ProviderTokens | ProviderFailure] = field(default_factory=dict)
    calls: list[ProviderEffect[Any]] = field(default_factory=list)

    def perform(self, effect: ProviderEffect[object]) -> object:
        self.calls.append(effect)
        if isinstance(effect, CheckProviderAccessToken):
            return effect.access_token in self.accepted
        if isinstance(effect, RefreshProviderToken):
            answer = self.refreshes[effect.refresh_token]
            if isinstance(answer, ProviderFailure):
                raise answer
            return answer
        raise AssertionError(f"unexpected provider effect {effect!r}")


@dataclass
class Over(ServiceOver):
    """The service over one store, with a scripted provider and a token key."""

    provider: ScriptedProvider = field(default_factory=ScriptedProvider)
    service: Service = field(
        default_factory=lambda: Service(
            ServiceOptions(password_rounds=4, rate_limits_enabled=False, oauth_token_key=KEY)
        )
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        assert (
            self.request(
                "PATCH", f"{V1}/projects/current", admin_headers(), {"config": {"oauth_providers": PROVIDERS}}
            ).status
            == 200
        )

    def request(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Reply:
        raw = {**headers, "content-type": "application/json"} if body is not None else headers
        path, _, query = path.partition("?")
        encoded = orjson.dumps(body) if body is not None else b""
        request = Request(method, path, tuple(raw.items()), encoded, query, "203.0.113.7")
        return Reply.of(
            run(self.service.handle(request, self.now_ms, self.entropy), self.store, provider=self.provider)
        )

    def user(self, email: str) -> tuple[str, dict[str, str]]:
        """A signed-in user's id and client headers."""
        signed_in = self.code_sign_in(email).json
        return signed_in["user_id"], client_headers(**{"x-service-access-token": signed_in["access_token"]})

    def link(self, user_id: str, provider: str = "github", account_id: str = "gh-1", **fields: Any) -> Reply:
        body = {
            "user_id": user_id,
            "provider_config_id": provider,
            "account_id": account_id,
            "allow_sign_in": True,
            "allow_connected_accounts": True,
            **fields,
        }
        return self.request("POST", f"{V1}/oauth-providers", server_headers(), body)

    def plant_tokens(self, user_id: str, row_id: str, tokens: ProviderTokens) -> None:
        sealed = seal(tokens, tokens.scope, KEY, project_id=PROJECT_ID, account_row_id=row_id, entropy=SeededEntropy(3))
        user = run(perform(LoadUser(PROJECT_ID, user_id)), self.store)
        assert run(save_provider_tokens(PROJECT_ID, user, row_id, sealed), self.store) is True

    def stored_tokens(self, row_id: str) -> ProviderTokens | None:
        sealed = run(perform(LoadProviderTokens(PROJECT_ID, row_id)), self.store)
        return None if sealed is None else unseal(sealed, KEY, project_id=PROJECT_ID, account_row_id=row_id)


@pytest.fixture
def over(store: Store) -> Over:
    return Over(store)


def plain(reply: Reply, status: int, text: str) -> None:
    assert (reply.status, reply.body.decode(), reply.known_error) == (status, text, None)


def known(reply: Reply, code: str) -> None:
    assert (reply.status >= 400, reply.known_error) == (True, code), reply.body


# --------------------------------------------------------------------------------------------------------------
# /oauth-providers


def test_a_server_links_an_account_that_the_user_then_reads_and_lists(over: Over) -> None:
    user_id, me = over.user("ada@example.com")
    created = over.link(user_id, email="ada@github.example")
    assert created.status == 201, created.body
    row = created.json
    assert row == {
        "user_id": user_id,
        "id": row["id"],
        "email": "ada@github.example",
        "provider_config_id": "github",
        "type": "github",
        "allow_sign_in": True,
        "allow_connected_accounts": True,
        "account_id": "gh-1",
    }
    client_view = {k: v for k, v in row.items() if k != "account_id"}
    assert over.request("GET", f"{V1}/oauth-providers/me/{row['id']}", me).json == client_view
    assert over.request("GET", f"{V1}/oauth-providers/{user_id}/{row['id']}", me).json == client_view
    listed = over.request("GET", f"{V1}/oauth-providers?user_id=me", me).json
    assert listed == {"items": [client_view], "is_paginated": False}
    user = over.request("GET", f"{V1}/users/{user_id}", server_headers()).json
    assert user["oauth_providers"] == [{"id": "github", "account_id": "gh-1", "email": "ada@github.example"}]


def test_an_account_without_email_has_no_email_key(over: Over) -> None:
    user_id, _ = over.user("ada@example.com")
    assert "email" not in over.link(user_id).json


def test_linking_needs_a_configured_provider_and_an_existing_user(over: Over) -> None:
    user_id, _ = over.user("ada@example.com")
    plain(over.link(user_id, provider="discord"), 404, "OAuth provider discord not found or not configured")
    known(over.link("0c6a1d5e-0000-4000-8000-000000000000"), "USER_NOT_FOUND")


def test_a_client_cannot_link_an_account(over: Over) -> None:
    _user_id, me = over.user("ada@example.com")
    body = {
        "user_id": "me",
        "provider_config_id": "github",
        "account_id": "x",
        "allow_sign_in": True,
        "allow_connected_accounts": True,
    }
    known(over.request("POST", f"{V1}/oauth-providers", me, body), "INSUFFICIENT_ACCESS_TYPE")


def test_one_sign_in_account_per_provider_and_user(over: Over) -> None:
    user_id, _ = over.user("ada@example.com")
    first = over.link(user_id, account_id="gh-1").json["id"]
    plain(
        over.link(user_id, account_id="gh-2"),
        400,
        "The same provider type with sign-in enabled already exists for this user.",
    )
    second = over.link(user_id, account_id="gh-3", allow_sign_in=False)
    assert second.status == 201
    path = f"{V1}/oauth-providers/{user_id}/"
    enable = {"allow_sign_in": True}
    plain(
        over.request("PATCH", path + second.json["id"], server_headers(), enable),
        400,
        "The same provider type with sign-in enabled already exists for this user.",
    )
    assert (
        over.request("PATCH", path + first, server_headers(), {"allow_sign_in": False}).json["allow_sign_in"] is False
    )
    assert over.request("PATCH", path + second.json["id"], server_headers(), enable).json["allow_sign_in"] is True
    # another provider is another type
    assert over.link(user_id, provider="spotify", account_id="gh-1").status == 201


def test_one_account_id_per_provider_and_user(over: Over) -> None:
    user_id, _ = over.user("ada@example.com")
    assert over.link(user_id, account_id="gh-1", allow_sign_in=False).status == 201
    plain(
        over.link(user_id, account_id="gh-1", allow_sign_in=False),
        400,
        "The same provider type with the same account ID already exists for this user.",
    )


def test_an_account_id_signs_in_one_user_only(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    bob, _ = over.user("bob@example.com")
    ada_row = over.link(ada, account_id="gh-1").json["id"]
    known(over.link(bob, account_id="gh-1"), "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN")
    bob_row = over.link(bob, account_id="gh-1", allow_sign_in=False).json["id"]
    enable = {"allow_sign_in": True}
    known(
        over.request("PATCH", f"{V1}/oauth-providers/{bob}/{bob_row}", server_headers(), enable),
        "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN",
    )
    assert (
        over.request(
            "PATCH", f"{V1}/oauth-providers/{ada}/{ada_row}", server_headers(), {"allow_sign_in": False}
        ).status
        == 200
    )
    assert over.request("PATCH", f"{V1}/oauth-providers/{bob}/{bob_row}", server_headers(), enable).status == 200
    # moving a sign-in account onto a taken account id is refused by the store's index
    carol, _ = over.user("carol@example.com")
    carol_row = over.link(carol, account_id="gh-9").json["id"]
    moved = over.request("PATCH", f"{V1}/oauth-providers/{carol}/{carol_row}", server_headers(), {"account_id": "gh-1"})
    known(moved, "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN")
    assert (
        over.request("GET", f"{V1}/oauth-providers/{carol}/{carol_row}", server_headers()).json["account_id"] == "gh-9"
    )


def test_the_same_account_id_at_another_provider_is_another_account(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    bob, _ = over.user("bob@example.com")
    assert over.link(ada, account_id="42").status == 201
    assert over.link(bob, provider="spotify", account_id="42").status == 201


def test_a_server_updates_email_and_account_id_a_client_only_the_flags(over: Over) -> None:
    user_id, me = over.user("ada@example.com")
    row = over.link(user_id).json["id"]
    updated = over.request(
        "PATCH",
        f"{V1}/oauth-providers/{user_id}/{row}",
        server_headers(),
        {"email": "new@example.com", "account_id": "gh-2"},
    )
    assert (updated.json["email"], updated.json["account_id"]) == ("new@example.com", "gh-2")
    known(over.request("PATCH", f"{V1}/oauth-providers/me/{row}", me, {"account_id": "gh-3"}), "SCHEMA_ERROR")
    flags = over.request("PATCH", f"{V1}/oauth-providers/me/{row}", me, {"allow_connected_accounts": False})
    assert flags.status == 200
    assert (flags.json["allow_sign_in"], flags.json["allow_connected_accounts"]) == (True, False)
    assert "account_id" not in flags.json


def test_a_client_acts_on_its_own_accounts_only(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    _, bob_me = over.user("bob@example.com")
    row = over.link(ada).json["id"]
    base = f"{V1}/oauth-providers/{ada}/{row}"
    plain(over.request("GET", base, bob_me), 403, "Client can only read OAuth providers for their own user.")
    plain(
        over.request("PATCH", base, bob_me, {"allow_sign_in": False}),
        403,
        "Client can only update OAuth providers for their own user.",
    )
    plain(over.request("DELETE", base, bob_me), 403, "Client can only delete OAuth providers for their own user.")
    plain(
        over.request("GET", f"{V1}/oauth-providers?user_id={ada}", bob_me),
        403,
        "Client can only list OAuth providers for their own user.",
    )
    plain(
        over.request("GET", f"{V1}/oauth-providers", bob_me),
        403,
        "Client can only list OAuth providers for their own user.",
    )
    plain(
        over.request("GET", f"{V1}/connected-accounts/{ada}", bob_me),
        403,
        "Client can only list connected accounts for their own user.",
    )
    assert over.request("GET", f"{V1}/oauth-providers/{ada}/{row}", server_headers()).status == 200


def test_a_row_is_found_only_under_its_own_user(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    bob, _ = over.user("bob@example.com")
    row = over.link(ada).json["id"]
    for method, body in (("GET", None), ("PATCH", {"allow_sign_in": False}), ("DELETE", None)):
        reply = over.request(method, f"{V1}/oauth-providers/{bob}/{row}", server_headers(), body)
        plain(reply, 404, f"OAuth provider {row} for user {bob} not found")
    known(
        over.request("GET", f"{V1}/oauth-providers/0c6a1d5e-0000-4000-8000-000000000000/{row}", server_headers()),
        "USER_NOT_FOUND",
    )
    known(over.request("GET", f"{V1}/oauth-providers/{ada}/not-a-uuid", server_headers()), "SCHEMA_ERROR")


def test_deleting_an_account_frees_its_account_id_and_drops_its_tokens(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    bob, _ = over.user("bob@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at", "rt", None, "user:email"))
    assert over.request("DELETE", f"{V1}/oauth-providers/me/{row}", me).json == {"success": True}
    plain(
        over.request("GET", f"{V1}/oauth-providers/me/{row}", me), 404, f"OAuth provider {row} for user {ada} not found"
    )
    assert over.stored_tokens(row) is None
    assert over.link(bob).status == 201


def test_a_server_lists_every_account_of_the_project_in_creation_order(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    bob, _ = over.user("bob@example.com")
    over.link(ada, account_id="a")
    over.now_ms += 1
    over.link(bob, account_id="b")
    over.now_ms += 1
    over.link(ada, provider="spotify", account_id="c")
    items = over.request("GET", f"{V1}/oauth-providers", server_headers()).json["items"]
    assert [(i["user_id"], i["account_id"]) for i in items] == [(ada, "a"), (bob, "b"), (ada, "c")]


def test_accounts_of_a_removed_provider_stay_listed_under_a_well_known_type_only(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    spotify = over.link(ada, provider="spotify").json["id"]
    gitlab = over.link(ada, provider="work-gitlab").json["id"]
    assert (
        over.request("PATCH", f"{V1}/projects/current", admin_headers(), {"config": {"oauth_providers": []}}).status
        == 200
    )
    items = over.request("GET", f"{V1}/oauth-providers?user_id=me", me).json["items"]
    assert [(i["id"], i["type"]) for i in items] == [(spotify, "spotify")]
    plain(
        over.request("GET", f"{V1}/oauth-providers/me/{gitlab}", me),
        404,
        "OAuth provider work-gitlab not found or not configured",
    )
    assert over.request("DELETE", f"{V1}/oauth-providers/me/{gitlab}", me).status == 200


# --------------------------------------------------------------------------------------------------------------
# /connected-accounts


def test_connected_accounts_are_the_accounts_that_allow_them(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    over.link(ada, account_id="gh-1")
    over.link(ada, provider="spotify", account_id="sp-1", allow_connected_accounts=False)
    over.link(ada, account_id="gh-2", allow_sign_in=False)
    listed = over.request("GET", f"{V1}/connected-accounts/me", me).json
    assert listed == {
        "items": [
            {"user_id": ada, "provider": "github", "provider_account_id": "gh-1"},
            {"user_id": ada, "provider": "github", "provider_account_id": "gh-2"},
        ],
        "is_paginated": False,
    }
    assert over.request("GET", f"{V1}/connected-accounts/{ada}", server_headers()).json == listed


def token_path(provider: str = "github", account: str | None = "gh-1", user: str = "me") -> str:
    middle = f"{provider}/{account}" if account is not None else provider
    return f"{V1}/connected-accounts/{user}/{middle}/access-token"


def test_a_stored_access_token_the_provider_accepts_is_returned(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-1", "rt-1", over.now_ms + 3_600_000, "user:email repo"))
    over.provider.accepted.add("at-1")
    reply = over.request("POST", token_path(), me, {"scope": "repo"})
    assert (reply.status, reply.json) == (201, {"access_token": "at-1"})
    assert over.request("POST", token_path(account=None), me, {}).json == {"access_token": "at-1"}
    assert over.request("POST", f"{V1}/auth/oauth/connected-accounts/github/access-token", me, {}).json == {
        "access_token": "at-1"
    }
    assert over.request("POST", token_path(user=ada), server_headers(), {}).json == {"access_token": "at-1"}
    assert not any(isinstance(c, RefreshProviderToken) for c in over.provider.calls)


def test_an_access_token_expiring_within_five_minutes_is_refreshed_and_the_new_refresh_token_kept(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-old", "rt-1", over.now_ms + 4 * 60_000, "user:email"))
    over.provider.accepted.add("at-old")
    over.provider.refreshes["rt-1"] = ProviderTokens("at-new", "rt-2", over.now_ms + 3_600_000, "user:email")
    assert over.request("POST", token_path(), me, {}).json == {"access_token": "at-new"}
    stored = over.stored_tokens(row)
    assert stored is not None
    assert (stored.access_token, stored.refresh_token, stored.scope) == ("at-new", "rt-2", "user:email")
    over.provider.accepted.add("at-new")
    assert over.request("POST", token_path(), me, {}).json == {"access_token": "at-new"}


def test_a_refused_access_token_is_forgotten_and_refreshed_keeping_an_unrotated_refresh_token(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-revoked", "rt-1", over.now_ms + 3_600_000, "user:email"))
    over.provider.refreshes["rt-1"] = ProviderTokens("at-2", None, over.now_ms + 3_600_000, "")
    assert over.request("POST", token_path(), me, {}).json == {"access_token": "at-2"}
    stored = over.stored_tokens(row)
    assert stored is not None
    assert (stored.access_token, stored.refresh_token) == ("at-2", "rt-1")


def test_a_refused_refresh_token_is_forgotten_and_the_user_must_link_again(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-revoked", "rt-revoked", over.now_ms + 3_600_000, "user:email"))
    over.provider.refreshes["rt-revoked"] = ProviderFailure("invalid_grant")
    known(over.request("POST", token_path(), me, {}), "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE")
    calls = len(over.provider.calls)
    known(over.request("POST", token_path(), me, {}), "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE")
    assert len(over.provider.calls) == calls  # nothing left to try


def test_tokens_without_the_scopes_asked_for_are_not_used(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-1", "rt-1", over.now_ms + 3_600_000, "user:email"))
    over.provider.accepted.add("at-1")
    known(over.request("POST", token_path(), me, {"scope": "repo"}), "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE")
    assert over.provider.calls == []


def test_an_unreachable_provider_is_503_and_keeps_the_stored_tokens(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    row = over.link(ada).json["id"]
    over.plant_tokens(ada, row, ProviderTokens("at-1", "rt-1", over.now_ms + 60_000, "user:email"))
    over.provider.refreshes["rt-1"] = ProviderFailure("unavailable")
    reply = over.request("POST", token_path(), me, {})
    assert (reply.status, reply.known_error) == (503, "OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE")
    stored = over.stored_tokens(row)
    assert stored is not None
    assert stored.refresh_token == "rt-1"


def test_access_token_refusals_in_order(over: Over) -> None:
    ada, me = over.user("ada@example.com")
    _, bob_me = over.user("bob@example.com")
    over.link(ada, account_id="gh-1")
    over.link(ada, provider="spotify", account_id="sp-1", allow_connected_accounts=False)
    plain(
        over.request("POST", token_path(user=ada), bob_me, {}), 403, "Client can only access its own connected accounts"
    )
    known(over.request("POST", token_path(provider="discord"), me, {}), "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED")
    known(over.request("POST", token_path(account="gh-2"), me, {}), "OAUTH_CONNECTION_NOT_CONNECTED_TO_USER")
    known(
        over.request("POST", token_path(provider="spotify", account="sp-1"), me, {}),
        "OAUTH_CONNECTION_NOT_CONNECTED_TO_USER",
    )
    known(
        over.request("POST", token_path(provider="work-gitlab", account=None), me, {}),
        "OAUTH_CONNECTION_NOT_CONNECTED_TO_USER",
    )
    known(over.request("POST", token_path(), me, {}), "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE")


def test_a_client_asking_for_provider_tokens_is_rate_limited_per_address(store: Store) -> None:
    limited = Over(store, service=Service(ServiceOptions(password_rounds=4, oauth_token_key=KEY)))
    ada, me = limited.user("ada@example.com")
    limited.link(ada)
    path = token_path()
    for _ in range(60):
        known(limited.request("POST", path, me, {}), "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE")
    refused = limited.request("POST", path, me, {})
    assert (refused.status, refused.known_error, refused.json["details"]["rule"]) == (
        429,
        "RATE_LIMITED",
        "provider_token_ip",
    )
    assert (
        limited.request("POST", token_path(user=ada), server_headers(), {}).status == 400
    )  # servers: their own budget


@dataclass
class RacingStore:
    """The store, with another writer's change of the same user's accounts landing just before the first commit of
    their accounts this request sends (as a concurrent request would)."""

    inner: Store
    rival: OAuthAccount
    raced: bool = False

    def apply(self, effect: Any) -> Any:
        writes = effect.writes if isinstance(effect, Commit) else ()
        accounts = next((w for w in writes if isinstance(w, SetOAuthAccounts)), None)
        if accounts is not None and not self.raced:
            self.raced = True
            user = self.inner.apply(LoadUser(effect.project_id, accounts.user_id))
            run(commit_accounts(effect.project_id, user, (*user.oauth_accounts, self.rival)), self.inner)
        return self.inner.apply(effect)

    def close(self) -> None:
        self.inner.close()


def test_a_write_that_lost_a_race_reads_again_and_keeps_the_winners_account(over: Over) -> None:
    ada, _ = over.user("ada@example.com")
    rival = OAuthAccount("9d7e8f10-0000-4000-8000-000000000001", "spotify", "sp-1", created_at_millis=over.now_ms)
    over.store = RacingStore(over.store, rival)  # type: ignore[assignment]
    assert over.link(ada, account_id="gh-1").status == 201
    assert over.store.raced  # type: ignore[attr-defined]
    listed = over.request("GET", f"{V1}/oauth-providers?user_id={ada}", server_headers()).json["items"]
    assert sorted(i["account_id"] for i in listed) == ["gh-1", "sp-1"]
