"""Contact channels over every store: the primary channel is the user's `primary_email*` fields (one source of
truth), moving the primary is one step, an address used for auth is unique over every channel of the project (the
e-mail index), refusals write nothing, deleting a user drops their channels, and verifying consumes the code and
marks the channel in one step."""

from __future__ import annotations

import functools
from typing import Any

from identity_proto.drivers import Store
from identity_proto.effects import (
    AttemptVerificationCode,
    ChannelWrite,
    CodeOutcome,
    CreateContactChannel,
    CreateSignInCode,
    CreateUser,
    CreateVerificationCode,
    DeleteContactChannel,
    DeleteUser,
    EmailRefusal,
    FindUserByAuthEmail,
    ListContactChannels,
    ListProjectContactChannels,
    LoadUser,
    UpdateContactChannel,
    UpdateUser,
    UserChannels,
    UserWrite,
    VerifyContactChannel,
)
from identity_proto.records import CodePurpose, ContactChannel, User, derived_primary_channel_id
from tests.contract.factories import PROJECT, T0, in_threads, make_code, make_user

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
    found = store.apply(FindUserByAuthEmail(PROJECT, email))
    return None if found is None else found.id


def create(store: Store, new: ContactChannel, *, primary: bool = False, next_id: str = "next") -> Any:
    return store.apply(CreateContactChannel(PROJECT, new, make_primary=primary, next_primary_id=next_id))


def update(store: Store, channel_id: str, user_id: str = "ada", **fields: Any) -> Any:
    return store.apply(UpdateContactChannel(PROJECT, user_id, channel_id, next_primary_id="next", **fields))


def ada(**fields: Any) -> User:
    return make_user("ada", ADA, primary_email_verified=True, **fields)


def test_a_users_primary_email_is_their_primary_channel(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    primary = derived_primary_channel_id("ada")
    assert summary(store) == [(primary, ADA, True, True, True)]
    assert user_channels(store).channels[0].created_at_millis == T0  # when the user signed up


def test_a_user_without_an_email_has_no_channels_and_a_missing_user_none(store: Store) -> None:
    store.apply(CreateUser(PROJECT, make_user("ada")))
    assert summary(store) == []
    assert store.apply(ListContactChannels(PROJECT, "nobody")) is None


def test_a_new_channel_is_stored_beside_the_primary_and_signs_in_when_used_for_auth(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    created = create(store, channel("c1", WORK))
    assert isinstance(created, UserChannels)
    assert summary(store)[1] == ("c1", WORK, False, False, True)
    assert owner(store, WORK) == "ada"
    assert owner(store, ADA) == "ada"


def test_a_channel_not_used_for_auth_never_signs_in(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK, auth=False))
    assert owner(store, WORK) is None


def test_making_a_new_channel_primary_moves_the_old_primary_into_channel_storage(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    old_primary = derived_primary_channel_id("ada")
    create(store, channel("c1", WORK, verified=False), primary=True)
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (WORK, False, True)
    assert user.primary_email_channel_id == "c1"
    assert summary(store) == [(old_primary, ADA, False, True, True), ("c1", WORK, True, False, True)]
    assert owner(store, ADA) == owner(store, WORK) == "ada"


def test_promoting_and_demoting_keep_one_copy_of_each_channel(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
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
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK))
    before = summary(store)
    update(store, "c1", is_primary=False)
    assert summary(store) == before


def test_a_second_channel_with_the_same_value_is_refused(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    assert create(store, channel("c1", ADA, auth=False)) is ChannelWrite.ALREADY_EXISTS
    create(store, channel("c2", WORK))
    primary = derived_primary_channel_id("ada")
    assert update(store, primary, value=WORK) is ChannelWrite.ALREADY_EXISTS
    assert [c[0] for c in summary(store)] == [primary, "c2"]


def test_an_auth_address_of_another_user_is_refused_on_create_and_update(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    store.apply(CreateUser(PROJECT, make_user("bob", "bob@example.com")))
    assert create(store, channel("c1", ADA, user_id="bob")) is ChannelWrite.USED_FOR_AUTH
    create(store, channel("c1", ADA, user_id="bob", auth=False))  # not for auth: anyone may hold it
    assert update(store, "c1", "bob", used_for_auth=True) is ChannelWrite.USED_FOR_AUTH
    create(store, channel("c2", WORK, user_id="bob"))
    assert create(store, channel("c3", WORK)) is ChannelWrite.USED_FOR_AUTH
    assert owner(store, ADA) == "ada"
    assert owner(store, WORK) == "bob"


def test_an_auth_address_held_by_a_stored_channel_blocks_other_users_primary_email(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK))
    assert store.apply(CreateUser(PROJECT, make_user("bob", WORK))) is UserWrite.EMAIL_TAKEN
    store.apply(CreateUser(PROJECT, make_user("bob", "bob@example.com")))
    assert store.apply(UpdateUser(PROJECT, "bob", (("primary_email", WORK),))) is UserWrite.EMAIL_TAKEN


def test_a_users_primary_email_cannot_become_the_value_of_their_other_channel(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK, auth=False))
    assert store.apply(UpdateUser(PROJECT, "ada", (("primary_email", WORK),))) is UserWrite.EMAIL_TAKEN
    assert store.apply(LoadUser(PROJECT, "ada")).primary_email == ADA  # type: ignore[union-attr]


def test_a_new_value_resets_verification_unless_given_and_moves_the_index_entry(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK, verified=True))
    update(store, "c1", value="ada@new.example.com")
    assert summary(store)[1] == ("c1", "ada@new.example.com", False, False, True)
    assert owner(store, WORK) is None
    assert owner(store, "ada@new.example.com") == "ada"
    update(store, "c1", value="ada@newer.example.com", is_verified=True)
    assert summary(store)[1] == ("c1", "ada@newer.example.com", False, True, True)


