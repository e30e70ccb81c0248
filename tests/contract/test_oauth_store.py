"""OAuth storage over every store: the authorize request kept for its callback and the outer code kept for the
token exchange (short-lived values: `put_record` / `take_record`, taken once), linked accounts on the user record
with the project's OAuth index (an OAuth sign-up's commit, `commit_accounts` guarded on the list as read, the
anonymous upgrade's claim, FindUserByIndex), provider tokens (`save_provider_tokens` / LoadProviderTokens),
and what a user's deletion and a project's reset take with them; races with exactly one winner, and the TTLs of the
short-lived records on Redis."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from backends.memory import MemoryStore
from backends.redis import RedisStore
from backends.redis.keys import OAUTH_GRACE_MS
from identity_proto.changes import UserChanges
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    DeleteProject,
    FindUserByIndex,
    ListMemberships,
    ListTeams,
    ListUsers,
    LoadProviderTokens,
    LoadUser,
    LoadUserWithTeam,
    OAuthState,
    OuterCode,
    ResetProjectData,
    ShortLived,
    UpgradeRefusal,
    create_project,
    find_user_by_email,
    find_user_by_oauth_account,
    perform,
)
from identity_proto.effects.commit import (
    CommitConflict,
    Guard,
    IndexIs,
    IndexName,
    IsAbsent,
    PatchUser,
    RecordKind,
    commit,
)
from identity_proto.effects.oauth import put_record, take_record
from identity_proto.flows.oauth import store_oauth_user
from identity_proto.flows.oauth_accounts import commit_accounts, save_provider_tokens
from identity_proto.flows.projects import new_project
from identity_proto.flows.signin import NewUser, commit_new_user
from identity_proto.records import Membership, OAuthAccount, Team, User
from identity_proto.tokens import SeededEntropy
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    delete_user,
    in_threads,
    make_membership,
    make_session,
    make_user,
    run_flow,
    sign_up_anonymously,
    upgrading_anonymous,
)

EMAIL = "ada@example.com"


def account(
    row: str = "row-1", provider: str = "github", account_id: str = "gh-1", *, sign_in: bool = True, **fields: Any
) -> OAuthAccount:
    return OAuthAccount(
        id=row,
        provider_config_id=provider,
        account_id=account_id,
        email=fields.pop("email", EMAIL),
        allow_sign_in=sign_in,
        created_at_millis=fields.pop("created_at_millis", T0),
        **fields,
    )


def oauth_user(user_id: str = "ada", email: str | None = EMAIL, *accounts: OAuthAccount, **fields: Any) -> User:
    return dataclasses.replace(make_user(user_id, email, **fields), oauth_accounts=accounts or (account(),))


def personal_team(user_id: str = "ada", team_id: str = "team-ada") -> tuple[Team, Membership]:
    team = Team(id=team_id, display_name="ada@example.com's Team", created_at_millis=T0)
    return team, make_membership(team_id, user_id, permissions=("$read_members", "team_admin"))


def _taken(guard: Guard) -> str:
    if isinstance(guard, IsAbsent):
        return "id_taken"
    assert isinstance(guard, IndexIs)
    return "email_taken" if guard.index is IndexName.EMAIL else "account_taken"


def signing_up(user: User | None = None, team: tuple[Team, Membership] | None = None, project_id: str = PROJECT) -> Any:
    """What an OAuth sign-up commits (`flows.oauth.store_oauth_user`). A flow answering the user, or what was taken
    (nothing written)."""
    user = user or oauth_user()
    if team is not None:
        user = dataclasses.replace(user, selected_team_id=team[0].id)
    try:
        return (yield from store_oauth_user(project_id, NewUser(user, team)))
    except CommitConflict as conflict:
        return _taken(conflict.guard)


def sign_up(store: Store, user: User | None = None, team: tuple[Team, Membership] | None = None) -> Any:
    return run(signing_up(user, team), store)


def store_user(store: Store, user: User, project_id: str = PROJECT) -> None:
    assert run(commit_new_user(project_id, NewUser(user)), store) == user


def change(store: Store, user_id: str, expected: tuple[OAuthAccount, ...], accounts: tuple[OAuthAccount, ...]) -> Any:
    """`commit_accounts` for the user read with the accounts `expected`: ("done", the user as stored), or
    ("conflict" / "account_taken", None), nothing written."""
    read = store.apply(LoadUser(PROJECT, user_id)) or make_user(user_id)
    try:
        return "done", run(
            commit_accounts(PROJECT, dataclasses.replace(read, oauth_accounts=expected), accounts), store
        )
    except CommitConflict as conflict:
        return ("account_taken" if isinstance(conflict.guard, IndexIs) else "conflict"), None


def save_tokens(store: Store, user_id: str, row: str, sealed: str, project_id: str = PROJECT) -> bool:
    return bool(run(save_provider_tokens(project_id, store.apply(LoadUser(project_id, user_id)), row, sealed), store))


def save_state(store: Store, state_hash: str, state: OAuthState, now_ms: int | None = None) -> bool:
    now_ms = state.created_at_millis if now_ms is None else now_ms
    return bool(run(put_record(ShortLived.OAUTH_STATE, state_hash, state, now_ms), store))


def take_state(store: Store, state_hash: str) -> OAuthState | None:
    return run(take_record(OAuthState, ShortLived.OAUTH_STATE, state_hash), store)


def save_code(store: Store, code_hash: str, code: OuterCode, now_ms: int = T0) -> bool:
    return bool(run(put_record(ShortLived.OUTER_CODE, code_hash, code, now_ms, project_id=code.project_id), store))


def consume_code(store: Store, project_id: str, code_hash: str) -> OuterCode | None:
    return run(take_record(OuterCode, ShortLived.OUTER_CODE, code_hash, project_id=project_id), store)


def find(provider: str = "github", account_id: str = "gh-1", project: str = PROJECT) -> FindUserByIndex:
    return find_user_by_oauth_account(project, provider, account_id)


def make_state(n: int = 1, *, created_at: int = T0, lifetime_ms: int = 600_000, **fields: Any) -> OAuthState:
    values: dict[str, Any] = {
        "project_id": PROJECT,
        "branch_id": None,
        "provider_id": "github",
        "type": "authenticate",
        "redirect_uri": "http://localhost:3000/handler/oauth-callback",
        "outer_state": f"outer-{n}",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
        "inner_code_verifier": f"verifier-{n}",
        "nonce": f"nonce-{n}",
        "user_id": None,
        "provider_scope": None,
        "error_redirect_uri": None,
        "after_callback_redirect_url": None,
        "response_mode": "redirect",
        "created_at_millis": created_at,
        "expires_at_millis": created_at + lifetime_ms,
    }
    return OAuthState(**(values | fields))


def rich_state() -> OAuthState:
    return make_state(
        7,
        branch_id="main",
        type="link",
        redirect_uri="https://app.example.com/ü/callback?x=1&y=«2»",
        outer_state='st"ate\nwith ✓',
        code_challenge_method="plain",
        nonce=None,
        user_id="user-ü",
        provider_scope="repo read:user",
        error_redirect_uri="https://app.example.com/error",
        after_callback_redirect_url="https://app.example.com/after",
        response_mode="json",
    )


def make_code(user_id: str | None = "ada", *, expires_at: int = T0 + 300_000, **fields: Any) -> OuterCode:
    values: dict[str, Any] = {
        "project_id": PROJECT,
        "token_user_id": user_id,
        "redirect_uri": "http://localhost:3000/handler/oauth-callback",
        "code_challenge": "challenge",
        "code_challenge_method": "S256",
        "type": "link",
        "after_callback_redirect_url": None,
        "expires_at_millis": expires_at,
        "provider_id": "github",
        "account_id": "gh-ü",
        "email": EMAIL,
        "email_verified": True,
        "display_name": "Ada ü",
        "profile_image_url": None,
        "sealed_tokens": "v1.sealed",
    }
    return OuterCode(**(values | fields))


def anonymous(user_id: str = "anon") -> User:
    return dataclasses.replace(make_user(user_id), is_anonymous=True)


def upgrade(user_id: str = "anon", claim: OAuthAccount | None = None, email: str = EMAIL) -> Any:
    """An OAuth upgrade as the core makes it (`factories.upgrading_anonymous`: a read, then one `Commit`)."""
    changes = (
        ("primary_email", email),
        ("primary_email_verified", True),
        ("primary_email_auth_enabled", True),
        ("is_anonymous", False),
    )
    return upgrading_anonymous(PROJECT, user_id, changes, f"{email}'s Team", claim or account())


def store_anonymous(store: Store, user_id: str = "anon") -> None:
    user = anonymous(user_id)
    assert run(sign_up_anonymously(PROJECT, user, make_session(f"s-{user_id}", user_id)), store) == user


# --------------------------------------------------------------------------------------------------------------
# States and outer codes


def test_a_state_is_taken_once(store: Store) -> None:
    state = make_state()
    save_state(store, "state-hash", state)

    assert take_state(store, "state-hash") == state
    assert take_state(store, "state-hash") is None


def test_a_state_keeps_every_field_as_it_was_saved(store: Store) -> None:
    state = rich_state()
    save_state(store, "rich", state)
    assert take_state(store, "rich") == state


def test_a_state_never_saved_is_not_found(store: Store) -> None:
    save_state(store, "one", make_state())
    assert take_state(store, "other") is None
    assert take_state(store, "one") == make_state()


def test_states_of_two_projects_are_each_found_by_their_hash(store: Store) -> None:
    mine, theirs = make_state(1), make_state(2, project_id=OTHER_PROJECT)
    save_state(store, "mine", mine)
    save_state(store, "theirs", theirs)
    assert take_state(store, "theirs") == theirs
    assert take_state(store, "mine") == mine


def test_concurrent_callbacks_take_one_state_exactly_once(store: Store) -> None:
    save_state(store, "raced", make_state())
    results = in_threads(*(lambda: take_state(store, "raced") for _ in range(12)))
    assert [r for r in results if r is not None] == [make_state()]


def test_an_outer_code_is_consumed_once(store: Store) -> None:
    code = make_code()
    save_code(store, "code-hash", code)

    assert consume_code(store, PROJECT, "code-hash") == code
    assert consume_code(store, PROJECT, "code-hash") is None


def test_an_outer_code_is_its_projects_only(store: Store) -> None:
    code = make_code(
        None, after_callback_redirect_url="https://app.example.com/ü", type="authenticate", sealed_tokens=None
    )
    save_code(store, "code-hash", code)

    assert consume_code(store, OTHER_PROJECT, "code-hash") is None
    assert consume_code(store, PROJECT, "code-hash") == code


def test_concurrent_exchanges_of_one_code_have_one_winner(store: Store) -> None:
    save_code(store, "raced", make_code())
    results = in_threads(*(lambda: consume_code(store, PROJECT, "raced") for _ in range(12)))
    assert [r for r in results if r is not None] == [make_code()]


def test_redis_states_and_outer_codes_expire_shortly_after_their_expiry(redis_store: RedisStore) -> None:
    now = int(time.time() * 1000)
    save_state(redis_store, "ttl", make_state(created_at=now, lifetime_ms=600_000))
    save_code(redis_store, "ttl", make_code(expires_at=now + 300_000), now)
    keys, client = redis_store.keys, redis_store.client
    for key, lifetime in ((keys.oauth_state("ttl"), 600_000), (keys.outer_code(PROJECT, "ttl"), 300_000)):
        expected = lifetime + OAUTH_GRACE_MS
        assert expected - 2_000 <= int(client.pttl(key)) <= expected


def test_a_state_or_code_saved_after_its_expiry_is_not_kept(store: Store) -> None:
    later = T0 + 3_600_000
    assert save_state(store, "old", make_state(created_at=T0), later) is False
    assert save_code(store, "old", make_code(expires_at=T0), later) is False
    assert take_state(store, "old") is None
    assert consume_code(store, PROJECT, "old") is None


# --------------------------------------------------------------------------------------------------------------
# The OAuth sign-up and the OAuth index


def test_an_oauth_sign_up_stores_the_user_with_both_index_entries_and_the_personal_team(store: Store) -> None:
    team, creator = personal_team()

    stored = sign_up(store, team=(team, creator))

    expected = oauth_user(selected_team_id=team.id)
    assert stored == expected
    assert store.apply(LoadUserWithTeam(PROJECT, "ada")) == (expected, team)
    assert store.apply(find()) == expected
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == expected
    assert store.apply(ListUsers(PROJECT)) == (expected,)
    assert store.apply(ListTeams(PROJECT, user_id="ada")) == (team,)
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == (creator,)


def test_an_oauth_sign_up_without_an_auth_address_or_a_team(store: Store) -> None:
    user = oauth_user("ada", None)
    assert sign_up(store, user) == user
    assert store.apply(find()) == user
    assert store.apply(ListTeams(PROJECT)) == ()


def test_only_sign_in_accounts_are_in_the_index(store: Store) -> None:
    user = oauth_user("ada", EMAIL, account("r1", "github", "gh-1"), account("r2", "google", "g-1", sign_in=False))
    assert sign_up(store, user) == user
    assert store.apply(find("github", "gh-1")) == user
    assert store.apply(find("google", "g-1")) is None


def test_the_index_is_per_project_and_per_provider(store: Store) -> None:
    user = oauth_user()
    sign_up(store, user)
    assert store.apply(find(project=OTHER_PROJECT)) is None
    assert store.apply(find("gitlab", "gh-1")) is None
    assert store.apply(find("github", "gh-2")) is None


def test_an_oauth_sign_up_with_a_taken_id_writes_nothing(store: Store) -> None:
    holder = make_user("ada", "other@example.com")
    store_user(store, holder)

    assert sign_up(store, team=personal_team()) == "id_taken"

    assert store.apply(ListUsers(PROJECT)) == (holder,)
    assert store.apply(find()) is None
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    assert store.apply(ListTeams(PROJECT)) == ()


def test_an_oauth_sign_up_with_a_taken_address_writes_nothing(store: Store) -> None:
    holder = make_user("holder", EMAIL)
    store_user(store, holder)

    assert sign_up(store, team=personal_team()) == "email_taken"

    assert store.apply(ListUsers(PROJECT)) == (holder,)
    assert store.apply(find()) is None
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == holder
    assert store.apply(ListTeams(PROJECT)) == ()


def test_an_oauth_sign_up_with_a_taken_account_writes_nothing(store: Store) -> None:
    holder = oauth_user("holder", "holder@example.com")
    sign_up(store, holder)

    assert sign_up(store, team=personal_team()) == "account_taken"

    assert store.apply(ListUsers(PROJECT)) == (holder,)
    assert store.apply(find()) == holder
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    assert store.apply(ListTeams(PROJECT)) == ()


def test_an_account_without_sign_in_may_be_linked_to_several_users(store: Store) -> None:
    first = oauth_user("first", "first@example.com", account("r1", sign_in=False))
    second = oauth_user("second", "second@example.com", account("r2", sign_in=False))
    assert sign_up(store, first) == first
    assert sign_up(store, second) == second
    assert store.apply(find()) is None


def test_a_new_user_has_their_personal_team_selected() -> None:
    with pytest.raises(ValueError, match="personal team"):
        NewUser(oauth_user(), personal_team())


def test_concurrent_sign_ups_with_one_account_make_one_user(store: Store) -> None:
    users = [oauth_user(f"u{n}", f"u{n}@example.com", account(f"r{n}")) for n in range(10)]

    results = in_threads(*(lambda user=user: sign_up(store, user) for user in users))

    winners = [r for r in results if isinstance(r, User)]
    assert len(winners) == 1
    assert [r for r in results if not isinstance(r, User)] == ["account_taken"] * 9
    assert store.apply(find()) == winners[0]
    assert store.apply(ListUsers(PROJECT)) == (winners[0],)


def test_a_users_accounts_survive_their_other_updates(store: Store) -> None:
    sign_up(store)
    (updated,) = run(
        commit(PROJECT, (), (PatchUser("ada", UserChanges.of(display_name="Ada")),), (), ((RecordKind.USER, "ada"),)),
        store,
    )
    assert isinstance(updated, User)
    assert updated.oauth_accounts == (account(),)
    assert store.apply(find()) == updated


def test_a_change_set_never_sets_the_accounts() -> None:
    with pytest.raises(TypeError, match="oauth_accounts"):
        UserChanges.of(oauth_accounts=())


# --------------------------------------------------------------------------------------------------------------
# commit_accounts


def test_linking_an_account_indexes_it(store: Store) -> None:
    sign_up(store)
    linked = account("row-2", "google", "g-1", email="ada@gmail.com")

    outcome, user = change(store, "ada", (account(),), (account(), linked))

    assert outcome == "done"
    assert user == oauth_user("ada", EMAIL, account(), linked)
    assert store.apply(LoadUser(PROJECT, "ada")) == user
    assert store.apply(find("google", "g-1")) == user
    assert store.apply(find("github", "gh-1")) == user


def test_a_user_without_accounts_links_one(store: Store) -> None:
    plain = make_user("bob", "bob@example.com")
    store_user(store, plain)

    outcome, user = change(store, "bob", (), (account(),))

    assert outcome == "done"
    assert user == dataclasses.replace(plain, oauth_accounts=(account(),))
    assert store.apply(find()) == user


def test_a_stale_expected_list_is_a_conflict_and_writes_nothing(store: Store) -> None:
    sign_up(store)
    stale = dataclasses.replace(account(), email="old@example.com")

    assert change(store, "ada", (), (account("row-9", "google", "g-1"),)) == ("conflict", None)
    assert change(store, "ada", (stale,), ()) == ("conflict", None)

    assert store.apply(LoadUser(PROJECT, "ada")) == oauth_user()
    assert store.apply(find()) == oauth_user()
    assert store.apply(find("google", "g-1")) is None


def test_changing_the_accounts_of_a_missing_user(store: Store) -> None:
    assert change(store, "nobody", (), (account(),)) == ("conflict", None)
    assert store.apply(find()) is None


def test_linking_another_users_sign_in_account_is_refused_and_writes_nothing(store: Store) -> None:
    holder = oauth_user("holder", "holder@example.com")
    sign_up(store, holder)
    bob = make_user("bob", "bob@example.com")
    store_user(store, bob)
    save_tokens(store, "holder", "row-1", "sealed-holder")

    taken = account("row-b", "github", "gh-1")
    assert change(store, "bob", (), (taken,)) == ("account_taken", None)

    assert store.apply(LoadUser(PROJECT, "bob")) == bob
    assert store.apply(find()) == holder
    # Without sign-in the same provider account may be linked (not in the index).
    outcome, linked = change(store, "bob", (), (dataclasses.replace(taken, allow_sign_in=False),))
    assert outcome == "done"
    assert store.apply(find()) == holder
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) == "sealed-holder"
    assert linked is not None
    # ... but turning its sign-in on is refused while the holder has it.
    assert change(store, "bob", linked.oauth_accounts, (taken,)) == ("account_taken", None)


def test_removing_an_account_drops_its_index_entry_and_its_tokens_only(store: Store) -> None:
    other = account("row-2", "google", "g-1")
    sign_up(store, oauth_user("ada", EMAIL, account(), other))
    save_tokens(store, "ada", "row-1", "sealed-1")
    save_tokens(store, "ada", "row-2", "sealed-2")

    outcome, user = change(store, "ada", (account(), other), (other,))

    assert outcome == "done"
    assert user == oauth_user("ada", EMAIL, other)
    assert store.apply(find()) is None
    assert store.apply(find("google", "g-1")) == user
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-2")) == "sealed-2"
    # The removed account is free for someone else now.
    assert isinstance(sign_up(store, oauth_user("bob", "bob@example.com", account("row-b"))), User)


def test_turning_sign_in_off_and_on_moves_the_index_entry_and_keeps_the_tokens(store: Store) -> None:
    sign_up(store)
    save_tokens(store, "ada", "row-1", "sealed-1")
    off = dataclasses.replace(account(), allow_sign_in=False)

    outcome, user = change(store, "ada", (account(),), (off,))
    assert outcome == "done"
    assert store.apply(find()) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) == "sealed-1"

    outcome, user = change(store, "ada", (off,), (account(),))
    assert (outcome, user) == ("done", oauth_user())
    assert store.apply(find()) == oauth_user()


def test_rich_accounts_compare_and_round_trip(store: Store) -> None:
    rich = OAuthAccount(
        id="row-ü",
        provider_config_id="my-oidc_1",
        account_id='1234567890123456789 "ü"\\',
        email="zoë@exämple.com",
        allow_sign_in=True,
        allow_connected_accounts=False,
        created_at_millis=T0 + 123,
    )
    no_email = account("row-n", "gitlab", "9007199254740993", email=None, created_at_millis=0)
    user = oauth_user("ada", EMAIL, rich, no_email)
    assert sign_up(store, user) == user
    assert store.apply(LoadUser(PROJECT, "ada")) == user
    assert store.apply(find_user_by_oauth_account(PROJECT, "my-oidc_1", rich.account_id)) == user

    outcome, changed = change(store, "ada", (rich, no_email), (no_email,))
    assert outcome == "done"
    assert changed == oauth_user("ada", EMAIL, no_email)
    assert change(store, "ada", (no_email,), ()) == ("done", make_user("ada", EMAIL))
    assert store.apply(find("gitlab", "9007199254740993")) is None


def test_concurrent_changes_of_one_users_accounts_lose_no_update(store: Store) -> None:
    store_user(store, make_user("ada", EMAIL))
    new = [account(f"row-{n}", "github", f"gh-{n}") for n in range(8)]

    first = in_threads(*(lambda a=a: change(store, "ada", (), (a,)) for a in new))
    assert sorted(outcome for outcome, _ in first) == ["conflict"] * 7 + ["done"]

    def link(linked: OAuthAccount) -> int:
        """Read, append, write; again on CONFLICT. Returns the number of conflicts met."""
        conflicts = 0
        while True:
            user = store.apply(LoadUser(PROJECT, "ada"))
            assert user is not None
            if linked in user.oauth_accounts:
                return conflicts
            outcome, _ = change(store, "ada", user.oauth_accounts, (*user.oauth_accounts, linked))
            if outcome == "done":
                return conflicts
            assert outcome == "conflict"
            conflicts += 1

    in_threads(*(lambda a=a: link(a) for a in new))
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert sorted(a.id for a in user.oauth_accounts) == sorted(a.id for a in new)
    for a in new:
        assert store.apply(find("github", a.account_id)) == user


def test_two_users_claiming_one_account_at_once_make_one_holder(store: Store) -> None:
    ids = [f"u{n}" for n in range(8)]
    for user_id in ids:
        store_user(store, make_user(user_id, f"{user_id}@example.com"))

    results = in_threads(*(lambda u=u: change(store, u, (), (account(f"row-{u}"),)) for u in ids))

    assert sorted(outcome for outcome, _ in results) == ["account_taken"] * 7 + ["done"]
    (winner,) = [user for outcome, user in results if outcome == "done"]
    assert store.apply(find()) == winner
    holders = [u.id for u in store.apply(ListUsers(PROJECT)) if u.oauth_accounts]
    assert holders == [winner.id]


def test_redis_a_user_stored_before_accounts_existed_has_none(redis_store: RedisStore) -> None:
    store_user(redis_store, make_user("old", EMAIL))
    redis_store.client.hdel(redis_store.keys.user(PROJECT, "old"), "oauth_accounts")

    assert change(redis_store, "old", (account(),), ()) == ("conflict", None)
    outcome, user = change(redis_store, "old", (), (account(),))

    assert outcome == "done"
    assert user == oauth_user("old", EMAIL)


# --------------------------------------------------------------------------------------------------------------
# Provider tokens


def test_provider_tokens_are_stored_per_account_row_and_replaced(store: Store) -> None:
    sign_up(store, oauth_user("ada", EMAIL, account(), account("row-2", "google", "g-1")))

    assert save_tokens(store, "ada", "row-1", "sealed-a") is True
    assert save_tokens(store, "ada", "row-2", "sealed-b") is True
    assert save_tokens(store, "ada", "row-1", "sealed-c") is True

    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) == "sealed-c"
    assert store.apply(LoadProviderTokens(PROJECT, "row-2")) == "sealed-b"
    assert store.apply(LoadProviderTokens(OTHER_PROJECT, "row-1")) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-3")) is None


def test_provider_tokens_of_a_row_the_user_does_not_have_are_not_stored(store: Store) -> None:
    sign_up(store)
    sign_up(store, oauth_user("bob", "bob@example.com", account("row-b", "github", "gh-b")))

    assert save_tokens(store, "ada", "row-b", "sealed") is False
    assert save_tokens(store, "nobody", "row-1", "sealed") is False
    assert save_tokens(store, "ada", "row-1", "sealed", OTHER_PROJECT) is False

    assert store.apply(LoadProviderTokens(PROJECT, "row-b")) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) is None


def test_redis_provider_tokens_and_the_index_never_expire(redis_store: RedisStore) -> None:
    sign_up(redis_store)
    save_tokens(redis_store, "ada", "row-1", "sealed")
    keys = redis_store.keys
    for key in (keys.oauth_index(PROJECT), keys.provider_tokens(PROJECT)):
        assert redis_store.client.pttl(key) == -1


# --------------------------------------------------------------------------------------------------------------
# What a user's deletion and a project's reset take with them


def test_deleting_a_user_frees_their_accounts_and_drops_their_tokens(store: Store) -> None:
    sign_up(store, oauth_user("ada", EMAIL, account(), account("row-2", "google", "g-1", sign_in=False)))
    bob = oauth_user("bob", "bob@example.com", account("row-b", "gitlab", "gl-1"))
    sign_up(store, bob)
    for user_id, row in (("ada", "row-1"), ("ada", "row-2"), ("bob", "row-b")):
        save_tokens(store, user_id, row, f"sealed-{row}")

    assert delete_user(store, PROJECT, "ada") is True

    assert store.apply(find()) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-2")) is None
    assert store.apply(find("gitlab", "gl-1")) == bob
    assert store.apply(LoadProviderTokens(PROJECT, "row-b")) == "sealed-row-b"
    # The account signs someone else up now.
    assert isinstance(sign_up(store, oauth_user("carol", "carol@example.com", account("row-c"))), User)


def index_entries(store: Store, project_id: str = PROJECT) -> dict[str, str]:
    """The project's OAuth index as stored (entries pointing at nobody included), and its provider token rows."""
    if isinstance(store, MemoryStore):
        tenant = store.tenant(project_id)
        return dict(tenant.oauth_index) | {f"tokens:{row}": "" for row in tenant.provider_tokens}
    assert isinstance(store, RedisStore)
    index = store.client.hgetall(store.keys.oauth_index(project_id))
    rows = store.client.hkeys(store.keys.provider_tokens(project_id))
    return {k.decode(): v.decode() for k, v in index.items()} | {f"tokens:{row.decode()}": "" for row in rows}


