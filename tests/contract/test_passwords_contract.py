"""The password flows' writes over every store (memory, fakeredis, a real redis-server), each the core's decision
and one `Commit`: storing a reset code (the code and its mail stored only for an address that signs a user in and
that a reset may go through), a reset (the code used, the password written, its address verified and every session
removed, together, only while the code's address and password still hold), a change (all sessions but one
removed, only over the hash the old password was checked against) and a set (only for a user without a password);
refusals write nothing, concurrent writes have exactly one winner (a concurrent change and reset: one of them),
and the code's TTLs on Redis."""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

from backends.redis import GRACE_MS, RedisStore
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    FindAuthAddressHolder,
    ListContactChannels,
    ListOutbox,
    ListSessions,
    LoadUser,
    PasswordWrite,
    UseRefreshToken,
    password_fingerprint,
    perform,
    reset_primary,
)
from identity_proto.effects.commit import Committed
from identity_proto.flows.contact_channels import create_channel
from identity_proto.flows.passwords import (
    _reset_read,
    bound_reset_code,
    change_password,
    give_password,
    reset_with_code,
)
from identity_proto.flows.passwords import store_reset_code as decide_reset_code
from identity_proto.records import (
    CodePurpose,
    ContactChannel,
    Email,
    OAuthAccount,
    Session,
    User,
    VerificationCode,
)
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_user,
    delete_user,
    in_threads,
    make_code,
    make_email,
    make_session,
    make_user,
    patched_user,
    put_code,
    put_session,
    putting_session,
    remove_user_behind_the_stores_back,
    reset_password,
    run_flow,
    set_password,
    store_reset_code,
)
from tests.contract.factories import change_password as changed

EMAIL = "ada@example.com"
OLD_HASH = "$2b$04$" + "o" * 53
NEW_HASH = "$2b$04$" + "n" * 53
OTHER_HASH = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"


def reset_code(name: str = "r1", email: str = EMAIL, **fields: Any) -> VerificationCode:
    """A reset code (by default for a user without a password)."""
    fields.setdefault("password_fingerprint", password_fingerprint(None))
    return make_code(name, purpose=CodePurpose.PASSWORD_RESET, email=email, **fields)


def reset_mail(n: int = 1, to: str = EMAIL) -> Email:
    return dataclasses.replace(make_email(n, to), subject="Reset your password at P", magic_link="http://x/?code=a")


def with_user(store: Store, user: User, *sessions: Session) -> None:
    assert isinstance(store.apply(add_user(PROJECT, user)), Committed)
    for session in sessions:
        put_session(store, PROJECT, session)


def attempt(code: VerificationCode, project_id: str = PROJECT, now_ms: int = T0) -> CodeAttempt:
    return AttemptVerificationCode(project_id, code.code_hash, code.nonce_hash, code.purpose, now_ms, consume=False)


def live(store: Store, session: Session) -> bool:
    return store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is not None


def password_of(store: Store, user_id: str) -> str | None:
    user = store.apply(LoadUser(PROJECT, user_id))
    assert user is not None
    return user.password_hash


def primary_of(store: Store, user_id: str) -> str:
    """The user's primary channel as a reset code stored now is bound to (`reset_primary`)."""
    user = store.apply(LoadUser(PROJECT, user_id))
    assert user is not None
    return reset_primary(user)


# --------------------------------------------------------------------------------------------------------------
# Storing a reset code


