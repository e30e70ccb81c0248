"""The team invitation contract (LoadTeamInvitation, ListTeamInvitations, and the core's commits that store, revoke
and accept one: `store_invitation`, `drop_invitation`, `accept_code`) over every store; key layout, TTLs and slots
on the Redis stores."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from redis.crc import key_slot

from backends.redis import GRACE_MS, RedisStore
from identity_proto.drivers import Store, arun
from identity_proto.effects import (
    AttemptVerificationCode,
    CodeOutcome,
    InvitationAcceptance,
    ListEvents,
    ListMemberships,
    ListTeamInvitations,
    ListTeams,
    LoadMembership,
    LoadTeamInvitation,
    perform,
)
from identity_proto.effects.commit import Committed
from identity_proto.flows.team_invitations import accept_code, drop_invitation, store_invitation
from identity_proto.flows.teams import store_team
from identity_proto.records import CodePurpose, Membership, VerificationCode
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    CODE_LIFETIME_MS,
    OTHER_PROJECT,
    PROJECT,
    T0,
    accept_invitation,
    add_membership,
    add_user,
    create_invitation,
    create_team,
    delete_team,
    in_threads,
    make_code,
    make_membership,
    make_team,
    make_user,
    put_code,
    revoke_invitation,
    subscribe,
)

NOW = T0 + 1_000  # while an invitation made by `invitation` is open


def invitation(name: str, team_id: str = "team-1", email: str = "ada@example.com", **fields: Any) -> VerificationCode:
    """An invitation whose id and hashes derive from `name`."""
    return make_code(
        name, purpose=CodePurpose.TEAM_INVITATION, id=f"inv-{name}", team_id=team_id, email=email, **fields
    )


def member(user_id: str = "bob", team_id: str = "team-1") -> Membership:
    return make_membership(team_id, user_id, created_at=NOW, permissions=("team_member",))


def _setup(store: Store, project_id: str = PROJECT, teams: tuple[str, ...] = ("team-1",)) -> None:
    for team_id in teams:
        assert create_team(store, project_id, make_team(team_id)) == make_team(team_id)
    for user_id in ("ada", "bob"):
        assert store.apply(add_user(project_id, make_user(user_id))) == Committed((make_user(user_id),))


def accept(
    store: Store, code: VerificationCode, membership: Membership | None = None, now_ms: int = NOW
) -> InvitationAcceptance:
    """Accept `code` as a flow that read it (the core's `accept_code`)."""
    return accept_invitation(store, PROJECT, code, now_ms, membership or member())  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------------------------
# Create, load, list


def test_an_invitation_is_stored_as_a_code_found_by_id_and_listed_by_team_and_address(store: Store) -> None:
    _setup(store, teams=("team-1", "team-2"))
    first, second = invitation("a"), invitation("b", created_at=T0 + 1, email="bob@example.com")
    other_team = invitation("c", team_id="team-2")
    for code in (first, second, other_team):
        assert create_invitation(store, PROJECT, code) is True
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) == first
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-nope")) is None
    assert store.apply(ListTeamInvitations(PROJECT, team_id="team-1")) == (first, second)
    assert store.apply(ListTeamInvitations(PROJECT, team_id="team-2")) == (other_team,)
    assert store.apply(ListTeamInvitations(PROJECT, team_id="team-3")) == ()
    assert store.apply(ListTeamInvitations(PROJECT, emails=("ada@example.com",))) == (first, other_team)
    # Oldest first, ties by id.
    assert store.apply(ListTeamInvitations(PROJECT, emails=("bob@example.com", "ada@example.com"))) == (
        first,
        other_team,
        second,
    )
    assert store.apply(ListTeamInvitations(PROJECT, emails=())) == ()
    # Another project sees none of them.
    assert store.apply(LoadTeamInvitation(OTHER_PROJECT, "inv-a")) is None
    assert store.apply(ListTeamInvitations(OTHER_PROJECT, team_id="team-1")) == ()


def test_the_invitation_code_is_an_ordinary_code_of_its_own_purpose(store: Store) -> None:
    _setup(store)
    code = invitation("a")
    create_invitation(store, PROJECT, code)

    def attempt(purpose: CodePurpose) -> AttemptVerificationCode:
        return AttemptVerificationCode(PROJECT, code.code_hash, code.nonce_hash, purpose, NOW, consume=False)

    assert store.apply(attempt(CodePurpose.SIGN_IN)).outcome is CodeOutcome.NOT_FOUND
    checked = store.apply(attempt(CodePurpose.TEAM_INVITATION))
    assert (checked.outcome, checked.code) == (CodeOutcome.OK, code)