def test_a_deleted_user_leaves_no_index_entry_or_tokens_behind(store: Store) -> None:
    sign_up(store, oauth_user("ada", EMAIL, account(), account("row-2", "google", "g-1")))
    sign_up(store, oauth_user("bob", "bob@example.com", account("row-b", "gitlab", "gl-1")))
    save_tokens(store, "ada", "row-2", "sealed")
    save_tokens(store, "bob", "row-b", "sealed")
    assert index_entries(store) == {
        "github\ngh-1": "ada",
        "google\ng-1": "ada",
        "gitlab\ngl-1": "bob",
        "tokens:row-2": "",
        "tokens:row-b": "",
    }

    delete_user(store, PROJECT, "ada")

    assert index_entries(store) == {"gitlab\ngl-1": "bob", "tokens:row-b": ""}


def _project(project_id: str) -> Any:
    project, _ = new_project(SeededEntropy(3), T0, "OAuth", None, project_id=project_id)
    return project


def test_a_state_outlives_its_projects_reset_until_it_is_taken(store: Store) -> None:
    # The callback knows no project (Redis keeps states under their own hash tag): a reset leaves them to be taken
    # (the flow then finds the project's data gone) or to expire, on every store alike.
    run(create_project(_project(PROJECT)), store)
    save_state(store, "kept", make_state())
    assert store.apply(ResetProjectData(PROJECT)) is True
    assert take_state(store, "kept") == make_state()