def test_a_code_for_a_users_sign_in_address_is_stored_as_theirs_with_its_mail(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    code, mail = reset_code(), reset_mail()
    assert store_reset_code(store, PROJECT, code, mail) == "ada"
    theirs = dataclasses.replace(code, user_id="ada", primary_channel_id=primary_of(store, "ada"))
    assert store.apply(attempt(code)) == CodeAttempt(CodeOutcome.OK, theirs)
    assert store.apply(ListOutbox(PROJECT)) == (mail,)
    assert store.apply(ListOutbox(OTHER_PROJECT)) == ()


def test_without_a_mail_only_the_code_is_stored(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    code = reset_code()
    assert store_reset_code(store, PROJECT, code) == "ada"
    assert store.apply(attempt(code)).outcome is CodeOutcome.OK
    assert store.apply(ListOutbox(PROJECT)) == ()


def test_an_address_that_signs_nobody_in_stores_nothing(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, auth=False))  # the address is hers, but does not sign her in
    with_user(store, make_user("bob", "bob@example.com"))
    remove_user_behind_the_stores_back(store, PROJECT, "bob")  # an index entry pointing at nobody
    for email in (EMAIL, "bob@example.com", "nobody@example.com"):
        code = reset_code(email, email=email)
        assert store_reset_code(store, PROJECT, code, reset_mail(to=email)) is None
        assert store.apply(attempt(code)) == CodeAttempt(CodeOutcome.NOT_FOUND)
    assert store.apply(ListOutbox(PROJECT)) == ()
    assert store_reset_code(store, OTHER_PROJECT, reset_code(), reset_mail()) is None


def test_the_outbox_keeps_the_newest_mails(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    for n in range(1, 4):
        store_reset_code(store, PROJECT, reset_code(f"r{n}"), reset_mail(n), keep=2)
    assert [m.id for m in store.apply(ListOutbox(PROJECT))] == ["mail-3", "mail-2"]


def test_the_core_takes_only_reset_codes_that_name_their_address() -> None:
    for bad in (make_code("s", email=EMAIL), reset_code(email=None)):  # type: ignore[arg-type]
        try:
            bound_reset_code(bad, None)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_the_core_takes_only_codes_bound_to_the_password_it_names() -> None:
    for code, password_hash in ((reset_code(), OLD_HASH), (reset_code(password_fingerprint=None), None)):
        try:
            bound_reset_code(code, password_hash)
        except ValueError:
            continue
        raise AssertionError(f"accepted {code}")


def test_a_code_for_a_password_that_changed_since_it_was_read_is_not_stored(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=NEW_HASH))
    stale = reset_code(password_fingerprint=password_fingerprint(OLD_HASH))
    assert store_reset_code(store, PROJECT, stale, reset_mail(), password_hash=OLD_HASH) is None
    assert store.apply(attempt(stale)) == CodeAttempt(CodeOutcome.NOT_FOUND)
    assert store.apply(ListOutbox(PROJECT)) == ()
    fresh = reset_code("r2", password_fingerprint=password_fingerprint(NEW_HASH))
    assert store_reset_code(store, PROJECT, fresh, reset_mail(), password_hash=NEW_HASH) == "ada"


# --------------------------------------------------------------------------------------------------------------
# Resetting


def stored_reset_code(store: Store, user_id: str = "ada", **fields: Any) -> VerificationCode:
    """A reset code of the user, for their password as it is now (as sending one stores it)."""
    fields.setdefault("password_fingerprint", password_fingerprint(password_of(store, user_id)))
    fields.setdefault("primary_channel_id", primary_of(store, user_id))
    code = reset_code(user_id=user_id, **fields)
    store.apply(put_code(PROJECT, code))
    return code


def reset(
    store: Store,
    code: VerificationCode,
    now_ms: int = T0,
    password_hash: str = NEW_HASH,
    project_id: str = PROJECT,
    read: Any = None,
) -> PasswordWrite:
    """The code presented, then the core's reset (`reset_password`): a `PasswordWrite`."""
    return reset_password(store, project_id, code, password_hash, now_ms, read)  # type: ignore[no-any-return]


def test_a_reset_uses_the_code_sets_the_password_and_removes_every_session(store: Store) -> None:
    s1, s2, bobs = make_session("s1", "ada"), make_session("s2", "ada"), make_session("s3", "bob")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), s1, s2)
    with_user(store, make_user("bob", "bob@example.com"), bobs)
    code = stored_reset_code(store)
    assert reset(store, code) is PasswordWrite.DONE
    assert password_of(store, "ada") == NEW_HASH
    assert store.apply(ListSessions(PROJECT, "ada")) == ()
    assert not live(store, s1)
    assert not live(store, s2)
    assert live(store, bobs)
    assert store.apply(attempt(code)).outcome is CodeOutcome.ALREADY_USED
    assert reset(store, code, password_hash=OTHER_HASH) is PasswordWrite.CODE_USED
    assert password_of(store, "ada") == NEW_HASH