def test_an_invitation_to_a_missing_team_is_not_stored(store: Store) -> None:
    _setup(store)
    code = invitation("a", team_id="team-gone")
    assert create_invitation(store, PROJECT, code) is False
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) is None
    assert store.apply(ListTeamInvitations(PROJECT, emails=("ada@example.com",))) == ()
    attempt = AttemptVerificationCode(PROJECT, code.code_hash, code.nonce_hash, code.purpose, NOW, consume=False)
    assert store.apply(attempt).outcome is CodeOutcome.NOT_FOUND


def test_other_codes_are_neither_loaded_nor_listed_as_invitations(store: Store) -> None:
    _setup(store)
    sign_in = make_code("s", email="ada@example.com")
    store.apply(put_code(PROJECT, sign_in))
    assert store.apply(ListTeamInvitations(PROJECT, emails=("ada@example.com",))) == ()


# --------------------------------------------------------------------------------------------------------------
# Revoke


def test_revoking_deletes_the_invitation_of_that_team_only(store: Store) -> None:
    _setup(store, teams=("team-1", "team-2"))
    code = invitation("a")
    create_invitation(store, PROJECT, code)
    assert revoke_invitation(store, PROJECT, "inv-a", "team-2") is False
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) == code
    assert revoke_invitation(store, PROJECT, "inv-a", "team-1") is True
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) is None
    assert store.apply(ListTeamInvitations(PROJECT, team_id="team-1")) == ()
    assert store.apply(ListTeamInvitations(PROJECT, emails=("ada@example.com",))) == ()
    assert accept(store, code) is InvitationAcceptance.NOT_FOUND
    assert revoke_invitation(store, PROJECT, "inv-a", "team-1") is False


# --------------------------------------------------------------------------------------------------------------
# Accept


def test_accepting_marks_it_used_and_adds_the_membership(store: Store) -> None:
    _setup(store)
    code = invitation("a")
    create_invitation(store, PROJECT, code)
    assert accept(store, code) is InvitationAcceptance.ACCEPTED
    assert store.apply(LoadMembership(PROJECT, "team-1", "bob")) == member()
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) == dataclasses.replace(code, used=True)
    assert accept(store, code) is InvitationAcceptance.ALREADY_USED


def test_accepting_as_a_member_uses_it_and_leaves_the_membership_as_it_was(store: Store) -> None:
    _setup(store)
    admin = make_membership("team-1", "bob", permissions=("team_admin",))
    add_membership(store, PROJECT, admin)
    code = invitation("a")
    create_invitation(store, PROJECT, code)
    assert accept(store, code) is InvitationAcceptance.ALREADY_MEMBER
    assert store.apply(LoadMembership(PROJECT, "team-1", "bob")) == admin
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) == dataclasses.replace(code, used=True)


def test_an_accept_that_fails_writes_nothing(store: Store) -> None:
    _setup(store, teams=("team-1", "team-2"))
    code = invitation("a")
    create_invitation(store, PROJECT, code)
    unknown = dataclasses.replace(code, code_hash="code-unknown")
    assert accept(store, unknown) is InvitationAcceptance.NOT_FOUND
    assert accept(store, code, member(team_id="team-2")) is InvitationAcceptance.NOT_FOUND
    assert accept(store, code, now_ms=T0 + CODE_LIFETIME_MS) is InvitationAcceptance.EXPIRED
    assert accept(store, code, member(user_id="nobody")) is InvitationAcceptance.USER_NOT_FOUND
    assert delete_team(store, PROJECT, "team-1") is True
    assert accept(store, code) is InvitationAcceptance.TEAM_NOT_FOUND
    assert store.apply(LoadTeamInvitation(PROJECT, "inv-a")) == code  # still unused
    assert store.apply(LoadMembership(PROJECT, "team-1", "bob")) is None
    assert store.apply(LoadMembership(PROJECT, "team-2", "bob")) is None


def test_a_sign_in_code_is_never_accepted_as_an_invitation(store: Store) -> None:
    _setup(store)
    sign_in = make_code("s", email="ada@example.com", team_id="team-1")
    store.apply(put_code(PROJECT, sign_in))
    assert accept(store, sign_in) is InvitationAcceptance.NOT_FOUND
    assert store.apply(LoadMembership(PROJECT, "team-1", "bob")) is None


def test_of_concurrent_accepts_of_one_invitation_exactly_one_succeeds(store: Store) -> None:
    _setup(store)
    for n in range(8):
        store.apply(add_user(PROJECT, make_user(f"u{n}")))
    code = invitation("a")
    create_invitation(store, PROJECT, code)
    results = in_threads(*[lambda n=n: accept(store, code, member(user_id=f"u{n}")) for n in range(8)])
    assert sorted(r.value for r in results) == ["accepted"] + ["already_used"] * 7
    winners = [n for n in range(8) if store.apply(LoadMembership(PROJECT, "team-1", f"u{n}")) is not None]
    assert len(winners) == 1


