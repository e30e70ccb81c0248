"""The user and session contract (LoadUser, FindUserByIndex; a user stored by a sign-up's commit, its fields set
by a PATCH (`patch_user`) or an internal write's commit (`PatchUser`); a session stored by a
commit's PutSession, UseRefreshToken, LoadSession, ListSessions, ended by the core's `end_session` (SessionExists,
EndSession) or all of a user's at once (DropSession each, guarded)) over every store."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from backends.redis import GRACE_MS, RedisStore
from identity_proto.changes import UserChanges
from identity_proto.drivers import Store, arun
from identity_proto.effects import (
    ListSessions,
    LoadSession,
    LoadUser,
    UseRefreshToken,
    find_user_by_email,
    perform,
)
from identity_proto.effects.commit import Committed, Conflict
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.users import patch_user
from identity_proto.records import RiskScores, User
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    EMAIL_TAKEN,
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_user,
    create_team,
    delete_team,
    delete_user,
    end_session,
    ending_session,
    in_threads,
    make_session,
    make_user,
    patched_user,
    put_session,
    putting_session,
    remove_user_behind_the_stores_back,
    revoke_sessions,
    revoking_sessions,
    rich_user,
    set_user_fields,
)

#: What a PATCH to an address another user signs in with answers (409).
TAKEN = ErrorCode.USER_EMAIL_ALREADY_EXISTS

# --------------------------------------------------------------------------------------------------------------
# Users: load, create, find


def test_load_of_a_missing_user_is_none(store: Store) -> None:
    assert store.apply(LoadUser(PROJECT, "nobody")) is None
    assert store.apply(find_user_by_email(PROJECT, "nobody@example.com")) is None


def test_create_then_load_and_find_round_trip_every_field(store: Store) -> None:
    user = rich_user()

    assert store.apply(add_user(PROJECT, user)) == Committed((user,))

    loaded = store.apply(LoadUser(PROJECT, user.id))
    assert loaded == user
    assert loaded is not None
    assert loaded.client_metadata == {
        "theme": "dark",
        "nested": {"list": [1, 2.5, None, True, "ß"], "empty": {}},
        "n": None,
    }
    assert loaded.client_read_only_metadata == ["a", None, ["nested", {"deep": "✓"}], 0, -7, False]
    assert loaded.server_metadata == {"plan": "pro", "quota": 12_345_678_901, "tags": [], "emoji": "🎉"}
    assert loaded.risk_scores == RiskScores(bot=42, free_trial_abuse=99)
    assert loaded.display_name == "Zoë Ünïcode ✓ «rich» 🎉"
    assert loaded.restricted_by_admin_private_details == 'line one\nline "two"\ttab \\ backslash'
    assert store.apply(find_user_by_email(PROJECT, "zoë@exämple.com")) == user


def test_create_round_trips_a_user_with_every_default(store: Store) -> None:
    user = User(id="user-plain", signed_up_at_millis=1, last_active_at_millis=2)

    assert store.apply(add_user(PROJECT, user)) == Committed((user,))

    assert store.apply(LoadUser(PROJECT, user.id)) == user


@pytest.mark.parametrize("metadata", ["just a string", 0, -1.5, True, [], {}, None], ids=repr)
def test_metadata_may_be_any_json_value(store: Store, metadata: Any) -> None:
    user = make_user("user-meta", client_metadata=metadata, server_metadata=[metadata])
    store.apply(add_user(PROJECT, user))

    assert store.apply(LoadUser(PROJECT, user.id)) == user


def test_users_are_per_project(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    store.apply(add_user(PROJECT, user))

    assert store.apply(LoadUser(OTHER_PROJECT, user.id)) is None
    assert store.apply(find_user_by_email(OTHER_PROJECT, "a@example.com")) is None
    # the same address signs a user in to another project
    elsewhere = make_user("user-2", "a@example.com")
    assert store.apply(add_user(OTHER_PROJECT, elsewhere)) == Committed((elsewhere,))


def test_create_with_a_taken_auth_email_is_refused_and_writes_nothing(store: Store) -> None:
    first = make_user("user-1", "a@example.com")
    second = make_user("user-2", "a@example.com", display_name="Second")
    store.apply(add_user(PROJECT, first))

    assert store.apply(add_user(PROJECT, second)) == EMAIL_TAKEN

    assert store.apply(LoadUser(PROJECT, second.id)) is None
    assert store.apply(find_user_by_email(PROJECT, "a@example.com")) == first


def test_an_address_without_auth_is_not_indexed_and_takes_nothing(store: Store) -> None:
    contact_only = make_user("user-1", "a@example.com", auth=False)
    signs_in = make_user("user-2", "a@example.com")

    assert store.apply(add_user(PROJECT, contact_only)) == Committed((contact_only,))
    assert store.apply(find_user_by_email(PROJECT, "a@example.com")) is None
    assert store.apply(add_user(PROJECT, signs_in)) == Committed((signs_in,))
    assert store.apply(find_user_by_email(PROJECT, "a@example.com")) == signs_in
    # and a third user without auth on the same address is fine too
    third = make_user("user-3", "a@example.com", auth=False)
    assert store.apply(add_user(PROJECT, third)) == Committed((third,))


def test_find_matches_the_address_exactly(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    store.apply(add_user(PROJECT, user))

    assert store.apply(find_user_by_email(PROJECT, "A@example.com")) is None
    assert store.apply(find_user_by_email(PROJECT, "a@example.co")) is None
    assert store.apply(find_user_by_email(PROJECT, "a@example.com")) == user


# --------------------------------------------------------------------------------------------------------------
# Users: update


def test_update_of_a_missing_user_is_not_found_and_creates_nothing(store: Store) -> None:
    result = patched_user(store, PROJECT, "nobody", (("display_name", "Ghost"), ("primary_email", "g@x.com")))

    assert result is None
    assert store.apply(set_user_fields(PROJECT, "nobody", (("display_name", "Ghost"),))) == Conflict(0)
    assert store.apply(LoadUser(PROJECT, "nobody")) is None


def test_update_sets_the_given_fields_and_returns_the_user(store: Store) -> None:
    user = rich_user()
    store.apply(add_user(PROJECT, user))
    changes = (
        ("display_name", None),
        ("client_metadata", {"new": ["ü", None, {"x": 1}]}),
        ("risk_scores", RiskScores(bot=1, free_trial_abuse=2)),
        ("last_active_at_millis", T0 + 5),
        ("password_hash", None),
    )

    updated = store.apply(set_user_fields(PROJECT, user.id, changes))

    expected = dataclasses.replace(user, **dict(changes))
    assert updated == Committed((expected,))
    assert store.apply(LoadUser(PROJECT, user.id)) == expected
    assert store.apply(find_user_by_email(PROJECT, "zoë@exämple.com")) == expected


def test_update_without_changes_returns_the_stored_user(store: Store) -> None:
    user = rich_user()
    store.apply(add_user(PROJECT, user))

    assert store.apply(set_user_fields(PROJECT, user.id, ())) == Committed((user,))
    assert patched_user(store, PROJECT, user.id, ())[0] == user


def test_update_of_an_unknown_field_is_a_type_error(store: Store) -> None:
    user = make_user("user-1")
    store.apply(add_user(PROJECT, user))

    with pytest.raises(TypeError):
        store.apply(set_user_fields(PROJECT, user.id, (("no_such_field", 1),)))
    assert store.apply(LoadUser(PROJECT, user.id)) == user


def test_update_to_a_taken_address_is_refused_and_writes_nothing(store: Store) -> None:
    alice = make_user("alice", "alice@example.com")
    bob = make_user("bob", "bob@example.com")
    store.apply(add_user(PROJECT, alice))
    store.apply(add_user(PROJECT, bob))

    result = patched_user(store, PROJECT, bob.id, (("display_name", "Bob 2"), ("primary_email", "alice@example.com")))

    assert result is TAKEN
    assert store.apply(LoadUser(PROJECT, bob.id)) == bob  # display_name too
    assert store.apply(find_user_by_email(PROJECT, "alice@example.com")) == alice
    assert store.apply(find_user_by_email(PROJECT, "bob@example.com")) == bob


def test_turning_auth_on_for_a_taken_address_is_refused(store: Store) -> None:
    alice = make_user("alice", "shared@example.com")
    bob = make_user("bob", "shared@example.com", auth=False)
    store.apply(add_user(PROJECT, alice))
    store.apply(add_user(PROJECT, bob))

    assert patched_user(store, PROJECT, bob.id, (("primary_email_auth_enabled", True),)) is TAKEN

    assert store.apply(LoadUser(PROJECT, bob.id)) == bob
    assert store.apply(find_user_by_email(PROJECT, "shared@example.com")) == alice


def test_turning_auth_off_frees_the_address(store: Store) -> None:
    alice = make_user("alice", "alice@example.com")
    bob = make_user("bob", "bob@example.com")
    store.apply(add_user(PROJECT, alice))
    store.apply(add_user(PROJECT, bob))

    off, _team = patched_user(store, PROJECT, alice.id, (("primary_email_auth_enabled", False),))

    assert off == dataclasses.replace(alice, primary_email_auth_enabled=False)
    assert store.apply(find_user_by_email(PROJECT, "alice@example.com")) is None
    # the address is free: bob can move to it, and alice can no longer turn auth back on
    moved, _team = patched_user(store, PROJECT, bob.id, (("primary_email", "alice@example.com"),))
    assert moved == dataclasses.replace(bob, primary_email="alice@example.com")
    assert store.apply(find_user_by_email(PROJECT, "alice@example.com")) == moved
    assert store.apply(find_user_by_email(PROJECT, "bob@example.com")) is None
    assert patched_user(store, PROJECT, alice.id, (("primary_email_auth_enabled", True),)) is TAKEN


def test_changing_the_address_moves_the_index_entry(store: Store) -> None:
    user = make_user("user-1", "old@example.com")
    store.apply(add_user(PROJECT, user))

    updated, _team = patched_user(store, PROJECT, user.id, (("primary_email", "new@example.com"),))

    assert updated == dataclasses.replace(user, primary_email="new@example.com")
    assert store.apply(find_user_by_email(PROJECT, "old@example.com")) is None
    assert store.apply(find_user_by_email(PROJECT, "new@example.com")) == updated
    # the old address is free for someone else
    second = make_user("user-2", "old@example.com")
    assert store.apply(add_user(PROJECT, second)) == Committed((second,))


def test_removing_the_address_frees_it(store: Store) -> None:
    user = make_user("user-1", "gone@example.com")
    store.apply(add_user(PROJECT, user))

    assert patched_user(store, PROJECT, user.id, (("primary_email", None),)) == (
        dataclasses.replace(user, primary_email=None),
        None,
    )
    assert store.apply(find_user_by_email(PROJECT, "gone@example.com")) is None


def test_turning_auth_on_and_setting_the_address_at_once_indexes_it(store: Store) -> None:
    user = make_user("user-1")
    store.apply(add_user(PROJECT, user))

    changes = (("primary_email", "fresh@example.com"), ("primary_email_auth_enabled", True))
    updated, _team = patched_user(store, PROJECT, user.id, changes)

    assert isinstance(updated, User)
    assert updated.auth_email == "fresh@example.com"
    assert store.apply(find_user_by_email(PROJECT, "fresh@example.com")) == updated


def test_setting_ones_own_address_again_is_fine(store: Store) -> None:
    user = make_user("user-1", "me@example.com")
    store.apply(add_user(PROJECT, user))

    same, _team = patched_user(store, PROJECT, user.id, (("primary_email", "me@example.com"), ("display_name", "Me")))

    assert same == dataclasses.replace(user, display_name="Me")
    assert store.apply(find_user_by_email(PROJECT, "me@example.com")) == same


def test_update_with_revoke_sessions_removes_every_session_of_the_user_only(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    other = make_user("user-2", "b@example.com")
    store.apply(add_user(PROJECT, user))
    store.apply(add_user(PROJECT, other))
    mine = [make_session(f"s-{i}", user.id) for i in range(3)]
    theirs = make_session("s-theirs", other.id)
    for session in (*mine, theirs):
        put_session(store, PROJECT, session)

    updated, _team = patched_user(store, PROJECT, user.id, (("password_hash", "$2b$new"),), revoke_sessions=True)

    assert updated == dataclasses.replace(user, password_hash="$2b$new")
    assert store.apply(ListSessions(PROJECT, user.id)) == ()
    for session in mine:
        assert store.apply(LoadSession(PROJECT, session.id)) is None
        assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is None
    assert store.apply(ListSessions(PROJECT, other.id)) == (theirs,)
    # sessions created afterwards are kept
    later = make_session("s-later", user.id)
    put_session(store, PROJECT, later)
    assert patched_user(store, PROJECT, user.id, (("display_name", "X"),))[0].display_name == "X"
    assert store.apply(ListSessions(PROJECT, user.id)) == (later,)


def test_a_refused_update_with_revoke_sessions_keeps_the_sessions(store: Store) -> None:
    alice = make_user("alice", "alice@example.com")
    bob = make_user("bob", "bob@example.com")
    store.apply(add_user(PROJECT, alice))
    store.apply(add_user(PROJECT, bob))
    session = make_session("s-bob", bob.id)
    put_session(store, PROJECT, session)

    result = patched_user(store, PROJECT, bob.id, (("primary_email", "alice@example.com"),), revoke_sessions=True)

    assert result is TAKEN
    assert store.apply(ListSessions(PROJECT, bob.id)) == (session,)
    assert patched_user(store, PROJECT, "nobody", (), revoke_sessions=True) is None


def test_concurrent_updates_of_different_fields_from_two_threads_both_survive(store: Store) -> None:
    user = rich_user()
    store.apply(add_user(PROJECT, user))

    def writer(field: str, value: Any) -> None:
        for i in range(50):
            result = patched_user(store, PROJECT, user.id, ((field, value(i)),))
            assert isinstance(result[0], User)

    in_threads(
        lambda: writer("display_name", lambda i: f"name-{i}"),
        lambda: writer("client_metadata", lambda i: {"i": i, "list": [i, "ü"]}),
    )

    final = store.apply(LoadUser(PROJECT, user.id))
    assert final == dataclasses.replace(user, display_name="name-49", client_metadata={"i": 49, "list": [49, "ü"]})


def test_of_concurrent_creates_with_one_address_exactly_one_wins(store: Store) -> None:
    users = [make_user(f"user-{i}", "race@example.com") for i in range(10)]

    results = in_threads(*[lambda u=u: store.apply(add_user(PROJECT, u)) for u in users])

    winners = [result.records[0] for result in results if isinstance(result, Committed)]
    assert len(winners) == 1
    assert results.count(EMAIL_TAKEN) == 9
    assert store.apply(find_user_by_email(PROJECT, "race@example.com")) == winners[0]
    assert [store.apply(LoadUser(PROJECT, u.id)) is not None for u in users].count(True) == 1


def test_of_concurrent_moves_to_one_address_exactly_one_wins(store: Store) -> None:
    users = [make_user(f"user-{i}", f"u{i}@example.com") for i in range(10)]
    for user in users:
        store.apply(add_user(PROJECT, user))

    results = in_threads(
        *[lambda u=u: patched_user(store, PROJECT, u.id, (("primary_email", "target@example.com"),)) for u in users]
    )

    winners = [result[0] for result in results if isinstance(result, tuple)]
    assert len(winners) == 1
    assert results.count(TAKEN) == 9
    assert store.apply(find_user_by_email(PROJECT, "target@example.com")) == winners[0]
    for user in users:
        still_indexed = store.apply(find_user_by_email(PROJECT, user.primary_email or ""))
        assert (still_indexed is None) == (user.id == winners[0].id)


def test_async_users_through_arun(async_store: AsyncBackend) -> None:
    user = rich_user()
    other = make_user("other", "other@example.com")

    moved = UserChanges.of(primary_email=user.primary_email)

    async def scenario(store: Any) -> list[Any]:
        return [
            await arun(perform(add_user(PROJECT, user)), store),
            await arun(perform(add_user(PROJECT, dataclasses.replace(other, primary_email=user.primary_email))), store),
            await arun(perform(add_user(PROJECT, other)), store),
            await arun(_refused(patch_user(PROJECT, other.id, moved)), store),
            await arun(patch_user(PROJECT, user.id, UserChanges.of(display_name="Async")), store),
            await arun(perform(find_user_by_email(PROJECT, user.primary_email or "")), store),
            await arun(perform(LoadUser(PROJECT, "missing")), store),
        ]

    renamed = dataclasses.replace(user, display_name="Async")
    assert async_store.run(scenario) == [
        Committed((user,)),
        EMAIL_TAKEN,
        Committed((other,)),
        TAKEN,
        (renamed, None),
        renamed,
        None,
    ]


def _refused(flow: Any) -> Any:
    """`flow`'s answer, or the code of the KnownError it raised."""
    try:
        return (yield from flow)
    except KnownError as error:
        return error.code


