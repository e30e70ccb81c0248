"""Passkeys over every store: a user's passkeys on the user record (`SetPasskeys`) with the project's passkey index
(credential id -> user, `FindUserByIndex(IndexName.PASSKEY)`), kept in step by the registration's commit
(`flows.passkeys._store_passkey`); a sign-in's counter written with the guard on the list as read, so of two
concurrent sign-ins deciding on one counter exactly one commits; and what a user's deletion, a project's reset and
an export/import take with them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from backends.memory import MemoryStore
from backends.redis import RedisStore
from identity_proto.drivers import Store, run
from identity_proto.effects import LoadUser, ResetProjectData, create_project, find_user_by_passkey
from identity_proto.effects.commit import CommitConflict, FieldsAre, commit
from identity_proto.effects.passkeys import SetPasskeys
from identity_proto.errors import KnownError
from identity_proto.flows.passkeys import _store_passkey
from identity_proto.flows.portability import export_project_data, import_project_data
from identity_proto.flows.projects import new_project
from identity_proto.flows.signin import NewUser, commit_new_user
from identity_proto.records import Passkey, User
from identity_proto.tokens import SeededEntropy
from tests.contract.factories import OTHER_PROJECT, PROJECT, T0, delete_user, in_threads, make_user, run_flow


def passkey(credential_id: str = "cred-1", sign_count: int = 0, **fields: Any) -> Passkey:
    return Passkey(
        credential_id=credential_id,
        public_key=f"key-of-{credential_id}",
        sign_count=sign_count,
        transports=fields.pop("transports", ("internal", "hybrid")),
        aaguid=fields.pop("aaguid", "00000000-0000-0000-0000-000000000000"),
        created_at_millis=fields.pop("created_at_millis", T0),
        rp_id=fields.pop("rp_id", "app.example.com"),
        **fields,
    )


def store_user(store: Store, user_id: str, project_id: str = PROJECT) -> User:
    user = make_user(user_id, f"{user_id}@example.com")
    assert run(commit_new_user(project_id, NewUser(user)), store) == user
    return user


def register(store: Store, user_id: str, key: Passkey, project_id: str = PROJECT) -> None:
    run_flow(store, lambda: _store_passkey(project_id, user_id, key))


def holder(store: Store, credential_id: str, project_id: str = PROJECT) -> str | None:
    found = store.apply(find_user_by_passkey(project_id, credential_id))
    return None if found is None else found.id


def passkeys_of(store: Store, user_id: str, project_id: str = PROJECT) -> tuple[Passkey, ...]:
    user = store.apply(LoadUser(project_id, user_id))
    assert user is not None
    return user.passkeys  # type: ignore[no-any-return]


def index_entries(store: Store, project_id: str = PROJECT) -> dict[str, str]:
    """The project's passkey index as stored."""
    if isinstance(store, MemoryStore):
        return dict(store.tenant(project_id).passkey_index)
    assert isinstance(store, RedisStore)
    stored = store.client.hgetall(store.keys.passkey_index(project_id))
    return {key.decode(): value.decode() for key, value in stored.items()}


def test_a_registered_passkey_is_stored_on_its_user_and_found_by_its_credential_id(store: Store) -> None:
    store_user(store, "ada")
    key = passkey()

    register(store, "ada", key)

    assert passkeys_of(store, "ada") == (key,)
    assert holder(store, "cred-1") == "ada"
    assert holder(store, "cred-2") is None
    assert holder(store, "cred-1", OTHER_PROJECT) is None  # another project's index knows nothing of it
    assert index_entries(store) == {"cred-1": "ada"}


def test_a_new_registration_replaces_the_users_passkey_and_its_index_entry(store: Store) -> None:
    store_user(store, "ada")
    register(store, "ada", passkey("cred-1"))

    register(store, "ada", passkey("cred-2", transports=("usb",)))

    assert [p.credential_id for p in passkeys_of(store, "ada")] == ["cred-2"]
    assert passkeys_of(store, "ada")[0].transports == ("usb",)
    assert index_entries(store) == {"cred-2": "ada"}