def test_of_concurrent_accepts_of_invitations_to_one_team_by_one_user_one_adds_the_membership(store: Store) -> None:
    _setup(store)
    codes = [invitation(f"a{n}") for n in range(6)]
    for code in codes:
        create_invitation(store, PROJECT, code)
    subscribe(store, PROJECT)  # events are recorded only for a project with a webhook endpoint
    before = len(store.apply(ListEvents(PROJECT)))
    results = in_threads(*[lambda code=code: accept(store, code) for code in codes])
    # One added it; the others found it there (a membership that appeared after their read re-ran them).
    assert sorted(r.value for r in results) == ["accepted"] + ["already_member"] * 5
    assert store.apply(ListMemberships(PROJECT, team_id="team-1")) == (member(),)
    assert store.apply(ListTeams(PROJECT, "bob")) == (make_team("team-1"),)
    assert all(store.apply(LoadTeamInvitation(PROJECT, code.id or "")).used for code in codes)
    created = [event.type for event in store.apply(ListEvents(PROJECT))[before:]]
    assert created == ["team_membership.created", "team_permission.created"]


def test_async_invitations_through_arun(async_store: AsyncBackend) -> None:
    code = invitation("a")

    async def scenario(store: Any) -> list[Any]:
        async def apply(effect: Any) -> Any:
            return await arun(perform(effect), store)

        await arun(store_team(PROJECT, make_team("team-1")), store)
        await apply(add_user(PROJECT, make_user("bob")))

        async def accepted() -> Any:
            member_now = await apply(LoadMembership(PROJECT, "team-1", "bob"))
            return await arun(accept_code(PROJECT, code, NOW, member(), member_now), store)

        async def revoked() -> Any:
            read = await apply(LoadTeamInvitation(PROJECT, "inv-a"))
            return await arun(drop_invitation(PROJECT, "team-1", read), store)

        return [
            await arun(store_invitation(PROJECT, code), store),
            await apply(ListTeamInvitations(PROJECT, team_id="team-1")),
            await accepted(),
            await apply(LoadTeamInvitation(PROJECT, "inv-a")),
            await revoked(),
        ]

    assert async_store.run(scenario) == [
        True,
        (code,),
        InvitationAcceptance.ACCEPTED,
        dataclasses.replace(code, used=True),
        True,
    ]


# --------------------------------------------------------------------------------------------------------------
# Redis: keys, TTLs, slots


def test_redis_keys_of_an_invitation_share_the_project_slot_and_expire_with_the_code(redis_store: RedisStore) -> None:
    store, client = redis_store, redis_store.client
    now = int(time.time() * 1000)
    create_team(store, PROJECT, make_team("team-1"))
    code = invitation("a", created_at=now)
    assert create_invitation(store, PROJECT, code) is True
    prefix = store.keys.prefix(PROJECT)
    names = {
        f"{prefix}code:{code.code_hash}",
        f"{prefix}invitation:inv-a",
        f"{prefix}team-invitations:team-1",
        f"{prefix}invitations-to:ada@example.com",
    }
    for name in names:
        assert key_slot(name.encode()) == key_slot(f"{{p:{PROJECT}}}".encode())
        ttl = client.pttl(name)
        assert code.expires_at_millis + GRACE_MS - now - 60_000 < ttl <= code.expires_at_millis + GRACE_MS - now
    assert client.get(f"{prefix}invitation:inv-a") == code.code_hash.encode()
    assert client.zrange(f"{prefix}team-invitations:team-1", 0, -1, withscores=True) == [
        (b"inv-a", float(code.expires_at_millis))
    ]
    assert revoke_invitation(store, PROJECT, "inv-a", "team-1") is True
    assert [name for name in names if client.exists(name)] == []


def test_redis_index_entries_gone_past_their_grace_are_dropped_by_the_next_invitation(redis_store: RedisStore) -> None:
    store, client = redis_store, redis_store.client
    create_team(store, PROJECT, make_team("team-1"))
    old = invitation("old")
    create_invitation(store, PROJECT, old)
    # Its keys expired by TTL (as they would GRACE_MS after expiry); only the index entries are left.
    client.delete(store.keys.code(PROJECT, old.code_hash), store.keys.invitation(PROJECT, "inv-old"))
    assert store.apply(ListTeamInvitations(PROJECT, team_id="team-1")) == ()
    later = invitation("new", created_at=old.expires_at_millis + GRACE_MS + 1)
    create_invitation(store, PROJECT, later)
    index = client.zrange(store.keys.team_invitations(PROJECT, "team-1"), 0, -1)
    assert index == [b"inv-new"]
    assert client.zrange(store.keys.invitations_to(PROJECT, "ada@example.com"), 0, -1) == [b"inv-new"]