# --------------------------------------------------------------------------------------------------------------
# Sessions


def _with_user(store: Store, user_id: str = "user-1") -> User:
    user = make_user(user_id, f"{user_id}@example.com")
    assert store.apply(add_user(PROJECT, user)) == Committed((user,))
    return user


def test_create_then_load_round_trips_every_field(store: Store) -> None:
    user = _with_user(store)
    session = make_session("s-1", user.id, last_used_at_millis=T0 + 7, is_impersonation=True)

    put_session(store, PROJECT, session)

    assert store.apply(LoadSession(PROJECT, session.id)) == session
    assert store.apply(LoadSession(PROJECT, "missing")) is None
    assert store.apply(LoadSession(OTHER_PROJECT, session.id)) is None


def test_use_refresh_token_records_the_last_use_and_returns_the_user(store: Store) -> None:
    user = _with_user(store)
    session = make_session("s-1", user.id)
    put_session(store, PROJECT, session)

    found = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 123))

    used = dataclasses.replace(session, last_used_at_millis=T0 + 123)
    active = dataclasses.replace(user, last_active_at_millis=T0 + 123)
    assert found == (used, active)
    assert store.apply(LoadSession(PROJECT, session.id)) == used
    assert store.apply(LoadUser(PROJECT, user.id)) == active
    assert store.apply(ListSessions(PROJECT, user.id)) == (used,)
    # again, later
    assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 456)) == (
        dataclasses.replace(session, last_used_at_millis=T0 + 456),
        dataclasses.replace(user, last_active_at_millis=T0 + 456),
    )


