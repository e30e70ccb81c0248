"""Change sets: a write's fields are checked once, where the change set is built, in the core."""

from __future__ import annotations

import dataclasses

import pytest

from identity_proto.changes import MembershipChanges, ProjectConfigChanges, TeamChanges, UserChanges
from identity_proto.effects import PatchMembership, PatchProject
from identity_proto.records import Membership, ProjectConfig, Team, User


@pytest.mark.parametrize(
    ("changes", "record", "fixed"),
    [
        # OAuth accounts and passkeys change with their index only
        (UserChanges, User, {"id", "oauth_accounts", "passkeys"}),
        (TeamChanges, Team, {"id"}),
        (MembershipChanges, Membership, {"team_id", "user_id"}),
        (ProjectConfigChanges, ProjectConfig, set()),
    ],
)
def test_a_change_set_may_set_every_field_of_its_record_but_its_identity(
    changes: type[UserChanges], record: type[object], fixed: set[str]
) -> None:
    fields = {f.name for f in dataclasses.fields(record)}  # type: ignore[arg-type]
    assert changes.settable == fields - fixed
    for name in fixed:
        with pytest.raises(TypeError, match=name):
            changes.of(((name, "x"),))


def test_unknown_and_repeated_fields_are_refused_when_the_change_set_is_built() -> None:
    with pytest.raises(TypeError, match="no_such_field"):
        UserChanges.of(no_such_field=1)
    with pytest.raises(TypeError, match="twice"):
        UserChanges.of((("display_name", "a"),), display_name="b")


def test_effects_carry_typed_change_sets_even_when_given_pairs() -> None:
    patch = PatchMembership("t", "u", (("display_name", "Ada"),))  # type: ignore[arg-type]
    assert isinstance(patch.changes, MembershipChanges)
    assert dict(patch.changes) == {"display_name": "Ada"}
    assert isinstance(PatchProject("p").config, ProjectConfigChanges)
    with pytest.raises(TypeError, match="user_id"):
        PatchMembership("t", "u", (("user_id", "other"),))  # type: ignore[arg-type]


def test_a_change_set_applies_to_its_record() -> None:
    user = User(id="u", signed_up_at_millis=1, last_active_at_millis=1)
    changed = UserChanges.of(display_name="Ada", primary_email="ada@example.com").apply(user)
    assert (changed.id, changed.display_name, changed.primary_email) == ("u", "Ada", "ada@example.com")
    assert UserChanges().apply(user) is user