def test_a_reset_creates_the_password_of_a_user_who_had_none(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    assert reset(store, stored_reset_code(store)) is PasswordWrite.DONE
    assert password_of(store, "ada") == NEW_HASH


def test_refused_resets_write_nothing(store: Store) -> None:
    session = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), session)
    sign_in = make_code("same-hash", email=EMAIL, user_id="ada")  # another purpose
    store.apply(put_code(PROJECT, sign_in))
    assert reset(store, sign_in) is PasswordWrite.CODE_NOT_FOUND
    assert reset(store, reset_code("missing")) is PasswordWrite.CODE_NOT_FOUND
    code = stored_reset_code(store)
    assert reset(store, code, project_id=OTHER_PROJECT) is PasswordWrite.CODE_NOT_FOUND
    assert reset(store, code, now_ms=code.expires_at_millis) is PasswordWrite.CODE_EXPIRED
    assert password_of(store, "ada") == OLD_HASH
    assert live(store, session)
    assert store.apply(attempt(code)).outcome is CodeOutcome.OK  # still unused
    assert store.apply(attempt(sign_in)).outcome is CodeOutcome.OK


def test_a_reset_for_a_user_who_is_gone_uses_the_code_and_writes_nothing_else(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    code = stored_reset_code(store)
    assert delete_user(store, PROJECT, "ada")
    assert reset(store, code) is PasswordWrite.USER_NOT_FOUND
    assert store.apply(LoadUser(PROJECT, "ada")) is None
    assert reset(store, code) is PasswordWrite.CODE_USED


def test_concurrent_resets_with_one_code_have_one_winner(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH))
    code = stored_reset_code(store)
    hashes = [f"$2b$04${i:02d}" + "h" * 51 for i in range(12)]
    results = in_threads(*[lambda h=h: reset(store, code, password_hash=h) for h in hashes])
    assert sorted(r.value for r in results) == ["code_used"] * 11 + ["done"]
    assert password_of(store, "ada") == hashes[results.index(PasswordWrite.DONE)]


# --------------------------------------------------------------------------------------------------------------
# Who may reset through an address; what a reset code stays bound to


def add_channel(store: Store, value: str, *, verified: bool = False, auth: bool = True, user_id: str = "ada") -> Any:
    """A server's create of a channel (the core's flow: a read, then one commit)."""
    record = ContactChannel(f"ch-{value}", user_id, value, verified, auth, T0 + 1)
    return run_flow(store, lambda: create_channel(PROJECT, record, make_primary=False, next_primary_id=f"next-{value}"))


def is_verified(store: Store, value: str, user_id: str = "ada") -> bool:
    found = store.apply(ListContactChannels(PROJECT, user_id))
    assert found is not None
    return next(c.is_verified for c in found.channels if c.value == value)


ACCOUNT = OAuthAccount("acc-1", "github", "1234", EMAIL)


def test_an_unverified_address_of_an_account_with_another_way_in_gets_no_code(store: Store) -> None:
    # Ada signs in at her verified address; an unverified auth channel of hers (someone else's mailbox, perhaps)
    # gets nothing. Cy's only way in is his unverified address: he gets a code. Dee's unverified address is not
    # her only way in (an OAuth account): nothing.
    with_user(store, make_user("ada", EMAIL, primary_email_verified=True))
    add_channel(store, "other@example.com")
    with_user(store, make_user("cy", "cy@example.com"))
    with_user(store, make_user("dee", "dee@example.com", oauth_accounts=(ACCOUNT,)))
    for email, expected in (("other@example.com", None), ("dee@example.com", None), ("cy@example.com", "cy")):
        code = reset_code(email, email=email)
        assert store_reset_code(store, PROJECT, code, reset_mail(to=email)) == expected, email
        assert (store.apply(attempt(code)).outcome is CodeOutcome.OK) is (expected is not None), email
    assert [m.to for m in store.apply(ListOutbox(PROJECT))] == ["cy@example.com"]
    assert store_reset_code(store, PROJECT, reset_code("ada"), reset_mail()) == "ada"  # verified