def test_use_with_an_earlier_clock_sets_the_last_use_but_never_moves_the_users_activity_back(store: Store) -> None:
    user = dataclasses.replace(make_user("user-1", "a@example.com"), last_active_at_millis=T0 + 1_000)
    store.apply(add_user(PROJECT, user))
    session = make_session("s-1", user.id, created_at=T0)
    put_session(store, PROJECT, session)

    found = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 10))

    assert found == (dataclasses.replace(session, last_used_at_millis=T0 + 10), user)
    assert store.apply(LoadUser(PROJECT, user.id)) == user


def test_use_does_not_judge_expiry(store: Store) -> None:
    user = _with_user(store)
    session = make_session("s-1", user.id, lifetime_ms=10)
    put_session(store, PROJECT, session)
    later = session.expires_at_millis + 1

    found = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, later))

    assert found == (
        dataclasses.replace(session, last_used_at_millis=later),
        dataclasses.replace(user, last_active_at_millis=later),
    )


def test_use_of_an_unknown_token_is_none(store: Store) -> None:
    user = _with_user(store)
    put_session(store, PROJECT, make_session("s-1", user.id))

    assert store.apply(UseRefreshToken(PROJECT, "token-unknown", T0)) is None
    assert store.apply(UseRefreshToken(OTHER_PROJECT, "token-s-1", T0)) is None