@pytest.mark.parametrize("effect", [ResetProjectData, DeleteProject])
def test_a_project_reset_or_deletion_clears_its_oauth_data_only(store: Store, effect: type[Any]) -> None:
    for project_id in (PROJECT, OTHER_PROJECT):
        run(create_project(_project(project_id)), store)
        run(signing_up(project_id=project_id), store)
        save_tokens(store, "ada", "row-1", "sealed", project_id)
        save_code(store, f"code-{project_id}", make_code(project_id=project_id))

    assert store.apply(effect(PROJECT)) is True

    assert store.apply(find()) is None
    assert store.apply(LoadProviderTokens(PROJECT, "row-1")) is None
    assert consume_code(store, PROJECT, f"code-{PROJECT}") is None
    assert store.apply(find(project=OTHER_PROJECT)) == oauth_user()
    assert store.apply(LoadProviderTokens(OTHER_PROJECT, "row-1")) == "sealed"
    assert consume_code(store, OTHER_PROJECT, f"code-{OTHER_PROJECT}") is not None
    # The account signs up anew in the reset project.
    if effect is ResetProjectData:
        assert sign_up(store) == oauth_user()


# --------------------------------------------------------------------------------------------------------------
# The anonymous upgrade's account


def test_an_oauth_upgrade_links_and_indexes_the_account(store: Store) -> None:
    store_anonymous(store)

    upgraded = run_flow(store, lambda: upgrade())

    assert isinstance(upgraded, User)
    assert (upgraded.is_anonymous, upgraded.primary_email) == (False, EMAIL)
    assert upgraded.oauth_accounts == (account(),)
    assert store.apply(LoadUser(PROJECT, "anon")) == upgraded
    assert store.apply(find()) == upgraded
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == upgraded