def test_a_verified_auth_channel_that_is_not_primary_gets_a_code(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    add_channel(store, "work@example.com", verified=True)
    code = reset_code("w", email="work@example.com")
    assert store_reset_code(store, PROJECT, code) == "ada"
    assert store_reset_code(store, PROJECT, reset_code("p")) is None  # unverified, not the only way in


def test_a_reset_verifies_the_address_it_went_to(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH))
    assert reset(store, stored_reset_code(store, email=EMAIL)) is PasswordWrite.DONE
    assert is_verified(store, EMAIL)
    with_user(store, make_user("bob", "bob@example.com", auth=False))
    add_channel(store, "bob-work@example.com", user_id="bob")
    code = stored_reset_code(store, "bob", email="bob-work@example.com")
    assert reset(store, code) is PasswordWrite.DONE
    assert is_verified(store, "bob-work@example.com", "bob")
    assert not is_verified(store, "bob@example.com", "bob")


def test_a_code_whose_password_changed_since_it_was_sent_resets_nothing(store: Store) -> None:
    session = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), session)
    code = stored_reset_code(store)
    before = run(_reset_read(PROJECT, code), store)
    assert change(store, session.refresh_token_hash) is PasswordWrite.DONE
    assert reset(store, code, read=before) is PasswordWrite.CODE_NOT_FOUND  # the hash read before the change
    assert reset(store, code) is PasswordWrite.CODE_NOT_FOUND  # the hash read after it
    assert password_of(store, "ada") == NEW_HASH
    assert live(store, session)
    assert store.apply(attempt(code)).outcome is CodeOutcome.OK  # nothing written: not used
    unbound = stored_reset_code(store, password_fingerprint=None)  # a code bound to no password at all
    assert reset(store, unbound) is PasswordWrite.CODE_NOT_FOUND


def test_a_code_whose_address_no_longer_signs_its_user_in_resets_nothing(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH, primary_email_verified=True))
    code = stored_reset_code(store)
    moved = (("primary_email", "new@example.com"), ("primary_email_verified", False))
    assert isinstance(patched_user(store, PROJECT, "ada", moved)[0], User)
    assert reset(store, code) is PasswordWrite.CODE_NOT_FOUND
    assert password_of(store, "ada") == OLD_HASH
    back, _team = patched_user(store, PROJECT, "ada", (("primary_email", EMAIL),))
    assert isinstance(back, User)  # back, unverified, and still her only way in: the code holds again
    assert reset(store, code) is PasswordWrite.DONE


def test_a_code_stored_under_another_primary_channel_resets_nothing(store: Store) -> None:
    # Bound to the primary channel it was stored under (`reset_primary`): its address may still sign her in (the
    # old primary kept as a channel, as PATCH /users keeps it), yet once another channel is primary it is dead.
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH, primary_email_verified=True))
    unbound = stored_reset_code(store, "ada", primary_channel_id=None)  # bound to no primary at all
    assert reset(store, unbound) is PasswordWrite.CODE_NOT_FOUND
    code = stored_reset_code(store, "ada", name="r2")
    assert code.primary_channel_id == primary_of(store, "ada") != ""
    moved, _team = patched_user(store, PROJECT, "ada", (("primary_email_channel_id", "another-channel"),))
    assert isinstance(moved, User)
    assert moved.primary_email == EMAIL
    assert reset(store, code) is PasswordWrite.CODE_NOT_FOUND
    assert password_of(store, "ada") == OLD_HASH
    fresh = stored_reset_code(store, "ada", name="r3")
    assert reset(store, fresh) is PasswordWrite.DONE


def test_a_code_whose_account_gained_another_way_in_resets_nothing(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH))  # unverified, her only way in
    code = stored_reset_code(store)
    add_channel(store, "other@example.com")
    assert reset(store, code) is PasswordWrite.CODE_NOT_FOUND
    assert password_of(store, "ada") == OLD_HASH
    assert not is_verified(store, EMAIL)


# --------------------------------------------------------------------------------------------------------------
# Changing


def change(store: Store, keep: str | None, old: str = OLD_HASH, user_id: str = "ada") -> PasswordWrite:
    """The core's change of a password (`change_password`): a `PasswordWrite`."""
    return changed(store, PROJECT, user_id, old, NEW_HASH, keep)  # type: ignore[no-any-return]


def test_a_change_keeps_only_the_session_of_the_given_refresh_token(store: Store) -> None:
    mine, other, bobs = make_session("s1", "ada"), make_session("s2", "ada"), make_session("s3", "bob")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), mine, other)
    with_user(store, make_user("bob", "bob@example.com"), bobs)
    assert change(store, mine.refresh_token_hash) is PasswordWrite.DONE
    assert password_of(store, "ada") == NEW_HASH
    assert store.apply(ListSessions(PROJECT, "ada")) == (mine,)
    assert live(store, mine)
    assert not live(store, other)
    assert live(store, bobs)