def test_use_after_the_user_is_gone_is_none(store: Store) -> None:
    user = _with_user(store)
    session = make_session("s-1", user.id)
    put_session(store, PROJECT, session)

    remove_user_behind_the_stores_back(store, PROJECT, user.id)

    assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 1)) is None
    assert store.apply(LoadSession(PROJECT, session.id)) == session  # and the use was not recorded


def test_list_is_newest_first_with_ties_by_id(store: Store) -> None:
    user = _with_user(store)
    other = _with_user(store, "user-2")
    oldest = make_session("s-oldest", user.id, created_at=T0)
    tie_a = make_session("s-tie-a", user.id, created_at=T0 + 10)
    tie_b = make_session("s-tie-b", user.id, created_at=T0 + 10)
    newest = make_session("s-newest", user.id, created_at=T0 + 20)
    for session in (tie_b, oldest, newest, tie_a, make_session("s-other", other.id, created_at=T0 + 5)):
        put_session(store, PROJECT, session)

    assert store.apply(ListSessions(PROJECT, user.id)) == (newest, tie_a, tie_b, oldest)
    assert store.apply(ListSessions(PROJECT, "nobody")) == ()
    assert store.apply(ListSessions(OTHER_PROJECT, user.id)) == ()


def test_delete_session_removes_it_everywhere(store: Store) -> None:
    user = _with_user(store)
    doomed = make_session("s-doomed", user.id, created_at=T0)
    kept = make_session("s-kept", user.id, created_at=T0 + 1)
    put_session(store, PROJECT, doomed)
    put_session(store, PROJECT, kept)

    assert end_session(store, PROJECT, doomed.id) is True
    assert end_session(store, PROJECT, doomed.id) is False

    assert store.apply(LoadSession(PROJECT, doomed.id)) is None
    assert store.apply(UseRefreshToken(PROJECT, doomed.refresh_token_hash, T0)) is None
    assert store.apply(ListSessions(PROJECT, user.id)) == (kept,)
    assert store.apply(LoadSession(PROJECT, kept.id)) == kept


