"""The ordered user walk and user deletion (ListUsers, the core's `drop_user`) over every store: the order index kept by
a sign-up's commit, a `PatchUser` (a PATCH, an upgrade) and a deletion, and all a deletion takes with the user."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from backends.memory import MemoryStore
from backends.redis import RedisStore
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    Commit,
    CommitConflict,
    Exists,
    FindApiKeyByHash,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListSessions,
    ListTeams,
    ListUsers,
    LoadMembership,
    LoadSession,
    LoadTeam,
    LoadUser,
    TeamWrite,
    UseRefreshToken,
    find_user_by_email,
    perform,
)
from identity_proto.effects.commit import Committed, PutSession, RecordKind, commit
from identity_proto.errors import ErrorCode
from identity_proto.flows.api_keys import store_api_key
from identity_proto.flows.contact_channels import create_channel
from identity_proto.flows.users import drop_user
from identity_proto.records import ApiKey, ApiKeyType, ContactChannel, Membership, Session, User
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_membership,
    add_user,
    create_team,
    delete_user,
    in_threads,
    make_membership,
    make_session,
    make_team,
    make_user,
    patched_user,
    put_session,
    remove_user_behind_the_stores_back,
    run_flow,
    set_user_fields,
)


def _user(user_id: str, signed_up_at: int, email: str | None = None) -> User:
    return dataclasses.replace(make_user(user_id, email), signed_up_at_millis=signed_up_at)


#: Users in their (signed_up_at_millis, id) order, with runs of equal sign-up times (ids sort the ties).
ORDERED = (
    _user("u-early", T0 - 1_000),
    _user("u-a", T0),
    _user("u-b", T0),
    _user("u-b2", T0),
    _user("u-c", T0),
    _user("a-late", T0 + 5),
    _user("z-late", T0 + 5),
    _user("m-latest", T0 + 1_000),
)
IDS = [user.id for user in ORDERED]


def _create_scrambled(store: Store, project_id: str = PROJECT) -> None:
    for index in (4, 0, 6, 2, 7, 1, 5, 3):  # neither id nor time order
        assert store.apply(add_user(project_id, ORDERED[index])) == Committed((ORDERED[index],))


def _ids(users: tuple[User, ...]) -> list[str]:
    return [user.id for user in users]


# --------------------------------------------------------------------------------------------------------------
# ListUsers: order, direction, limit, cursor


def test_list_of_an_empty_project_is_empty(store: Store) -> None:
    assert store.apply(ListUsers(PROJECT)) == ()
    assert store.apply(ListUsers(PROJECT, limit=5, descending=True)) == ()


def test_list_is_by_sign_up_time_then_id_and_returns_the_records(store: Store) -> None:
    _create_scrambled(store)

    assert store.apply(ListUsers(PROJECT)) == ORDERED
    assert store.apply(ListUsers(PROJECT, descending=True)) == tuple(reversed(ORDERED))


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_limit_takes_the_first_users(store: Store, descending: bool) -> None:
    _create_scrambled(store)
    order = IDS[::-1] if descending else IDS

    for limit in (1, 3, 8, 50):
        assert _ids(store.apply(ListUsers(PROJECT, limit=limit, descending=descending))) == order[:limit]
    assert store.apply(ListUsers(PROJECT, limit=0, descending=descending)) == ()
    assert _ids(store.apply(ListUsers(PROJECT, limit=None, descending=descending))) == order


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_the_cursor_is_inclusive_also_within_a_run_of_equal_sign_up_times(store: Store, descending: bool) -> None:
    _create_scrambled(store)
    order = IDS[::-1] if descending else IDS

    for cursor in IDS:  # first, last, and every one inside the run of equal times
        at = order.index(cursor)
        assert _ids(store.apply(ListUsers(PROJECT, cursor=cursor, descending=descending))) == order[at:]
        assert (
            _ids(store.apply(ListUsers(PROJECT, limit=2, cursor=cursor, descending=descending))) == order[at : at + 2]
        )
        assert _ids(store.apply(ListUsers(PROJECT, limit=1, cursor=cursor, descending=descending))) == [cursor]


def test_an_unknown_cursor_lists_nothing(store: Store) -> None:
    _create_scrambled(store)

    assert store.apply(ListUsers(PROJECT, cursor="nobody")) == ()
    assert store.apply(ListUsers(PROJECT, cursor="nobody", descending=True, limit=3)) == ()


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_paging_with_the_inclusive_cursor_walks_every_user_once(store: Store, descending: bool) -> None:
    _create_scrambled(store)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = _ids(store.apply(ListUsers(PROJECT, limit=3, cursor=cursor, descending=descending)))
        seen += page if cursor is None else page[1:]  # the cursor user came last on the previous page
        if len(page) < 3:
            break
        cursor = page[-1]

    assert seen == (IDS[::-1] if descending else IDS)


def test_lists_are_per_project(store: Store) -> None:
    _create_scrambled(store)
    other = _user("u-other", T0)
    store.apply(add_user(OTHER_PROJECT, other))

    assert store.apply(ListUsers(OTHER_PROJECT)) == (other,)
    assert store.apply(ListUsers(OTHER_PROJECT, cursor="u-a")) == ()
    assert "u-other" not in _ids(store.apply(ListUsers(PROJECT)))


# --------------------------------------------------------------------------------------------------------------
# ListUsers: the index follows a PatchUser and a deletion


def test_changing_the_sign_up_time_moves_the_user(store: Store) -> None:
    _create_scrambled(store)

    (moved,) = store.apply(set_user_fields(PROJECT, "u-b", (("signed_up_at_millis", T0 + 5),))).records

    assert isinstance(moved, User)
    expected = ["u-early", "u-a", "u-b2", "u-c", "a-late", "u-b", "z-late", "m-latest"]
    assert _ids(store.apply(ListUsers(PROJECT))) == expected
    assert _ids(store.apply(ListUsers(PROJECT, descending=True))) == expected[::-1]
    assert _ids(store.apply(ListUsers(PROJECT, cursor="u-b", limit=2))) == ["u-b", "z-late"]
    assert _ids(store.apply(ListUsers(PROJECT, cursor="u-b", limit=2, descending=True))) == ["u-b", "a-late"]
    assert store.apply(ListUsers(PROJECT, cursor="u-b", limit=1)) == (moved,)
    # and to the very front
    store.apply(set_user_fields(PROJECT, "u-b", (("signed_up_at_millis", 0),)))
    assert _ids(store.apply(ListUsers(PROJECT, limit=2))) == ["u-b", "u-early"]


def test_updates_of_other_fields_keep_the_place(store: Store) -> None:
    _create_scrambled(store)

    store.apply(set_user_fields(PROJECT, "u-b", (("display_name", "B"), ("last_active_at_millis", 0))))
    store.apply(set_user_fields(PROJECT, "u-c", (("signed_up_at_millis", T0),)))  # the same time again

    assert _ids(store.apply(ListUsers(PROJECT))) == IDS


def test_a_refused_update_does_not_move_the_user(store: Store) -> None:
    taker = _user("u-taker", T0 - 5_000, "taken@example.com")
    store.apply(add_user(PROJECT, taker))
    _create_scrambled(store)

    changes = (
        ("signed_up_at_millis", T0 + 10_000),
        ("primary_email", "taken@example.com"),
        ("primary_email_auth_enabled", True),
    )
    assert patched_user(store, PROJECT, "u-a", changes) is ErrorCode.USER_EMAIL_ALREADY_EXISTS

    assert _ids(store.apply(ListUsers(PROJECT))) == ["u-taker", *IDS]


def test_deleted_users_leave_the_list(store: Store) -> None:
    _create_scrambled(store)

    assert delete_user(store, PROJECT, "u-b") is True
    assert delete_user(store, PROJECT, "m-latest") is True

    remaining = [user_id for user_id in IDS if user_id not in ("u-b", "m-latest")]
    assert _ids(store.apply(ListUsers(PROJECT))) == remaining
    assert _ids(store.apply(ListUsers(PROJECT, descending=True))) == remaining[::-1]
    assert store.apply(ListUsers(PROJECT, cursor="u-b")) == ()
    assert _ids(store.apply(ListUsers(PROJECT, cursor="u-a", limit=2))) == ["u-a", "u-b2"]
    # a new user with a deleted one's id takes the place its own sign-up time gives it
    store.apply(add_user(PROJECT, _user("u-b", T0 + 2_000)))
    assert _ids(store.apply(ListUsers(PROJECT, descending=True, limit=1))) == ["u-b"]


def test_concurrent_creates_all_land_in_the_list_in_order(store: Store) -> None:
    def create(offset: int) -> None:
        for i in range(25):
            store.apply(add_user(PROJECT, _user(f"u-{offset}-{i:02d}", T0 + i % 5)))

    in_threads(lambda: create(0), lambda: create(1))

    listed = store.apply(ListUsers(PROJECT))
    assert len(listed) == 50
    assert [(u.signed_up_at_millis, u.id) for u in listed] == sorted((u.signed_up_at_millis, u.id) for u in listed)


# --------------------------------------------------------------------------------------------------------------
# Deleting a user (the core's drop_user)


def test_delete_of_a_missing_user_is_false_and_changes_nothing(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    store.apply(add_user(PROJECT, user))

    assert delete_user(store, PROJECT, "nobody") is False
    assert delete_user(store, OTHER_PROJECT, user.id) is False

    assert store.apply(LoadUser(PROJECT, user.id)) == user
    assert store.apply(ListUsers(PROJECT)) == (user,)


def test_delete_removes_the_user_and_frees_the_address(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    store.apply(add_user(PROJECT, user))

    assert delete_user(store, PROJECT, user.id) is True
    assert delete_user(store, PROJECT, user.id) is False

    assert store.apply(LoadUser(PROJECT, user.id)) is None
    assert store.apply(find_user_by_email(PROJECT, "a@example.com")) is None
    assert store.apply(ListUsers(PROJECT)) == ()
    successor = make_user("user-2", "a@example.com")
    assert store.apply(add_user(PROJECT, successor)) == Committed((successor,))
    assert patched_user(store, PROJECT, user.id, (("display_name", "Ghost"),)) is None


def _point_address_at(store: Store, email: str, user_id: str) -> None:
    """Make the e-mail index send `email` to `user_id`, whatever the records say (data no effect writes)."""
    if isinstance(store, MemoryStore):
        store.tenant(PROJECT).email_index[email] = user_id
    elif isinstance(store, RedisStore):
        store.client.hset(store.keys.users_by_email(PROJECT), email, user_id)
    else:  # pragma: no cover - every store fixture is one of the two
        raise TypeError(type(store).__name__)


def test_delete_removes_the_address_entry_only_when_it_points_at_the_user(store: Store) -> None:
    stale = make_user("user-stale", "shared@example.com")
    owner = make_user("user-owner", "owner@example.com")
    store.apply(add_user(PROJECT, stale))
    store.apply(add_user(PROJECT, owner))
    _point_address_at(store, "shared@example.com", owner.id)

    assert delete_user(store, PROJECT, stale.id) is True

    assert store.apply(find_user_by_email(PROJECT, "shared@example.com")) == owner


def test_delete_keeps_an_address_without_auth_out_of_it(store: Store) -> None:
    contact_only = make_user("user-1", "shared@example.com", auth=False)
    signs_in = make_user("user-2", "shared@example.com")
    store.apply(add_user(PROJECT, contact_only))
    store.apply(add_user(PROJECT, signs_in))

    assert delete_user(store, PROJECT, contact_only.id) is True

    assert store.apply(find_user_by_email(PROJECT, "shared@example.com")) == signs_in


def test_delete_removes_every_session_of_the_user_only(store: Store) -> None:
    user = make_user("user-1", "a@example.com")
    other = make_user("user-2", "b@example.com")
    store.apply(add_user(PROJECT, user))
    store.apply(add_user(PROJECT, other))
    mine = [make_session(f"s-{i}", user.id, created_at=T0 + i) for i in range(3)]
    theirs = make_session("s-theirs", other.id)
    for session in (*mine, theirs):
        put_session(store, PROJECT, session)

    assert delete_user(store, PROJECT, user.id) is True

    for session in mine:
        assert store.apply(LoadSession(PROJECT, session.id)) is None
        assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is None
    assert store.apply(ListSessions(PROJECT, user.id)) == ()
    assert store.apply(ListSessions(PROJECT, other.id)) == (theirs,)
    assert store.apply(UseRefreshToken(PROJECT, theirs.refresh_token_hash, T0)) is not None
    # a user created again with that id starts without sessions
    store.apply(add_user(PROJECT, user))
    assert store.apply(ListSessions(PROJECT, user.id)) == ()


def test_delete_removes_every_membership_of_the_user_only(store: Store) -> None:
    user = make_user("user-1")
    other = make_user("user-2")
    for u in (user, other):
        store.apply(add_user(PROJECT, u))
    teams = [make_team(f"team-{i}", created_at=T0 + i) for i in range(3)]
    for team in teams:
        create_team(store, PROJECT, team)
        add_membership(store, PROJECT, make_membership(team.id, user.id))
    kept = [make_membership(team.id, other.id) for team in teams[:2]]
    for membership in kept:
        add_membership(store, PROJECT, membership)

    assert delete_user(store, PROJECT, user.id) is True

    for team in teams:
        assert store.apply(LoadMembership(PROJECT, team.id, user.id)) is None
        assert store.apply(LoadTeam(PROJECT, team.id)) == team  # teams stay
    assert store.apply(ListMemberships(PROJECT, user_id=user.id)) == ()
    assert store.apply(ListTeams(PROJECT, user.id)) == ()
    assert store.apply(ListMemberships(PROJECT)) == tuple(kept)
    assert store.apply(ListMemberships(PROJECT, team_id="team-0")) == (kept[0],)
    assert store.apply(ListMemberships(PROJECT, team_id="team-2")) == ()
    # a user created again with that id starts without memberships, and may join again
    store.apply(add_user(PROJECT, user))
    assert store.apply(ListTeams(PROJECT, user.id)) == ()
    again = make_membership("team-2", user.id)
    assert add_membership(store, PROJECT, again) == again
    assert store.apply(ListMemberships(PROJECT)) == (*kept, again)


def test_a_user_deleted_while_memberships_are_added_keeps_none(store: Store) -> None:
    user = make_user("user-1")
    store.apply(add_user(PROJECT, user))
    teams = [make_team(f"team-{i}") for i in range(10)]
    for team in teams:
        create_team(store, PROJECT, team)

    results = in_threads(
        *[lambda t=t: add_membership(store, PROJECT, make_membership(t.id, user.id)) for t in teams],
        lambda: delete_user(store, PROJECT, user.id),
    )

    assert results[-1] is True
    assert all(isinstance(r, Membership) or r is TeamWrite.USER_NOT_FOUND for r in results[:-1])
    assert store.apply(ListMemberships(PROJECT)) == ()
    assert store.apply(ListMemberships(PROJECT, user_id=user.id)) == ()
    for team in teams:
        assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == ()


# --------------------------------------------------------------------------------------------------------------
# Async


def test_async_list_and_delete_through_arun(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[Any]:
        for user in reversed(ORDERED):
            await arun(perform(add_user(PROJECT, user)), store)
        return [
            _ids(await arun(perform(ListUsers(PROJECT, limit=3, cursor="u-b")), store)),
            _ids(await arun(perform(ListUsers(PROJECT, limit=3, cursor="u-b", descending=True)), store)),
            await arun(drop_user(PROJECT, "u-b2"), store),
            await arun(drop_user(PROJECT, "u-b2"), store),
            _ids(await arun(perform(ListUsers(PROJECT, limit=3, cursor="u-b")), store)),
        ]

    assert async_store.run(scenario) == [
        ["u-b", "u-b2", "u-c"],
        ["u-b", "u-a", "u-early"],
        True,
        False,
        ["u-b", "u-c", "a-late"],
    ]


# --------------------------------------------------------------------------------------------------------------
# Redis: the order index, and what a deletion leaves behind


def _namespace_keys(store: RedisStore) -> set[str]:
    return {key.decode() for key in store.client.scan_iter(match=f"{store.keys.namespace}*")}


def test_redis_the_order_index_is_a_sorted_set_scored_by_sign_up_time(redis_store: RedisStore) -> None:
    _create_scrambled(redis_store)
    key = redis_store.keys.user_order(PROJECT)

    assert key == f"{redis_store.keys.namespace}{{p:{PROJECT}}}:user-order"
    assert redis_store.client.type(key) == b"zset"
    assert redis_store.client.zrange(key, 0, -1, withscores=True) == [
        (user.id.encode(), float(user.signed_up_at_millis)) for user in ORDERED
    ]
    redis_store.apply(set_user_fields(PROJECT, "u-a", (("signed_up_at_millis", 7),)))
    assert redis_store.client.zscore(key, "u-a") == 7.0
    delete_user(redis_store, PROJECT, "u-a")
    assert redis_store.client.zscore(key, "u-a") is None
    assert redis_store.client.zcard(key) == len(ORDERED) - 1


def test_redis_list_skips_an_index_entry_without_record_and_still_fills_the_page(redis_store: RedisStore) -> None:
    _create_scrambled(redis_store)
    remove_user_behind_the_stores_back(redis_store, PROJECT, "u-b")

    assert _ids(redis_store.apply(ListUsers(PROJECT, limit=3))) == ["u-early", "u-a", "u-b2"]
    assert _ids(redis_store.apply(ListUsers(PROJECT, limit=3, cursor="u-a"))) == ["u-a", "u-b2", "u-c"]
    assert len(redis_store.apply(ListUsers(PROJECT))) == len(ORDERED) - 1


def test_redis_delete_leaves_no_key_of_the_user(redis_store: RedisStore) -> None:
    other = make_user("user-2", "b@example.com")
    redis_store.apply(add_user(PROJECT, other))
    before = _namespace_keys(redis_store)
    user = make_user("user-1", "a@example.com")
    redis_store.apply(add_user(PROJECT, user))
    put_session(redis_store, PROJECT, make_session("s-1", user.id))
    create_team(redis_store, PROJECT, make_team("team-1"), make_membership("team-1", user.id))
    add_membership(redis_store, PROJECT, make_membership("team-1", other.id))
    team_keys = _namespace_keys(redis_store) - before
    keys = redis_store.keys

    assert delete_user(redis_store, PROJECT, user.id) is True

    left = _namespace_keys(redis_store)
    assert keys.user(PROJECT, user.id) not in left
    assert keys.user_sessions(PROJECT, user.id) not in left
    assert keys.user_teams(PROJECT, user.id) not in left
    assert keys.session(PROJECT, "s-1") not in left
    assert keys.session_by_token(PROJECT, "token-s-1") not in left
    assert keys.membership(PROJECT, 1) not in left  # the user's membership was the first one
    assert left == before | {
        keys.team(PROJECT, "team-1"),
        keys.team_order(PROJECT),
        keys.team_members(PROJECT, "team-1"),
        keys.user_teams(PROJECT, other.id),
        keys.membership(PROJECT, 2),
        keys.membership_order(PROJECT),
        keys.membership_seq(PROJECT),
    }
    assert left - before <= team_keys
    client = redis_store.client
    assert client.hgetall(keys.users_by_email(PROJECT)) == {b"b@example.com": b"user-2"}
    assert client.zrange(keys.user_order(PROJECT), 0, -1) == [b"user-2"]
    assert client.zrange(keys.team_members(PROJECT, "team-1"), 0, -1) == [b"user-2"]
    assert client.zrange(keys.membership_order(PROJECT), 0, -1) == [b"2"]


# --------------------------------------------------------------------------------------------------------------
# Deleting a user races with what points at them: decided on reads, committed with guards on what was read


class _WriteBeforeCommit:
    """A store that runs `write` (once) just before the first `Commit` it is asked to apply: a concurrent change
    landing between a flow's reads and its commit."""

    def __init__(self, store: Store, write: Any) -> None:
        self.store, self.write, self.done = store, write, False

    def apply(self, effect: Any) -> Any:
        if isinstance(effect, Commit) and not self.done:
            self.done = True
            self.write()
        return self.store.apply(effect)


