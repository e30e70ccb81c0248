"""Contact channels over every store: the primary channel is the user's `primary_email*` fields (one source of
truth), moving the primary is one step, an address used for auth is unique over every channel of the project (the
e-mail index), refusals write nothing, deleting a user drops their channels, and verifying uses the code and marks
the channel in one step. The writes are the core's flows (a read, a decision, one `Commit`), run here on each store
as the service runs them (`run_flow`: re-run on a conflict)."""

from __future__ import annotations

import functools
from typing import Any

from identity_proto.drivers import Store, run
from identity_proto.effects import (
    AttemptVerificationCode,
    ChannelWrite,
    CodeOutcome,
    EmailRefusal,
    ListContactChannels,
    ListProjectContactChannels,
    LoadUser,
    UserChannels,
    find_user_by_email,
)
from identity_proto.effects.commit import Committed
from identity_proto.errors import ErrorCode
from identity_proto.flows.contact_channels import create_channel, delete_channel, update_channel, verify_with_code
from identity_proto.flows.otp import store_sign_in_code
from identity_proto.records import CodePurpose, ContactChannel, User, derived_primary_channel_id
from tests.contract.factories import (
    EMAIL_TAKEN,
    PROJECT,
    T0,
    add_user,
    delete_user,
    in_threads,
    make_code,
    make_user,
    patched_user,
    put_code,
    run_flow,
)

ADA = "ada@example.com"
WORK = "ada@work.example.com"


def channel(
    channel_id: str, value: str, *, user_id: str = "ada", auth: bool = True, verified: bool = False, at: int = T0 + 1
) -> ContactChannel:
    return ContactChannel(channel_id, user_id, value, verified, auth, at)


def user_channels(store: Store, user_id: str = "ada") -> UserChannels:
    found = store.apply(ListContactChannels(PROJECT, user_id))
    assert found is not None
    return found


def summary(store: Store, user_id: str = "ada") -> list[tuple[str, str, bool, bool, bool]]:
    return [
        (c.id, c.value, c.is_primary, c.is_verified, c.used_for_auth) for c in user_channels(store, user_id).channels
    ]


def owner(store: Store, email: str) -> str | None:
    found = store.apply(find_user_by_email(PROJECT, email))
    return None if found is None else found.id


def create(store: Store, new: ContactChannel, *, primary: bool = False, next_id: str = "next", **more: Any) -> Any:
    return run_flow(store, lambda: create_channel(PROJECT, new, make_primary=primary, next_primary_id=next_id, **more))


def update(store: Store, channel_id: str, user_id: str = "ada", **fields: Any) -> Any:
    return run_flow(store, lambda: update_channel(PROJECT, user_id, channel_id, "next", **fields))


def delete(store: Store, user_id: str, channel_id: str, next_id: str = "next") -> Any:
    return run_flow(store, lambda: delete_channel(PROJECT, user_id, channel_id, next_id))


def ada(**fields: Any) -> User:
    return make_user("ada", ADA, primary_email_verified=True, **fields)