def test_delete_of_a_missing_session_is_false(store: Store) -> None:
    assert end_session(store, PROJECT, "missing") is False


def test_revoke_returns_the_count_and_removes_everything(store: Store) -> None:
    user = _with_user(store)
    other = _with_user(store, "user-2")
    mine = [make_session(f"s-{i}", user.id, created_at=T0 + i) for i in range(3)]
    theirs = make_session("s-theirs", other.id)
    for session in (*mine, theirs):
        put_session(store, PROJECT, session)

    assert revoke_sessions(store, PROJECT, user.id) == 3

    for session in mine:
        assert store.apply(LoadSession(PROJECT, session.id)) is None
        assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is None
        assert end_session(store, PROJECT, session.id) is False
    assert store.apply(ListSessions(PROJECT, user.id)) == ()
    assert revoke_sessions(store, PROJECT, user.id) == 0
    # other users keep theirs
    assert store.apply(ListSessions(PROJECT, other.id)) == (theirs,)
    assert store.apply(UseRefreshToken(PROJECT, theirs.refresh_token_hash, T0)) is not None


def test_revoke_after_a_delete_counts_what_is_left(store: Store) -> None:
    user = _with_user(store)
    for i in range(3):
        put_session(store, PROJECT, make_session(f"s-{i}", user.id))
    end_session(store, PROJECT, "s-1")

    assert revoke_sessions(store, PROJECT, user.id) == 2


def test_revoke_for_a_user_without_sessions_is_zero(store: Store) -> None:
    assert revoke_sessions(store, PROJECT, "nobody") == 0


def test_sessions_and_users_of_one_user_stay_consistent_under_concurrent_creates_and_revoke(store: Store) -> None:
    user = _with_user(store)

    def create(offset: int) -> None:
        for i in range(25):
            put_session(store, PROJECT, make_session(f"s-{offset}-{i}", user.id, created_at=T0 + i))

    def revoke() -> int:
        total = 0
        for _ in range(10):
            total += revoke_sessions(store, PROJECT, user.id)
        return total

    results = in_threads(lambda: create(0), lambda: create(1), revoke)

    left = store.apply(ListSessions(PROJECT, user.id))
    assert results[2] + len(left) == 50  # every session either revoked (and counted) or still listed
    for session in left:
        assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is not None