def test_updating_the_primary_channel_updates_the_user(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
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
    store.apply(CreateUser(PROJECT, ada()))
    assert update(store, "c9", value=WORK) is ChannelWrite.CHANNEL_NOT_FOUND
    assert store.apply(DeleteContactChannel(PROJECT, "ada", "c9", "next")) is ChannelWrite.CHANNEL_NOT_FOUND
    assert store.apply(DeleteContactChannel(PROJECT, "nobody", "c9", "next")) is ChannelWrite.USER_NOT_FOUND
    assert owner(store, WORK) is None


def test_deleting_channels_drops_their_index_entries_and_leaves_the_user(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada(otp_auth_enabled=True)))
    create(store, channel("c1", WORK))
    store.apply(DeleteContactChannel(PROJECT, "ada", "c1", "next"))
    assert owner(store, WORK) is None
    store.apply(DeleteContactChannel(PROJECT, "ada", derived_primary_channel_id("ada"), "next"))
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert (user.primary_email, user.otp_auth_enabled) == (None, True)
    assert owner(store, ADA) is None
    assert summary(store) == []


def test_deleting_a_user_drops_their_channels_and_frees_their_addresses(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK))
    store.apply(DeleteUser(PROJECT, "ada"))
    assert owner(store, WORK) is None
    store.apply(CreateUser(PROJECT, make_user("ada")))  # the same id again: no channel comes back
    assert summary(store) == []


def test_the_project_list_has_every_users_channels_in_user_order(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    store.apply(CreateUser(PROJECT, make_user("bob", "bob@example.com")))
    create(store, channel("c1", WORK))
    values = [(c.user_id, c.value) for c in store.apply(ListProjectContactChannels(PROJECT))]
    assert values == [("ada", ADA), ("ada", WORK), ("bob", "bob@example.com")]


def test_an_unverified_stored_auth_channel_cannot_get_a_sign_in_code_until_verified(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK))
    code = make_code("s1", email=WORK)
    assert store.apply(CreateSignInCode(PROJECT, code, sign_up_enabled=True)) is EmailRefusal.UNVERIFIED
    update(store, "c1", is_verified=True)
    assert store.apply(CreateSignInCode(PROJECT, code, sign_up_enabled=True)) is None


def verification_code(name: str, user_id: str, email: str) -> Any:
    return make_code(name, purpose=CodePurpose.CONTACT_CHANNEL_VERIFICATION, user_id=user_id, email=email)


def verify(store: Store, name: str, purpose: CodePurpose = CodePurpose.CONTACT_CHANNEL_VERIFICATION) -> Any:
    attempt = AttemptVerificationCode(PROJECT, f"code-{name}", f"nonce-{name}", purpose, T0 + 5, consume=True)
    return store.apply(VerifyContactChannel(attempt))


def test_verifying_consumes_the_code_and_marks_the_channel_in_one_step(store: Store) -> None:
    store.apply(CreateUser(PROJECT, make_user("ada", ADA)))
    create(store, channel("c1", WORK))
    store.apply(CreateVerificationCode(PROJECT, verification_code("v1", "ada", WORK)))
    store.apply(CreateVerificationCode(PROJECT, verification_code("v2", "ada", ADA)))
    result = verify(store, "v1")
    assert (result.attempt.outcome, result.channel_found) == (CodeOutcome.OK, True)
    assert summary(store)[1][3] is True
    assert verify(store, "v1").attempt.outcome is CodeOutcome.ALREADY_USED
    verify(store, "v2")
    assert store.apply(LoadUser(PROJECT, "ada")).primary_email_verified is True  # type: ignore[union-attr]