def test_a_change_without_a_session_to_keep_or_naming_anothers_removes_them_all(store: Store) -> None:
    s1, s2, bobs = make_session("s1", "ada"), make_session("s2", "ada"), make_session("s3", "bob")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), s1)
    with_user(store, make_user("bob", "bob@example.com"), bobs)
    assert change(store, None) is PasswordWrite.DONE
    assert not live(store, s1)
    put_session(store, PROJECT, s2)
    assert change(store, bobs.refresh_token_hash, old=NEW_HASH) is PasswordWrite.DONE
    assert not live(store, s2)
    assert live(store, bobs)
    assert store.apply(ListSessions(PROJECT, "ada")) == ()


def test_a_change_over_another_hash_or_of_nobody_writes_nothing(store: Store) -> None:
    session = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL, password_hash=OTHER_HASH), session)
    with_user(store, make_user("otto", "otto@example.com"))
    assert change(store, None) is PasswordWrite.PASSWORD_CHANGED
    assert change(store, None, user_id="otto") is PasswordWrite.PASSWORD_CHANGED  # has none
    assert change(store, None, user_id="nobody") is PasswordWrite.USER_NOT_FOUND
    assert password_of(store, "ada") == OTHER_HASH
    assert password_of(store, "otto") is None
    assert live(store, session)


def test_concurrent_changes_from_one_old_password_have_one_winner(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH))
    hashes = [f"$2b$04${i:02d}" + "c" * 51 for i in range(12)]
    results = in_threads(*[lambda h=h: changed(store, PROJECT, "ada", OLD_HASH, h) for h in hashes])
    assert sorted(r.value for r in results) == ["done"] + ["password_changed"] * 11
    assert password_of(store, "ada") == hashes[results.index(PasswordWrite.DONE)]


# --------------------------------------------------------------------------------------------------------------
# Setting


def test_set_gives_a_password_only_to_a_user_without_one_and_leaves_sessions(store: Store) -> None:
    session = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL), session)
    assert set_password(store, PROJECT, "ada", NEW_HASH) is PasswordWrite.DONE
    assert set_password(store, PROJECT, "ada", OTHER_HASH) is PasswordWrite.HAS_PASSWORD
    assert set_password(store, PROJECT, "nobody", OTHER_HASH) is PasswordWrite.USER_NOT_FOUND
    assert password_of(store, "ada") == NEW_HASH
    assert live(store, session)
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user == dataclasses.replace(make_user("ada", EMAIL), password_hash=NEW_HASH)


def test_concurrent_sets_have_one_winner(store: Store) -> None:
    with_user(store, make_user("ada", EMAIL))
    hashes = [f"$2b$04${i:02d}" + "s" * 51 for i in range(12)]
    results = in_threads(*[lambda h=h: set_password(store, PROJECT, "ada", h) for h in hashes])
    assert sorted(r.value for r in results) == ["done"] + ["has_password"] * 11
    assert password_of(store, "ada") == hashes[results.index(PasswordWrite.DONE)]


# --------------------------------------------------------------------------------------------------------------
# Async (the asyncio stores run the same plans)


def test_async_password_writes_through_arun(async_store: AsyncBackend) -> None:
    session = make_session("s1", "ada")

    async def scenario(store: Any) -> list[Any]:
        await arun(perform(add_user(PROJECT, make_user("ada", EMAIL))), store)
        code = reset_code(password_fingerprint=password_fingerprint(OTHER_HASH))
        await arun(putting_session(PROJECT, session), store)

        def store_code() -> Any:
            found = yield from perform(FindAuthAddressHolder(PROJECT, EMAIL))
            return (yield from decide_reset_code(PROJECT, code, found, reset_mail()))

        set_ = await arun(give_password(PROJECT, "ada", OLD_HASH), store)
        changed_ = await arun(change_password(PROJECT, "ada", OLD_HASH, OTHER_HASH, session.refresh_token_hash), store)
        stored = await arun(store_code(), store)
        ada = await arun(perform(LoadUser(PROJECT, "ada")), store)
        theirs = dataclasses.replace(code, user_id="ada", primary_channel_id=reset_primary(ada))
        return [
            set_,
            changed_,
            stored,
            await arun(reset_with_code(PROJECT, theirs, NEW_HASH), store),
            await arun(perform(LoadUser(PROJECT, "ada")), store),
            await arun(perform(ListSessions(PROJECT, "ada")), store),
        ]

    set_, changed, stored, reset_, user, sessions = async_store.run(scenario)
    assert (stored, set_, changed, reset_) == ("ada", PasswordWrite.DONE, PasswordWrite.DONE, PasswordWrite.DONE)
    assert user.password_hash == NEW_HASH
    assert sessions == ()