def test_a_users_primary_email_is_their_primary_channel(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    primary = derived_primary_channel_id("ada")
    assert summary(store) == [(primary, ADA, True, True, True)]
    assert user_channels(store).channels[0].created_at_millis == T0  # when the user signed up


def test_a_user_without_an_email_has_no_channels_and_a_missing_user_none(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    assert summary(store) == []
    assert store.apply(ListContactChannels(PROJECT, "nobody")) is None


def test_a_new_channel_is_stored_beside_the_primary_and_signs_in_when_used_for_auth(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    created = create(store, channel("c1", WORK))
    assert isinstance(created, UserChannels)
    assert summary(store)[1] == ("c1", WORK, False, False, True)
    assert owner(store, WORK) == "ada"
    assert owner(store, ADA) == "ada"


def test_a_channel_not_used_for_auth_never_signs_in(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK, auth=False))
    assert owner(store, WORK) is None


def test_making_a_new_channel_primary_moves_the_old_primary_into_channel_storage(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    old_primary = derived_primary_channel_id("ada")
    create(store, channel("c1", WORK, verified=False), primary=True)
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (WORK, False, True)
    assert user.primary_email_channel_id == "c1"
    assert summary(store) == [(old_primary, ADA, False, True, True), ("c1", WORK, True, False, True)]
    assert owner(store, ADA) == owner(store, WORK) == "ada"


def test_promoting_and_demoting_keep_one_copy_of_each_channel(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    old_primary = derived_primary_channel_id("ada")
    create(store, channel("c1", WORK, verified=True))
    update(store, "c1", is_primary=True)
    assert summary(store) == [(old_primary, ADA, False, True, True), ("c1", WORK, True, True, True)]
    update(store, old_primary, is_primary=True)
    assert summary(store) == [(old_primary, ADA, True, True, True), ("c1", WORK, False, True, True)]
    update(store, old_primary, is_primary=False)
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (None, False, False)
    assert user.primary_email_channel_id == "next"  # a primary set later through /users gets a fresh id
    assert summary(store) == [(old_primary, ADA, False, True, True), ("c1", WORK, False, True, True)]
    assert owner(store, ADA) == "ada"


def test_is_primary_false_on_another_channel_changes_nothing(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    before = summary(store)
    update(store, "c1", is_primary=False)
    assert summary(store) == before


def test_a_second_channel_with_the_same_value_is_refused(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    assert create(store, channel("c1", ADA, auth=False)) is ChannelWrite.ALREADY_EXISTS
    create(store, channel("c2", WORK))
    primary = derived_primary_channel_id("ada")
    assert update(store, primary, value=WORK) is ChannelWrite.ALREADY_EXISTS
    assert [c[0] for c in summary(store)] == [primary, "c2"]


def test_an_auth_address_of_another_user_is_refused_on_create_and_update(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    assert create(store, channel("c1", ADA, user_id="bob")) is ChannelWrite.USED_FOR_AUTH
    create(store, channel("c1", ADA, user_id="bob", auth=False))  # not for auth: anyone may hold it
    assert update(store, "c1", "bob", used_for_auth=True) is ChannelWrite.USED_FOR_AUTH
    create(store, channel("c2", WORK, user_id="bob"))
    assert create(store, channel("c3", WORK)) is ChannelWrite.USED_FOR_AUTH
    assert owner(store, ADA) == "ada"
    assert owner(store, WORK) == "bob"


def test_an_auth_address_held_by_a_stored_channel_blocks_other_users_primary_email(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    assert store.apply(add_user(PROJECT, make_user("bob", WORK))) == EMAIL_TAKEN
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    assert patched_user(store, PROJECT, "bob", (("primary_email", WORK),)) is ErrorCode.USER_EMAIL_ALREADY_EXISTS


def test_a_users_primary_email_cannot_become_the_value_of_their_other_channel(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK, auth=False))
    assert patched_user(store, PROJECT, "ada", (("primary_email", WORK),)) is ErrorCode.USER_EMAIL_ALREADY_EXISTS
    assert store.apply(LoadUser(PROJECT, "ada")).primary_email == ADA  # type: ignore[union-attr]


def test_a_new_value_resets_verification_unless_given_and_moves_the_index_entry(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK, verified=True))
    update(store, "c1", value="ada@new.example.com")
    assert summary(store)[1] == ("c1", "ada@new.example.com", False, False, True)
    assert owner(store, WORK) is None
    assert owner(store, "ada@new.example.com") == "ada"
    update(store, "c1", value="ada@newer.example.com", is_verified=True)
    assert summary(store)[1] == ("c1", "ada@newer.example.com", False, True, True)


def test_updating_the_primary_channel_updates_the_user(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    primary = derived_primary_channel_id("ada")
    update(store, primary, value="ada@new.example.com", used_for_auth=False)
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (
        "ada@new.example.com",
        False,
        False,
    )
    assert owner(store, ADA) is None
    assert owner(store, "ada@new.example.com") is None


def test_missing_users_and_channels_are_reported_and_nothing_is_written(store: Store) -> None:
    assert create(store, channel("c1", WORK, user_id="nobody")) is ChannelWrite.USER_NOT_FOUND
    assert update(store, "c1", "nobody", value=WORK) is ChannelWrite.USER_NOT_FOUND
    store.apply(add_user(PROJECT, ada()))
    assert update(store, "c9", value=WORK) is ChannelWrite.CHANNEL_NOT_FOUND
    assert delete(store, "ada", "c9") is ChannelWrite.CHANNEL_NOT_FOUND
    assert delete(store, "nobody", "c9") is ChannelWrite.USER_NOT_FOUND
    assert owner(store, WORK) is None


def test_deleting_channels_drops_their_index_entries_and_leaves_the_user(store: Store) -> None:
    store.apply(add_user(PROJECT, ada(otp_auth_enabled=True)))
    create(store, channel("c1", WORK))
    delete(store, "ada", "c1")
    assert owner(store, WORK) is None
    delete(store, "ada", derived_primary_channel_id("ada"))
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.otp_auth_enabled) == (None, True)
    assert owner(store, ADA) is None
    assert summary(store) == []


def test_deleting_a_user_drops_their_channels_and_frees_their_addresses(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    delete_user(store, PROJECT, "ada")
    assert owner(store, WORK) is None
    store.apply(add_user(PROJECT, make_user("ada")))  # the same id again: no channel comes back
    assert summary(store) == []


def test_the_project_list_has_every_users_channels_in_user_order(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    create(store, channel("c1", WORK))
    values = [(c.user_id, c.value) for c in store.apply(ListProjectContactChannels(PROJECT))]
    assert values == [("ada", ADA), ("ada", WORK), ("bob", "bob@example.com")]


def test_an_unverified_stored_auth_channel_cannot_get_a_sign_in_code_until_verified(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    code = make_code("s1", email=WORK)
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store) is EmailRefusal.UNVERIFIED
    update(store, "c1", is_verified=True)
    assert run(store_sign_in_code(PROJECT, code, sign_up_enabled=True), store) is None


def verification_code(name: str, user_id: str, email: str) -> Any:
    return make_code(name, purpose=CodePurpose.CONTACT_CHANNEL_VERIFICATION, user_id=user_id, email=email)


def verify(store: Store, name: str, purpose: CodePurpose = CodePurpose.CONTACT_CHANNEL_VERIFICATION) -> Any:
    attempt = AttemptVerificationCode(PROJECT, f"code-{name}", f"nonce-{name}", purpose, T0 + 5, consume=False)
    return run_flow(store, lambda: verify_with_code(PROJECT, attempt))


def test_verifying_consumes_the_code_and_marks_the_channel_in_one_step(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada", ADA)))
    create(store, channel("c1", WORK))
    store.apply(put_code(PROJECT, verification_code("v1", "ada", WORK)))
    store.apply(put_code(PROJECT, verification_code("v2", "ada", ADA)))
    result = verify(store, "v1")
    assert (result.attempt.outcome, result.channel_found) == (CodeOutcome.OK, True)
    assert summary(store)[1][3] is True
    assert verify(store, "v1").attempt.outcome is CodeOutcome.ALREADY_USED
    verify(store, "v2")
    assert store.apply(LoadUser(PROJECT, "ada")).primary_email_verified is True  # type: ignore[union-attr]


def test_a_code_of_another_purpose_or_for_a_deleted_channel_verifies_nothing(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    store.apply(put_code(PROJECT, make_code("s1", email=WORK, user_id="ada")))
    assert verify(store, "s1").attempt.outcome is CodeOutcome.NOT_FOUND
    store.apply(put_code(PROJECT, verification_code("v1", "ada", WORK)))
    delete(store, "ada", "c1")
    result = verify(store, "v1")
    assert (result.attempt.outcome, result.channel_found) == (CodeOutcome.OK, False)
    assert verify(store, "v1").attempt.outcome is CodeOutcome.ALREADY_USED  # consumed all the same


def test_of_concurrent_claims_of_one_auth_address_exactly_one_wins(store: Store) -> None:
    for n in range(8):
        store.apply(add_user(PROJECT, make_user(f"u{n}")))
    results = in_threads(*(functools.partial(create, store, channel(f"c{n}", WORK, user_id=f"u{n}")) for n in range(8)))
    assert sum(isinstance(r, UserChannels) for r in results) == 1
    assert sum(r is ChannelWrite.USED_FOR_AUTH for r in results) == 7


# --------------------------------------------------------------------------------------------------------------
# Unverified claims by a client (security): they hold no address until verified


def claim(store: Store, new: ContactChannel, *, primary: bool = False, max_channels: int = 0) -> Any:
    """A client's create (`trusted=False`)."""
    return create(store, new, primary=primary, trusted=False, max_channels=max_channels)


def test_a_clients_unverified_auth_channel_holds_no_address(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    assert isinstance(claim(store, channel("c1", WORK)), UserChannels)
    assert summary(store)[1] == ("c1", WORK, False, False, True)  # used_for_auth as the client set it
    assert owner(store, WORK) is None
    # Another user may claim it too, and a sign-up takes it over both.
    assert isinstance(claim(store, channel("c2", WORK, user_id="bob")), UserChannels)
    assert run(store_sign_in_code(PROJECT, make_code("s1", email=WORK), sign_up_enabled=True), store) is None
    assert isinstance(store.apply(add_user(PROJECT, make_user("owner", WORK))), Committed)
    assert owner(store, WORK) == "owner"
    # The claims stay as they were and cannot take it now.
    assert update(store, "c1", trusted=False, used_for_auth=True) is ChannelWrite.USED_FOR_AUTH
    assert update(store, "c1", is_verified=True) is ChannelWrite.USED_FOR_AUTH
    assert isinstance(delete(store, "ada", "c1"), UserChannels)
    assert owner(store, WORK) == "owner"  # deleting a claim leaves the holder's entry


def test_a_clients_claim_takes_its_address_once_verified_if_it_is_free(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    claim(store, channel("c1", WORK))
    claim(store, channel("c2", WORK, user_id="bob"))
    store.apply(put_code(PROJECT, verification_code("v1", "bob", WORK)))
    store.apply(put_code(PROJECT, verification_code("v2", "ada", WORK)))
    assert verify(store, "v1").channel_found is True
    assert owner(store, WORK) == "bob"  # the first verification wins
    assert verify(store, "v2").channel_found is True
    assert owner(store, WORK) == "bob"
    assert summary(store)[1] == ("c1", WORK, False, True, True)  # verified, and still not a sign-in address


def test_a_server_write_or_a_verified_channel_claims_at_once_and_a_held_address_is_kept(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    claim(store, channel("c1", WORK))
    assert owner(store, WORK) is None
    assert isinstance(update(store, "c1", trusted=False, is_primary=False), UserChannels)
    assert owner(store, WORK) is None
    assert isinstance(update(store, "c1", is_verified=False), UserChannels)  # a server's write: it claims
    assert owner(store, WORK) == "ada"
    assert isinstance(update(store, "c1", trusted=False, is_primary=True), UserChannels)  # holds it: keeps it
    assert owner(store, WORK) == "ada"
    assert summary(store)[1] == ("c1", WORK, True, False, True)
    assert isinstance(update(store, "c1", trusted=False, value="ada@new.example.com"), UserChannels)
    assert (owner(store, WORK), owner(store, "ada@new.example.com")) == (None, None)


def test_a_clients_unverified_claim_made_primary_is_not_for_auth(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    claim(store, channel("c1", WORK), primary=True)
    assert summary(store)[1] == ("c1", WORK, True, False, False)
    assert owner(store, WORK) is None
    assert owner(store, ADA) == "ada"  # the old primary keeps its address
    claim(store, channel("c2", "ada@other.example.com"))
    assert isinstance(update(store, "c2", trusted=False, is_primary=True), UserChannels)
    assert ("c2", "ada@other.example.com", True, False, False) in summary(store)
    assert owner(store, "ada@other.example.com") is None


def test_a_create_beyond_max_channels_is_refused(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    assert isinstance(claim(store, channel("c1", WORK), max_channels=2), UserChannels)
    before = summary(store)
    assert claim(store, channel("c2", "ada@other.example.com"), max_channels=2) is ChannelWrite.TOO_MANY
    assert summary(store) == before
    assert claim(store, channel("c2", WORK), max_channels=2) is ChannelWrite.ALREADY_EXISTS  # checked first


# --------------------------------------------------------------------------------------------------------------
# Races: each flow reads, decides and commits guarded on what it read; a concurrent change re-runs it


def test_of_concurrent_verifications_of_one_address_by_two_users_the_first_takes_it(store: Store) -> None:
    for user_id in ("ada", "bob"):
        store.apply(add_user(PROJECT, make_user(user_id, f"{user_id}@example.com")))
        claim(store, channel(f"c-{user_id}", WORK, user_id=user_id))
        store.apply(put_code(PROJECT, verification_code(f"v-{user_id}", user_id, WORK)))
    results = in_threads(lambda: verify(store, "v-ada"), lambda: verify(store, "v-bob"))
    assert [(r.attempt.outcome, r.channel_found) for r in results] == [(CodeOutcome.OK, True)] * 2
    holder = owner(store, WORK)
    assert holder in ("ada", "bob")
    for user_id in ("ada", "bob"):  # both verified; only the holder signs in with it
        assert (f"c-{user_id}", WORK, False, True, True) in summary(store, user_id)


def test_of_concurrent_verifications_with_one_code_exactly_one_uses_it(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK))
    store.apply(put_code(PROJECT, verification_code("v1", "ada", WORK)))
    results = in_threads(*[lambda: verify(store, "v1") for _ in range(6)])
    outcomes = sorted(r.attempt.outcome.value for r in results)
    assert outcomes == ["already_used"] * 5 + ["ok"]
    assert summary(store)[1] == ("c1", WORK, False, True, True)


def test_of_concurrent_creations_of_one_value_for_one_user_one_is_stored(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    results = in_threads(*[lambda n=n: create(store, channel(f"c{n}", WORK, auth=False)) for n in range(6)])
    assert sum(isinstance(r, UserChannels) for r in results) == 1
    assert sum(r is ChannelWrite.ALREADY_EXISTS for r in results) == 5
    assert [c[1] for c in summary(store)] == [ADA, WORK]


def test_concurrent_creations_never_pass_the_cap(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    values = [f"ada{n}@example.com" for n in range(6)]
    results = in_threads(*[lambda n=n: claim(store, channel(f"c{n}", values[n]), max_channels=3) for n in range(6)])
    assert sum(isinstance(r, UserChannels) for r in results) == 2  # the primary and two more
    assert sum(r is ChannelWrite.TOO_MANY for r in results) == 4
    assert len(summary(store)) == 3


def test_a_deletion_and_a_promotion_at_once_leave_one_consistent_user(store: Store) -> None:
    store.apply(add_user(PROJECT, ada()))
    create(store, channel("c1", WORK, verified=True))
    primary = derived_primary_channel_id("ada")
    in_threads(lambda: update(store, "c1", is_primary=True), lambda: delete(store, "ada", primary))
    channels = summary(store)
    assert [c[0] for c in channels] == ["c1"]  # the old primary deleted, whichever ran first
    assert channels[0][1] == WORK
    assert owner(store, ADA) is None
    assert owner(store, WORK) == "ada"