def _add_session(store: Store, user_id: str) -> None:
    put_session(store, PROJECT, make_session("late", user_id))


def _add_membership(store: Store, user_id: str) -> None:
    create_team(store, PROJECT, make_team("late-team"))
    assert isinstance(add_membership(store, PROJECT, make_membership("late-team", user_id)), Membership)


def _add_channel(store: Store, user_id: str) -> None:
    late = ContactChannel("late-channel", user_id, "late@example.com", True, True, T0 + 1)
    run_flow(store, lambda: create_channel(PROJECT, late, make_primary=False, next_primary_id="next"))


def _add_api_key(store: Store, user_id: str) -> None:
    key = ApiKey("late-key", ApiKeyType.USER, user_id, "late", False, T0, "hash-of-late", "late")
    assert run_flow(store, lambda: store_api_key(PROJECT, key)) == key


@pytest.mark.parametrize("added", [_add_session, _add_membership, _add_channel, _add_api_key])
def test_a_deletion_whose_reads_miss_a_concurrent_addition_conflicts_then_takes_it(store: Store, added: Any) -> None:
    user = make_user("ada", "ada@example.com")
    store.apply(add_user(PROJECT, user))
    put_session(store, PROJECT, make_session("early", user.id))

    racing = _WriteBeforeCommit(store, lambda: added(store, user.id))
    with pytest.raises(CommitConflict):
        run(drop_user(PROJECT, user.id), racing)  # type: ignore[arg-type]

    # The conflict wrote nothing; the re-run reads the addition and takes it with the user.
    assert racing.done
    assert store.apply(LoadUser(PROJECT, user.id)) is not None
    assert store.apply(LoadSession(PROJECT, "early")) == make_session("early", user.id)
    assert store.apply(find_user_by_email(PROJECT, "ada@example.com")) is not None
    assert delete_user(store, PROJECT, user.id) is True
    assert store.apply(LoadUser(PROJECT, user.id)) is None
    assert store.apply(ListSessions(PROJECT, user.id)) == ()
    assert store.apply(LoadSession(PROJECT, "late")) is None
    assert store.apply(LoadSession(PROJECT, "early")) is None
    assert store.apply(ListMemberships(PROJECT, user_id=user.id)) == ()
    assert store.apply(ListContactChannels(PROJECT, user.id)) is None
    assert store.apply(find_user_by_email(PROJECT, "late@example.com")) is None
    assert store.apply(find_user_by_email(PROJECT, "ada@example.com")) is None
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.USER, user.id)) == ()
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-late")) is None


def test_a_user_deleted_while_sessions_are_started_keeps_none(store: Store) -> None:
    for round_ in range(3):
        user = make_user(f"signing-in-{round_}")
        store.apply(add_user(PROJECT, user))
        sessions = [make_session(f"s-{round_}-{i}", user.id) for i in range(4)]

        def start(session: Session, user_id: str = user.id) -> bool:
            # What a sign-in commits: the new session, only while its user exists.
            try:
                run(commit(PROJECT, (Exists(RecordKind.USER, user_id),), (PutSession(session),)), store)
            except CommitConflict:
                return False
            return True

        results = in_threads(
            *[lambda s=s: start(s) for s in sessions], lambda user_id=user.id: delete_user(store, PROJECT, user_id)
        )

        assert results[-1] is True
        assert store.apply(ListSessions(PROJECT, user.id)) == ()
        assert all(store.apply(LoadSession(PROJECT, s.id)) is None for s in sessions)
        assert all(store.apply(UseRefreshToken(PROJECT, s.refresh_token_hash, T0)) is None for s in sessions)