def test_async_sessions_through_arun(async_store: AsyncBackend) -> None:
    user = make_user("user-1", "a@example.com")
    first = make_session("s-1", user.id, created_at=T0)
    second = make_session("s-2", user.id, created_at=T0 + 1)

    async def scenario(store: Any) -> list[Any]:
        await arun(perform(add_user(PROJECT, user)), store)
        await arun(putting_session(PROJECT, first), store)
        await arun(putting_session(PROJECT, second), store)
        return [
            await arun(perform(UseRefreshToken(PROJECT, first.refresh_token_hash, T0 + 9)), store),
            await arun(perform(ListSessions(PROJECT, user.id)), store),
            await arun(ending_session(PROJECT, second.id), store),
            await arun(perform(LoadSession(PROJECT, second.id)), store),
            await arun(revoking_sessions(PROJECT, user.id), store),
            await arun(perform(ListSessions(PROJECT, user.id)), store),
        ]

    used = dataclasses.replace(first, last_used_at_millis=T0 + 9)
    active = dataclasses.replace(user, last_active_at_millis=T0 + 9)
    assert async_store.run(scenario) == [(used, active), (second, used), True, None, 1, ()]


# --------------------------------------------------------------------------------------------------------------
# Redis: layout, TTLs, sessions gone by TTL


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def test_a_session_expired_by_the_wall_clock_is_still_used_so_the_core_can_refuse_it(store: Store) -> None:
    now = _wall_ms()
    user = dataclasses.replace(make_user("user-1"), signed_up_at_millis=now - 7_200_000, last_active_at_millis=0)
    store.apply(add_user(PROJECT, user))
    # expired an hour ago by every clock in the room (the core's and Redis's alike): within the grace period
    session = make_session("s-expired", user.id, created_at=now - 7_200_000, lifetime_ms=3_600_000)
    put_session(store, PROJECT, session)

    found = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, now))

    assert found == (
        dataclasses.replace(session, last_used_at_millis=now),
        dataclasses.replace(user, last_active_at_millis=now),
    )
    assert found[0].expires_at_millis < now  # the core's to judge: it refuses the refresh
    assert store.apply(LoadSession(PROJECT, session.id)) == found[0]
    assert store.apply(ListSessions(PROJECT, user.id)) == (found[0],)


def test_redis_user_and_session_layout(redis_store: RedisStore) -> None:
    user = rich_user()
    session = make_session("s-1", user.id)
    redis_store.apply(add_user(PROJECT, user))
    put_session(redis_store, PROJECT, session)
    client, keys = redis_store.client, redis_store.keys
    prefix = f"{keys.namespace}{{p:{PROJECT}}}:"

    assert keys.user(PROJECT, user.id) == f"{prefix}user:{user.id}"
    assert keys.users_by_email(PROJECT) == f"{prefix}user-by-email"
    assert keys.session(PROJECT, session.id) == f"{prefix}session:{session.id}"
    assert keys.session_by_token(PROJECT, session.refresh_token_hash) == f"{prefix}session-by-token:token-s-1"
    assert keys.user_sessions(PROJECT, user.id) == f"{prefix}user-sessions:{user.id}"
    assert keys.user_order(PROJECT) == f"{prefix}user-order"
    assert set(client.scan_iter(match=f"{keys.namespace}*")) == {
        f"{prefix}user:{user.id}".encode(),
        f"{prefix}user-by-email".encode(),
        f"{prefix}user-order".encode(),
        f"{prefix}session:{session.id}".encode(),
        f"{prefix}session-by-token:token-s-1".encode(),
        f"{prefix}user-sessions:{user.id}".encode(),
        # (no events stream: the project has no webhook endpoint, so user.created is owed to no one)
    }
    user_key = f"{prefix}user:{user.id}"
    assert client.type(user_key) == b"hash"
    assert {f.decode() for f in client.hkeys(user_key)} == {f.name for f in dataclasses.fields(User)}
    assert client.hget(user_key, "risk_scores") == b'{"bot":42,"free_trial_abuse":99}'
    assert client.hget(user_key, "primary_email_auth_enabled") == b"true"
    assert client.hget(user_key, "display_name") == '"Zoë Ünïcode ✓ «rich» 🎉"'.encode()
    assert client.hgetall(f"{prefix}user-by-email") == {"zoë@exämple.com".encode(): user.id.encode()}
    assert client.get(f"{prefix}session-by-token:token-s-1") == b"s-1"
    assert client.smembers(f"{prefix}user-sessions:{user.id}") == {b"s-1"}
    assert client.hget(f"{prefix}session:s-1", "is_impersonation") == b"false"
    assert client.type(f"{prefix}user-order") == b"zset"
    assert client.zrange(f"{prefix}user-order", 0, -1, withscores=True) == [
        (user.id.encode(), float(user.signed_up_at_millis))
    ]