# --------------------------------------------------------------------------------------------------------------
# Redis: the code's TTLs are those of any code (wall-clock times here only)


def test_a_stored_reset_code_and_its_counter_expire_after_the_grace_period(redis_store: RedisStore) -> None:
    with_user(redis_store, make_user("ada", EMAIL))
    now = time.time_ns() // 1_000_000
    code = reset_code("ttl", created_at=now)
    assert store_reset_code(redis_store, PROJECT, code) == "ada"
    keys = redis_store.keys
    expected = code.expires_at_millis + GRACE_MS - now
    for key in (keys.code(PROJECT, code.code_hash), keys.nonce(PROJECT, code.nonce_hash)):
        pttl = redis_store.client.pttl(key)
        assert expected - 2_000 <= pttl <= expected, (key, pttl)


# --------------------------------------------------------------------------------------------------------------
# Races: each commit is guarded on what its decision read, so concurrent writes converge


def test_a_concurrent_change_and_reset_leave_one_of_them_whole(store: Store) -> None:
    for round_ in range(6):
        user_id, email = f"u{round_}", f"u{round_}@example.com"
        mine = make_session(f"s{round_}", user_id)
        with_user(store, make_user(user_id, email, password_hash=OLD_HASH), mine)
        code = stored_reset_code(store, user_id, email=email, name=f"r{round_}")
        token = mine.refresh_token_hash
        changing = functools.partial(changed, store, PROJECT, user_id, OLD_HASH, NEW_HASH, token)
        resetting = functools.partial(reset, store, code, password_hash=OTHER_HASH)
        change_, reset_ = in_threads(changing, resetting)
        if change_ is PasswordWrite.DONE:  # the change came first: the code no longer holds
            assert reset_ is PasswordWrite.CODE_NOT_FOUND
            assert password_of(store, user_id) == NEW_HASH
            assert store.apply(ListSessions(PROJECT, user_id)) == (mine,)
            assert store.apply(attempt(code)).outcome is CodeOutcome.OK  # not used
        else:  # the reset came first: the old password is no longer the stored one
            assert (change_, reset_) == (PasswordWrite.PASSWORD_CHANGED, PasswordWrite.DONE)
            assert password_of(store, user_id) == OTHER_HASH
            assert store.apply(ListSessions(PROJECT, user_id)) == ()
            assert is_verified(store, email, user_id)


def test_a_session_started_after_a_reset_read_is_ended_too(store: Store) -> None:
    first = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), first)
    code = stored_reset_code(store)
    before = run(_reset_read(PROJECT, code), store)
    late = make_session("s2", "ada")
    put_session(store, PROJECT, late)  # a sign-in between the reset's read and its commit
    assert reset(store, code, read=before) is PasswordWrite.DONE
    assert store.apply(ListSessions(PROJECT, "ada")) == ()
    assert not live(store, late)


def test_a_session_started_after_a_change_read_is_ended_too(store: Store) -> None:
    mine = make_session("s1", "ada")
    with_user(store, make_user("ada", EMAIL, password_hash=OLD_HASH), mine)
    user = store.apply(LoadUser(PROJECT, "ada"))
    read = (user, store.apply(ListSessions(PROJECT, "ada")))
    late = make_session("s2", "ada", created_at=T0 + 1)
    put_session(store, PROJECT, late)
    flow = change_password(PROJECT, "ada", OLD_HASH, NEW_HASH, mine.refresh_token_hash, read)
    assert run(flow, store) is PasswordWrite.DONE
    assert store.apply(ListSessions(PROJECT, "ada")) == (mine,)
    assert not live(store, late)
