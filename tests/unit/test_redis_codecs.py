"""The Redis codecs encode a field-level write's changed values alone (`_change_fields`); each must be the very text
the whole record's codec writes for that field, or a record read back after an update would differ from one
created with the same values."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from backends.redis.codecs import _change_fields
from identity_proto.changes import MembershipChanges, TeamChanges, UserChanges
from identity_proto.records import Membership, RiskScores, Team, User, user_to_json

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

_user_changes = st.fixed_dictionaries(
    {},
    optional={
        "display_name": st.none() | st.text(),
        "primary_email": st.none() | st.text(),
        "primary_email_auth_enabled": st.booleans(),
        "signed_up_at_millis": st.integers(0, 2**53),
        "totp_last_step": st.none() | st.integers(0, 2**40),
        "client_metadata": _json_values,
        "server_metadata": _json_values,
        "risk_scores": st.builds(RiskScores, st.integers(0, 100), st.integers(0, 100)),
    },
)


def _whole(record: Any, codec: Any, names: Any) -> list[tuple[str, str]]:
    plain = codec(record)
    return [(name, orjson.dumps(plain[name]).decode()) for name in names]


@given(_user_changes)
def test_a_user_change_is_encoded_as_the_whole_record_encodes_it(values: dict[str, Any]) -> None:
    changes = UserChanges.of(**values)
    blank = User(id="u", signed_up_at_millis=0, last_active_at_millis=0)
    assert _change_fields(changes) == _whole(changes.apply(blank), user_to_json, values)


@given(st.fixed_dictionaries({}, optional={"display_name": st.text(), "client_metadata": _json_values}))
def test_a_team_change_is_encoded_as_the_whole_record_encodes_it(values: dict[str, Any]) -> None:
    changes = TeamChanges.of(**values)
    blank = Team(id="t", display_name="", created_at_millis=0)
    assert _change_fields(changes) == _whole(changes.apply(blank), dataclasses.asdict, values)


@given(st.lists(st.text(max_size=10), max_size=4).map(tuple))
def test_a_membership_change_is_encoded_as_the_whole_record_encodes_it(permissions: tuple[str, ...]) -> None:
    changes = MembershipChanges.of(permissions=permissions, display_name="x")
    blank = Membership(team_id="t", user_id="u", created_at_millis=0)
    assert _change_fields(changes) == _whole(changes.apply(blank), dataclasses.asdict, ["permissions", "display_name"])