def test_a_credential_id_another_user_holds_is_refused_and_nothing_is_written(store: Store) -> None:
    store_user(store, "ada")
    store_user(store, "bob")
    register(store, "ada", passkey("cred-1"))

    with pytest.raises(KnownError) as refused:
        register(store, "bob", passkey("cred-1"))

    assert refused.value.code.name == "PASSKEY_REGISTRATION_FAILED"
    assert passkeys_of(store, "bob") == ()
    assert index_entries(store) == {"cred-1": "ada"}


def test_a_counter_update_guarded_on_the_passkeys_as_read_has_one_winner(store: Store) -> None:
    store_user(store, "ada")
    register(store, "ada", passkey(sign_count=0))
    read = store.apply(LoadUser(PROJECT, "ada"))

    def counted(sign_count: int) -> Any:
        write = SetPasskeys("ada", (dataclasses.replace(read.passkeys[0], sign_count=sign_count),))
        try:
            run(commit(PROJECT, (FieldsAre(read, ("passkeys",)),), (write,)), store)
        except CommitConflict:
            return "conflict"
        return sign_count

    results = in_threads(*(lambda n=n: counted(n) for n in range(1, 9)))

    winners = [r for r in results if r != "conflict"]
    assert len(winners) == 1
    assert passkeys_of(store, "ada")[0].sign_count == winners[0]


def test_a_passkeys_list_written_whole_reads_back_field_for_field(store: Store) -> None:
    store_user(store, "ada")
    key = passkey("cred-x", sign_count=41, transports=("usb", "nfc", "ble"), aaguid="ad-ce", rp_id="localhost")
    register(store, "ada", key)
    read = store.apply(LoadUser(PROJECT, "ada"))
    changed = (dataclasses.replace(key, sign_count=42),)

    # the guard compares what was read with what is stored: the same text on every store
    run(commit(PROJECT, (FieldsAre(read, ("passkeys",)),), (SetPasskeys("ada", changed),)), store)

    assert passkeys_of(store, "ada") == changed
    with pytest.raises(CommitConflict):
        run(commit(PROJECT, (FieldsAre(read, ("passkeys",)),), (SetPasskeys("ada", ()),)), store)


def test_deleting_a_user_frees_their_passkeys_credential_id(store: Store) -> None:
    store_user(store, "ada")
    store_user(store, "bob")
    register(store, "ada", passkey("cred-a"))
    register(store, "bob", passkey("cred-b"))

    assert delete_user(store, PROJECT, "ada") is True

    assert index_entries(store) == {"cred-b": "bob"}
    assert holder(store, "cred-a") is None
    store_user(store, "carol")
    register(store, "carol", passkey("cred-a"))
    assert holder(store, "cred-a") == "carol"


def _project(project_id: str) -> Any:
    project, _ = new_project(SeededEntropy(3), T0, "Passkeys", None, project_id=project_id)
    return project


def test_a_projects_reset_takes_its_passkey_index(store: Store) -> None:
    run(create_project(_project(PROJECT)), store)
    store_user(store, "ada")
    register(store, "ada", passkey())

    assert store.apply(ResetProjectData(PROJECT)) is True

    assert holder(store, "cred-1") is None
    assert index_entries(store) == {}


def test_an_export_carries_passkeys_and_its_import_indexes_them(store: Store) -> None:
    run(create_project(_project(PROJECT)), store)
    run(create_project(_project(OTHER_PROJECT)), store)
    store_user(store, "ada")
    key = passkey(sign_count=7)
    register(store, "ada", key)

    document = run(export_project_data(PROJECT, T0), store)
    run_flow(store, lambda: import_project_data(OTHER_PROJECT, document))

    assert holder(store, "cred-1", OTHER_PROJECT) == "ada"
    assert passkeys_of(store, "ada", OTHER_PROJECT) == (key,)