def test_redis_update_writes_only_the_changed_fields(redis_store: RedisStore) -> None:
    user = make_user("user-1", "a@example.com")
    redis_store.apply(add_user(PROJECT, user))
    user_key = redis_store.keys.user(PROJECT, user.id)
    redis_store.client.hset(user_key, "country_code", '"XX"')  # a concurrent writer's field, say

    updated, _team = patched_user(redis_store, PROJECT, user.id, (("display_name", "New"),))

    assert updated == dataclasses.replace(user, display_name="New", country_code="XX")


def test_redis_a_user_record_missing_a_field_reads_its_default(redis_store: RedisStore) -> None:
    user = make_user("user-1", "a@example.com", otp_auth_enabled=True)
    redis_store.apply(add_user(PROJECT, user))
    redis_store.client.hdel(redis_store.keys.user(PROJECT, user.id), "otp_auth_enabled", "risk_scores")

    assert redis_store.apply(LoadUser(PROJECT, user.id)) == dataclasses.replace(user, otp_auth_enabled=False)


def test_redis_session_keys_expire_a_grace_period_after_the_session(redis_store: RedisStore) -> None:
    now = _wall_ms()
    user = make_user("user-1")
    shorter = make_session("s-short", user.id, created_at=now, lifetime_ms=30_000)
    longer = make_session("s-long", user.id, created_at=now, lifetime_ms=90_000)
    put_session(redis_store, PROJECT, longer)
    put_session(redis_store, PROJECT, shorter)
    keys = redis_store.keys

    def assert_pttl(key: str, lifetime_ms: int) -> None:
        expected = lifetime_ms + GRACE_MS
        assert expected - 2_000 <= int(redis_store.client.pttl(key)) <= expected

    assert_pttl(keys.session(PROJECT, shorter.id), 30_000)
    assert_pttl(keys.session_by_token(PROJECT, shorter.refresh_token_hash), 30_000)
    assert_pttl(keys.session(PROJECT, longer.id), 90_000)
    assert_pttl(keys.user_sessions(PROJECT, user.id), 90_000)  # the latest of its sessions
    redis_store.apply(UseRefreshToken(PROJECT, shorter.refresh_token_hash, now))
    assert_pttl(keys.session(PROJECT, shorter.id), 30_000)


def test_redis_sessions_gone_by_ttl_leave_the_list_and_the_set(redis_store: RedisStore) -> None:
    now = _wall_ms()
    user = make_user("user-1")
    redis_store.apply(add_user(PROJECT, user))
    lasting = make_session("s-lasting", user.id, created_at=now, lifetime_ms=60_000)
    # expired a grace period and a minute ago: its keys' TTLs are over when it is stored (the set, older, stays)
    gone = make_session("s-gone", user.id, created_at=now - GRACE_MS - 120_000, lifetime_ms=60_000)
    put_session(redis_store, PROJECT, lasting)
    put_session(redis_store, PROJECT, gone)
    assert redis_store.client.smembers(redis_store.keys.user_sessions(PROJECT, user.id)) == {b"s-lasting", b"s-gone"}

    assert redis_store.apply(ListSessions(PROJECT, user.id)) == (lasting,)
    assert redis_store.client.smembers(redis_store.keys.user_sessions(PROJECT, user.id)) == {b"s-lasting"}
    assert redis_store.apply(LoadSession(PROJECT, gone.id)) is None
    assert redis_store.apply(UseRefreshToken(PROJECT, gone.refresh_token_hash, _wall_ms())) is None
    assert end_session(redis_store, PROJECT, gone.id) is False
    assert revoke_sessions(redis_store, PROJECT, user.id) == 1


def test_redis_list_skips_a_set_member_whose_session_is_gone(redis_store: RedisStore) -> None:
    user = make_user("user-1")
    session = make_session("s-1", user.id)
    put_session(redis_store, PROJECT, session)
    redis_store.client.sadd(redis_store.keys.user_sessions(PROJECT, user.id), "s-ghost")

    assert redis_store.apply(ListSessions(PROJECT, user.id)) == (session,)
    assert redis_store.client.smembers(redis_store.keys.user_sessions(PROJECT, user.id)) == {b"s-1"}


# --- a PATCH's commit: the write and what rendering it needs, in one step ------------------------------------------


def test_a_patch_answers_the_user_and_the_team_selected_afterwards(store: Store) -> None:
    from tests.contract.factories import make_team

    user = make_user("u-1", "ada@example.com")
    store.apply(add_user(PROJECT, user))
    first, second = make_team("team-1"), make_team("team-2")
    create_team(store, PROJECT, first)
    create_team(store, PROJECT, second)
    renamed = patched_user(store, PROJECT, user.id, (("display_name", "Ada"),))
    assert renamed == (dataclasses.replace(user, display_name="Ada"), None)
    selected = patched_user(store, PROJECT, user.id, (("selected_team_id", "team-2"),))
    assert selected == (dataclasses.replace(user, display_name="Ada", selected_team_id="team-2"), second)
    again = patched_user(store, PROJECT, user.id, (("display_name", "Ada L."),))
    assert again[1] == second  # the team selected before, read with the write
    delete_team(store, PROJECT, "team-2")
    gone = patched_user(store, PROJECT, user.id, ())
    assert gone == (store.apply(LoadUser(PROJECT, user.id)), None)