def test_an_oauth_upgrade_with_an_account_without_sign_in_is_not_indexed(store: Store) -> None:
    store_anonymous(store)
    upgraded = run_flow(store, lambda: upgrade(claim=account(sign_in=False)))
    assert isinstance(upgraded, User)
    assert upgraded.oauth_accounts == (account(sign_in=False),)
    assert store.apply(find()) is None


def test_an_oauth_upgrade_to_a_taken_account_writes_nothing(store: Store) -> None:
    store_anonymous(store)
    holder = oauth_user("holder", "holder@example.com")
    sign_up(store, holder)

    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.ACCOUNT_TAKEN

    assert store.apply(LoadUser(PROJECT, "anon")) == anonymous()
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    assert store.apply(find()) == holder


def test_an_oauth_upgrade_to_a_taken_address_writes_nothing(store: Store) -> None:
    store_anonymous(store)
    holder = make_user("holder", EMAIL)
    store_user(store, holder)

    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.EMAIL_TAKEN

    assert store.apply(LoadUser(PROJECT, "anon")) == anonymous()
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == holder
    assert store.apply(find()) is None


def test_an_oauth_upgrade_checks_the_account_before_the_address(store: Store) -> None:
    store_anonymous(store)
    sign_up(store, oauth_user("holder", EMAIL))  # holds both the account and the address
    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.ACCOUNT_TAKEN