def test_a_code_of_another_purpose_or_for_a_deleted_channel_verifies_nothing(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    create(store, channel("c1", WORK))
    store.apply(CreateVerificationCode(PROJECT, make_code("s1", email=WORK, user_id="ada")))
    assert verify(store, "s1").attempt.outcome is CodeOutcome.NOT_FOUND
    store.apply(CreateVerificationCode(PROJECT, verification_code("v1", "ada", WORK)))
    store.apply(DeleteContactChannel(PROJECT, "ada", "c1", "next"))
    result = verify(store, "v1")
    assert (result.attempt.outcome, result.channel_found) == (CodeOutcome.OK, False)
    assert verify(store, "v1").attempt.outcome is CodeOutcome.ALREADY_USED  # consumed all the same


def test_of_concurrent_claims_of_one_auth_address_exactly_one_wins(store: Store) -> None:
    for n in range(8):
        store.apply(CreateUser(PROJECT, make_user(f"u{n}")))
    results = in_threads(*(functools.partial(create, store, channel(f"c{n}", WORK, user_id=f"u{n}")) for n in range(8)))
    assert sum(isinstance(r, UserChannels) for r in results) == 1
    assert sum(r is ChannelWrite.USED_FOR_AUTH for r in results) == 7


# --------------------------------------------------------------------------------------------------------------
# Unverified claims by a client (security): they hold no address until verified


def claim(store: Store, new: ContactChannel, *, primary: bool = False, max_channels: int = 0) -> Any:
    """A client's create (`trusted=False`)."""
    effect = CreateContactChannel(
        PROJECT, new, make_primary=primary, next_primary_id="next", trusted=False, max_channels=max_channels
    )
    return store.apply(effect)


def test_a_clients_unverified_auth_channel_holds_no_address(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    store.apply(CreateUser(PROJECT, make_user("bob", "bob@example.com")))
    assert isinstance(claim(store, channel("c1", WORK)), UserChannels)
    assert summary(store)[1] == ("c1", WORK, False, False, True)  # used_for_auth as the client set it
    assert owner(store, WORK) is None
    # Another user may claim it too, and a sign-up takes it over both.
    assert isinstance(claim(store, channel("c2", WORK, user_id="bob")), UserChannels)
    assert store.apply(CreateSignInCode(PROJECT, make_code("s1", email=WORK), sign_up_enabled=True)) is None
    assert isinstance(store.apply(CreateUser(PROJECT, make_user("owner", WORK))), User)
    assert owner(store, WORK) == "owner"
    # The claims stay as they were and cannot take it now.
    assert update(store, "c1", trusted=False, used_for_auth=True) is ChannelWrite.USED_FOR_AUTH
    assert update(store, "c1", is_verified=True) is ChannelWrite.USED_FOR_AUTH
    assert isinstance(store.apply(DeleteContactChannel(PROJECT, "ada", "c1", "next")), UserChannels)
    assert owner(store, WORK) == "owner"  # deleting a claim leaves the holder's entry


def test_a_clients_claim_takes_its_address_once_verified_if_it_is_free(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    store.apply(CreateUser(PROJECT, make_user("bob", "bob@example.com")))
    claim(store, channel("c1", WORK))
    claim(store, channel("c2", WORK, user_id="bob"))
    store.apply(CreateVerificationCode(PROJECT, verification_code("v1", "bob", WORK)))
    store.apply(CreateVerificationCode(PROJECT, verification_code("v2", "ada", WORK)))
    assert verify(store, "v1").channel_found is True
    assert owner(store, WORK) == "bob"  # the first verification wins
    assert verify(store, "v2").channel_found is True
    assert owner(store, WORK) == "bob"
    assert summary(store)[1] == ("c1", WORK, False, True, True)  # verified, and still not a sign-in address


def test_a_server_write_or_a_verified_channel_claims_at_once_and_a_held_address_is_kept(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
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
    store.apply(CreateUser(PROJECT, ada()))
    claim(store, channel("c1", WORK), primary=True)
    assert summary(store)[1] == ("c1", WORK, True, False, False)
    assert owner(store, WORK) is None
    assert owner(store, ADA) == "ada"  # the old primary keeps its address
    claim(store, channel("c2", "ada@other.example.com"))
    assert isinstance(update(store, "c2", trusted=False, is_primary=True), UserChannels)
    assert ("c2", "ada@other.example.com", True, False, False) in summary(store)
    assert owner(store, "ada@other.example.com") is None


def test_a_create_beyond_max_channels_is_refused(store: Store) -> None:
    store.apply(CreateUser(PROJECT, ada()))
    assert isinstance(claim(store, channel("c1", WORK), max_channels=2), UserChannels)
    before = summary(store)
    assert claim(store, channel("c2", "ada@other.example.com"), max_channels=2) is ChannelWrite.TOO_MANY
    assert summary(store) == before
    assert claim(store, channel("c2", WORK), max_channels=2) is ChannelWrite.ALREADY_EXISTS  # checked first