def test_a_patch_refuses_a_missing_user_and_a_taken_address(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("u-1", "ada@example.com")))
    store.apply(add_user(PROJECT, make_user("u-2", "bob@example.com")))
    missing = patched_user(store, PROJECT, "nobody", (("display_name", "X"),))
    assert missing is None
    taken = patched_user(store, PROJECT, "u-2", (("primary_email", "ada@example.com"),))
    assert taken is TAKEN
    assert store.apply(LoadUser(PROJECT, "u-2")) == make_user("u-2", "bob@example.com")


# --- SessionIsLive: a PATCH made only while the caller's session lives -------------------------------------------


def test_a_guarded_patch_writes_only_while_its_session_lives(store: Store) -> None:
    from identity_proto.effects.commit import SessionIsLive
    from tests.contract.factories import make_session

    user = make_user("u-1", "ada@example.com")
    store.apply(add_user(PROJECT, user))
    session = make_session("s-1", user.id)
    put_session(store, PROJECT, session)
    live = SessionIsLive("s-1", user.id, session.created_at_millis)
    assert patched_user(store, PROJECT, user.id, (("display_name", "Ada"),), live=live)[0] == (
        dataclasses.replace(user, display_name="Ada")
    )
    # another user's session, an expired one, and a gone one guard nothing: nothing is written
    other = SessionIsLive("s-1", "u-2", session.created_at_millis)
    expired = SessionIsLive("s-1", user.id, session.expires_at_millis)
    for guard in (other, expired):
        refused = patched_user(store, PROJECT, user.id, (("display_name", "X"),), live=guard)
        assert refused == "conflict"
    end_session(store, PROJECT, "s-1")
    gone = patched_user(store, PROJECT, user.id, (("display_name", "X"),), live=live)
    assert gone == "conflict"
    assert store.apply(LoadUser(PROJECT, user.id)) == dataclasses.replace(user, display_name="Ada")


def test_a_guarded_patch_of_a_deleted_user_is_refused_for_its_session(store: Store) -> None:
    from identity_proto.effects.commit import SessionIsLive
    from tests.contract.factories import make_session

    store.apply(add_user(PROJECT, make_user("u-1", "ada@example.com")))
    session = make_session("s-1", "u-1")
    put_session(store, PROJECT, session)
    delete_user(store, PROJECT, "u-1")
    guard = SessionIsLive("s-1", "u-1", session.created_at_millis)
    assert patched_user(store, PROJECT, "u-1", (), live=guard) == "conflict"


# --- the commit's pieces a PATCH uses: Exists, and a record returned by reference -------------------------------


def test_exists_holds_only_for_a_stored_record_and_a_reference_returns_what_it_names(store: Store) -> None:
    from identity_proto.changes import UserChanges
    from identity_proto.effects import Exists
    from identity_proto.effects.commit import Commit, Committed, Conflict, PatchUser, RecordKind, ReferencedBy
    from tests.contract.factories import make_team

    user = make_user("u-1", "ada@example.com")
    store.apply(add_user(PROJECT, user))
    team = make_team("team-1")
    create_team(store, PROJECT, team)
    selected = ReferencedBy(RecordKind.TEAM, (RecordKind.USER, "u-1"), "selected_team_id")
    missing = Commit(PROJECT, (Exists(RecordKind.USER, "nobody"),), (PatchUser("nobody", UserChanges.of()),))
    assert store.apply(missing) == Conflict(0)
    assert store.apply(Commit(PROJECT, (Exists(RecordKind.TEAM, "u-1"),))) == Conflict(0)  # ids are per kind
    none_yet = store.apply(Commit(PROJECT, (Exists(RecordKind.USER, "u-1"),), returns=(selected,)))
    assert none_yet == Committed((None,))
    select = PatchUser("u-1", UserChanges.of(selected_team_id="team-1", display_name="Ada"))
    answer = store.apply(
        Commit(PROJECT, (Exists(RecordKind.USER, "u-1"),), (select,), returns=((RecordKind.USER, "u-1"), selected))
    )
    assert answer == Committed((dataclasses.replace(user, selected_team_id="team-1", display_name="Ada"), team))
    gone = store.apply(
        Commit(PROJECT, returns=(ReferencedBy(RecordKind.TEAM, (RecordKind.USER, "nobody"), "selected_team_id"),))
    )
    assert gone == Committed((None,))