def test_an_oauth_upgrade_of_a_user_no_longer_anonymous_claims_nothing(store: Store) -> None:
    store_anonymous(store)
    assert isinstance(run_flow(store, lambda: upgrade(claim=account("row-x", "gitlab", "gl-1"))), User)
    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.NOT_ANONYMOUS
    assert store.apply(find()) is None
    assert run_flow(store, lambda: upgrade("nobody")) is UpgradeRefusal.NOT_FOUND


def test_concurrent_oauth_upgrades_claiming_one_account_make_one_holder(store: Store) -> None:
    ids = [f"anon-{n}" for n in range(8)]
    for user_id in ids:
        store_anonymous(store, user_id)

    results = in_threads(
        *(lambda u=u: run_flow(store, lambda: upgrade(u, account(f"row-{u}"), f"{u}@example.com")) for u in ids)
    )

    winners = [r for r in results if isinstance(r, User)]
    assert len(winners) == 1
    assert [r for r in results if not isinstance(r, User)] == [UpgradeRefusal.ACCOUNT_TAKEN] * 7
    assert store.apply(find()) == winners[0]


# --------------------------------------------------------------------------------------------------------------
# The asyncio stores


def test_async_oauth_storage_through_arun(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[Any]:
        return [
            await arun(put_record(ShortLived.OAUTH_STATE, "s", make_state(), T0), store),
            await arun(take_record(OAuthState, ShortLived.OAUTH_STATE, "s"), store),
            await arun(take_record(OAuthState, ShortLived.OAUTH_STATE, "s"), store),
            await arun(put_record(ShortLived.OUTER_CODE, "c", make_code(), T0, project_id=PROJECT), store),
            await arun(take_record(OuterCode, ShortLived.OUTER_CODE, "c", project_id=PROJECT), store),
            await arun(signing_up(), store),
            await arun(perform(find()), store),
            await arun(save_provider_tokens(PROJECT, oauth_user(), "row-1", "sealed"), store),
            await arun(perform(LoadProviderTokens(PROJECT, "row-1")), store),
            await arun(commit_accounts(PROJECT, oauth_user(), ()), store),
            await arun(perform(LoadProviderTokens(PROJECT, "row-1")), store),
        ]

    results = async_store.run(scenario)
    user = oauth_user()
    assert results == [
        True,
        make_state(),
        None,
        True,
        make_code(),
        user,
        user,
        True,
        "sealed",
        make_user("ada", EMAIL),
        None,
    ]
