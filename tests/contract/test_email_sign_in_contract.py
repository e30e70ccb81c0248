"""Signing in with a code sent to an e-mail address, over every store: `store_sign_in_code` (store the code unless
the address cannot sign in) and the core's `sign_in_by_email` (sign in whoever holds the address, or sign them up with
their personal team: a read, then one `Commit`, re-run on a conflict as the sign-in flow does), with their refusals
leaving no usable code and writing nothing else, concurrent sign-ups of one address making one user, and the TTLs of
what they store on Redis."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from backends.redis import GRACE_MS, RedisStore
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    AddressHolder,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
    ListMemberships,
    ListSessions,
    ListTeams,
    ListUsers,
    LoadSession,
    LoadUser,
    LoadUserWithTeam,
    UseRefreshToken,
    find_user_by_email,
    perform,
)
from identity_proto.effects.base import Flow
from identity_proto.flows.otp import store_sign_in_code
from identity_proto.records import CodePurpose, Session, Team, User, VerificationCode
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_user,
    in_threads,
    make_code,
    make_membership,
    make_session,
    make_team,
    make_user,
    put_code,
    remove_user_behind_the_stores_back,
    rich_user,
    sign_in_by_email,
)

EMAIL = "ada@example.com"
NOW = T0 + 5_000


def sign_in_code(name: str = "c1", email: str = EMAIL) -> VerificationCode:
    return make_code(name, email=email)


def code_is_stored(store: Store, code: VerificationCode, project_id: str = PROJECT) -> bool:
    """Whether `code` is there (a non-consuming attempt; it counts one attempt on the nonce)."""
    found = store.apply(
        AttemptVerificationCode(project_id, code.code_hash, code.nonce_hash, code.purpose, T0, consume=False)
    )
    return found.outcome is CodeOutcome.OK and found.code == code


def verified_user(user_id: str = "ada", email: str = EMAIL, **fields: Any) -> User:
    """A user whose auth e-mail is verified (signed up and last active at T0 unless `fields` say otherwise)."""
    return dataclasses.replace(make_user(user_id, email, primary_email_verified=True), **fields)


def newcomer_user(user_id: str = "new", email: str = EMAIL, **fields: Any) -> User:
    """The user a sign-up with `email` would create."""
    values: dict[str, Any] = {
        "signed_up_at_millis": NOW,
        "last_active_at_millis": NOW,
        "primary_email_verified": True,
        "otp_auth_enabled": True,
    }
    return dataclasses.replace(make_user(user_id, email), **(values | fields))


def session_template(session_id: str = "s1") -> Session:
    """A session whose user the store fills in."""
    return make_session(session_id, "", created_at=NOW)


def sign_in_flow(
    *,
    email: str = EMAIL,
    new_user: User | None = None,
    session: Session | None = None,
    sign_up_enabled: bool = True,
    personal_team: tuple[Team, Any] | None = None,
    project_id: str = PROJECT,
) -> Flow[EmailSignIn]:
    """The end of a code sign-in as the flow runs it (`factories.sign_in_by_email`), with these records."""
    return sign_in_by_email(
        project_id,
        email,
        NOW,
        sign_up_enabled,
        new_user if new_user is not None else newcomer_user(email=email),
        session if session is not None else session_template(),
        personal_team,
    )


def sign_in(store: Store, **given: Any) -> EmailSignIn:
    """`sign_in_flow` run on `store`."""
    return run(sign_in_flow(**given), store)


def nothing_stored_for_the_session(store: Store, session: Session) -> None:
    assert store.apply(LoadSession(PROJECT, session.id)) is None
    assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, NOW)) is None


# --------------------------------------------------------------------------------------------------------------
# Storing a sign-in code (`store_sign_in_code`: its commit and the read of its address's holder, together)


def test_a_code_for_a_free_address_is_stored_when_sign_up_is_enabled(store: Store) -> None:
    code = sign_in_code()
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store) is None
    assert code_is_stored(store, code)


def test_a_code_for_a_free_address_is_refused_when_sign_up_is_disabled(store: Store) -> None:
    code = sign_in_code()
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=False), store) is EmailRefusal.SIGN_UP_DISABLED
    assert not code_is_stored(store, code)


def test_a_code_for_a_verified_users_address_is_stored_even_without_sign_up(store: Store) -> None:
    store.apply(add_user(PROJECT, verified_user()))
    code = sign_in_code()
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=False), store) is None
    assert code_is_stored(store, code)


def test_a_code_for_an_unverified_users_address_is_refused(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada", EMAIL)))
    code = sign_in_code()
    for sign_up_enabled in (True, False):
        assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=sign_up_enabled), store) is (
            EmailRefusal.UNVERIFIED
        )
    assert not code_is_stored(store, code)


def test_an_address_that_is_no_auth_email_and_a_dangling_index_entry_count_as_free(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("quiet", EMAIL, auth=False)))  # unverified, but not an auth e-mail
    store.apply(add_user(PROJECT, make_user("gone", "gone@example.com")))
    remove_user_behind_the_stores_back(store, PROJECT, "gone")
    for name, email in (("c-quiet", EMAIL), ("c-gone", "gone@example.com")):
        code = sign_in_code(name, email)
        assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=False), store) is EmailRefusal.SIGN_UP_DISABLED
        assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store) is None
        assert code_is_stored(store, code)


def test_a_sign_in_code_looks_at_its_own_project_only(store: Store) -> None:
    store.apply(add_user(OTHER_PROJECT, make_user("ada", EMAIL)))  # unverified, elsewhere
    code = sign_in_code()
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store) is None
    assert code_is_stored(store, code)
    assert not code_is_stored(store, code, OTHER_PROJECT)


def test_a_sign_in_code_must_name_its_address_and_be_one() -> None:
    with pytest.raises(ValueError, match="address"):
        next(store_sign_in_code(PROJECT, make_code("c1"), sign_up_enabled=True))
    with pytest.raises(ValueError, match="purpose"):
        next(store_sign_in_code(PROJECT, make_code("c1", purpose=CodePurpose.MFA, email=EMAIL), sign_up_enabled=True))


def test_redis_a_sign_in_code_and_its_nonce_expire_a_grace_period_after_the_code(redis_store: RedisStore) -> None:
    now = int(time.time() * 1000)
    code = make_code("c1", created_at=now, lifetime_ms=60_000, email=EMAIL)
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), redis_store) is None
    for key in (redis_store.keys.code(PROJECT, code.code_hash), redis_store.keys.nonce(PROJECT, code.nonce_hash)):
        expected = 60_000 + GRACE_MS
        assert expected - 2_000 <= int(redis_store.client.pttl(key)) <= expected


# --------------------------------------------------------------------------------------------------------------
# Presenting a sign-in code reads who holds its address in the same step


def present(store: Store, code: VerificationCode, *, consume: bool = True) -> Any:
    return store.apply(
        AttemptVerificationCode(
            PROJECT, code.code_hash, code.nonce_hash, code.purpose, NOW, consume=consume, with_holder=True
        )
    )


def test_a_presented_code_reads_the_holder_of_its_address(store: Store) -> None:
    ada = verified_user()
    store.apply(add_user(PROJECT, ada))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    for name, email, expected in (
        ("c-ada", EMAIL, AddressHolder("ada", ada)),
        ("c-free", "free@example.com", AddressHolder(None, None)),
    ):
        code = sign_in_code(name, email)
        store.apply(put_code(PROJECT, code))
        assert present(store, code) == CodeAttempt(CodeOutcome.OK, code, expected)
        # A refused attempt (here: used) reads nobody.
        assert present(store, code) == CodeAttempt(CodeOutcome.ALREADY_USED, dataclasses.replace(code, used=True))


def test_a_presented_code_reads_a_dangling_entry_as_its_id_and_nobody(store: Store) -> None:
    store.apply(add_user(PROJECT, verified_user("gone")))
    remove_user_behind_the_stores_back(store, PROJECT, "gone")
    code = sign_in_code()
    store.apply(put_code(PROJECT, code))
    assert present(store, code, consume=False) == CodeAttempt(CodeOutcome.OK, code, AddressHolder("gone", None))
    # Without asking, the holder is not read.
    plain = AttemptVerificationCode(PROJECT, code.code_hash, code.nonce_hash, code.purpose, NOW, consume=False)
    assert store.apply(plain) == CodeAttempt(CodeOutcome.OK, code)


# --------------------------------------------------------------------------------------------------------------
# The end of a code sign-in: an existing user


def test_a_verified_user_is_signed_in_marked_as_an_otp_user_and_touched(store: Store) -> None:
    ada = verified_user(last_active_at_millis=T0)
    store.apply(add_user(PROJECT, ada))
    session = session_template()

    result = sign_in(store, session=session)

    touched = dataclasses.replace(ada, otp_auth_enabled=True, last_active_at_millis=NOW)
    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_IN, touched)
    assert store.apply(LoadUser(PROJECT, ada.id)) == touched
    theirs = dataclasses.replace(session, user_id=ada.id)
    assert store.apply(LoadSession(PROJECT, session.id)) == theirs
    assert store.apply(ListSessions(PROJECT, ada.id)) == (theirs,)
    used = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, NOW + 1))
    assert used is not None
    assert used[1].id == ada.id
    assert store.apply(ListUsers(PROJECT)) == (store.apply(LoadUser(PROJECT, ada.id)),)  # nobody was created


def test_signing_in_never_moves_last_activity_back(store: Store) -> None:
    ada = verified_user(last_active_at_millis=NOW + 60_000, otp_auth_enabled=True)
    store.apply(add_user(PROJECT, ada))
    assert sign_in(store) == EmailSignIn(EmailSignInOutcome.SIGNED_IN, ada)
    assert store.apply(LoadUser(PROJECT, ada.id)) == ada


def test_a_user_with_a_second_factor_is_marked_but_gets_no_session(store: Store) -> None:
    ada = verified_user(totp_secret_base64="SGVsbG8gVE9UUCBzZWNyZXQ=", last_active_at_millis=T0)
    store.apply(add_user(PROJECT, ada))
    session = session_template()

    result = sign_in(store, session=session)

    marked = dataclasses.replace(ada, otp_auth_enabled=True)  # last activity waits for the second factor
    assert result == EmailSignIn(EmailSignInOutcome.MFA_REQUIRED, marked)
    assert store.apply(LoadUser(PROJECT, ada.id)) == marked
    nothing_stored_for_the_session(store, session)
    assert store.apply(ListSessions(PROJECT, ada.id)) == ()


@pytest.mark.parametrize("sign_up_enabled", [True, False])
def test_an_unverified_user_is_refused_and_nothing_is_written(store: Store, sign_up_enabled: bool) -> None:
    ada = make_user("ada", EMAIL)
    store.apply(add_user(PROJECT, ada))
    session = session_template()

    result = sign_in(store, session=session, sign_up_enabled=sign_up_enabled)

    assert result == EmailSignIn(EmailSignInOutcome.UNVERIFIED, ada)
    assert store.apply(LoadUser(PROJECT, ada.id)) == ada
    assert store.apply(ListUsers(PROJECT)) == (ada,)
    nothing_stored_for_the_session(store, session)


# --------------------------------------------------------------------------------------------------------------
# The end of a code sign-in: nobody holds the address


def test_with_sign_up_disabled_nobody_is_created(store: Store) -> None:
    session = session_template()
    result = sign_in(store, session=session, sign_up_enabled=False)
    assert result == EmailSignIn(EmailSignInOutcome.SIGN_UP_DISABLED)
    assert store.apply(ListUsers(PROJECT)) == ()
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    nothing_stored_for_the_session(store, session)


def test_a_new_user_is_created_with_every_field_indexed_and_signed_in(store: Store) -> None:
    # Every field away from its default (but a second factor: a newcomer has none, and no team yet).
    user = dataclasses.replace(rich_user(), totp_secret_base64=None, selected_team_id=None, primary_email=EMAIL)
    session = session_template()

    result = sign_in(store, new_user=user, session=session)

    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_UP, user)
    assert store.apply(LoadUser(PROJECT, user.id)) == user
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == user
    assert store.apply(ListUsers(PROJECT)) == (user,)
    assert store.apply(ListSessions(PROJECT, user.id)) == (dataclasses.replace(session, user_id=user.id),)
    # Once signed up, the next sign-in finds them (and creates no one).
    again = sign_in(store, new_user=newcomer_user("someone-else"), session=session_template("s2"))
    assert again.outcome is EmailSignInOutcome.SIGNED_IN
    assert again.user is not None
    assert again.user.id == user.id
    assert [u.id for u in store.apply(ListUsers(PROJECT))] == [user.id]


def test_a_new_user_gets_their_personal_team_selected(store: Store) -> None:
    team = make_team("team-new", created_at=NOW)
    creator = make_membership(team.id, "new", created_at=NOW, permissions=("$read_members", "team_admin"))
    user = newcomer_user(selected_team_id=team.id)

    result = sign_in(store, new_user=user, personal_team=(team, creator))

    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_UP, user)
    assert store.apply(LoadUserWithTeam(PROJECT, user.id)) == (user, team)
    assert store.apply(ListTeams(PROJECT, user_id=user.id)) == (team,)
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == (creator,)


def test_an_existing_user_gets_no_personal_team(store: Store) -> None:
    ada = verified_user(otp_auth_enabled=True, last_active_at_millis=NOW)
    store.apply(add_user(PROJECT, ada))
    team = make_team("team-new", created_at=NOW)
    creator = make_membership(team.id, "new", created_at=NOW)
    result = sign_in(store, new_user=newcomer_user(selected_team_id=team.id), personal_team=(team, creator))
    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_IN, ada)
    assert store.apply(ListTeams(PROJECT)) == ()
    assert store.apply(ListMemberships(PROJECT)) == ()


def test_a_dangling_index_entry_counts_as_nobody(store: Store) -> None:
    store.apply(add_user(PROJECT, verified_user("gone")))
    remove_user_behind_the_stores_back(store, PROJECT, "gone")
    result = sign_in(store)
    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_UP, newcomer_user())
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == newcomer_user()


def test_a_new_users_id_taken_writes_nothing(store: Store) -> None:
    holder = verified_user("new", "other@example.com")
    store.apply(add_user(PROJECT, holder))
    session = session_template()
    assert sign_in(store, new_user=newcomer_user("new"), session=session) == EmailSignIn(EmailSignInOutcome.ID_TAKEN)
    assert store.apply(ListUsers(PROJECT)) == (holder,)
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    nothing_stored_for_the_session(store, session)


def test_signing_in_looks_at_its_own_project_only(store: Store) -> None:
    store.apply(add_user(OTHER_PROJECT, verified_user("elsewhere")))
    result = sign_in(store)
    assert result == EmailSignIn(EmailSignInOutcome.SIGNED_UP, newcomer_user())
    assert [u.id for u in store.apply(ListUsers(OTHER_PROJECT))] == ["elsewhere"]
    assert store.apply(ListSessions(OTHER_PROJECT, "elsewhere")) == ()


def test_concurrent_sign_ups_of_one_address_make_one_user(store: Store) -> None:
    def worker(n: int) -> EmailSignIn:
        return sign_in(store, new_user=newcomer_user(f"new-{n}"), session=session_template(f"s-{n}"))

    results = in_threads(*(lambda n=n: worker(n) for n in range(12)))

    outcomes = sorted(result.outcome.value for result in results)
    assert outcomes == ["signed_in"] * 11 + ["signed_up"]
    users = store.apply(ListUsers(PROJECT))
    assert len(users) == 1
    assert {result.user.id for result in results if result.user is not None} == {users[0].id}
    assert len(store.apply(ListSessions(PROJECT, users[0].id))) == 12


def test_the_sign_in_checks_what_it_is_given(store: Store) -> None:
    with pytest.raises(ValueError, match="auth e-mail"):
        sign_in(store, new_user=newcomer_user(email="someone@example.com"))
    with pytest.raises(ValueError, match="auth e-mail"):
        sign_in(store, new_user=dataclasses.replace(newcomer_user(), primary_email_auth_enabled=False))
    team = make_team("t1")
    with pytest.raises(ValueError, match="selected"):
        sign_in(store, personal_team=(team, make_membership(team.id, "new")))
    assert store.apply(ListUsers(PROJECT)) == ()


def test_redis_the_session_of_a_sign_in_expires_a_grace_period_after_it(redis_store: RedisStore) -> None:
    now = int(time.time() * 1000)
    session = make_session("s1", "", created_at=now, lifetime_ms=60_000)
    result = sign_in(redis_store, session=session)
    assert result.outcome is EmailSignInOutcome.SIGNED_UP
    keys = redis_store.keys
    for key in (
        keys.session(PROJECT, session.id),
        keys.session_by_token(PROJECT, session.refresh_token_hash),
        keys.user_sessions(PROJECT, "new"),
    ):
        expected = 60_000 + GRACE_MS
        assert expected - 2_000 <= int(redis_store.client.pttl(key)) <= expected
    assert redis_store.client.pttl(keys.user(PROJECT, "new")) == -1  # users never expire


def test_async_sign_in_by_email_through_arun(async_store: AsyncBackend) -> None:
    code = sign_in_code()

    async def scenario(store: Any) -> list[Any]:
        return [
            await arun(store_sign_in_code(PROJECT, code, sign_up_enabled=False), store),
            await arun(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store),
            await arun(sign_in_flow(), store),
            await arun(sign_in_flow(new_user=newcomer_user("other"), session=session_template("s2")), store),
            await arun(perform(find_user_by_email(PROJECT, EMAIL)), store),
        ]

    user = newcomer_user()
    assert async_store.run(scenario) == [
        EmailRefusal.SIGN_UP_DISABLED,
        None,
        EmailSignIn(EmailSignInOutcome.SIGNED_UP, user),
        EmailSignIn(EmailSignInOutcome.SIGNED_IN, user),
        user,
    ]
