"""Records to and from Redis hashes (and outbox items): how a record is written as hash fields, and read back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from identity_proto.changes import MembershipChanges, ProjectConfigChanges, TeamChanges, UserChanges
from identity_proto.records import (
    ApiKey,
    ApiKeyType,
    CodePurpose,
    Email,
    Membership,
    Project,
    ProjectConfig,
    Session,
    Team,
    User,
    VerificationCode,
    config_to_json,
    project_from_json,
    project_to_json,
    user_from_json,
    user_to_json,
)

T = TypeVar("T")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _flat(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Pairs as HSET's arguments."""
    return [item for pair in pairs for item in pair]


def _record_fields(project: Project) -> list[tuple[str, str]]:
    data = project_to_json(project)
    fields = [
        ("id", data["id"]),
        ("display_name", data["display_name"]),
        ("created_at_millis", str(data["created_at_millis"])),
        ("signing_key", data["signing_key"]),
        ("keys", _json(data["keys"])),
    ]
    fields += [(f"config.{name}", _json(value)) for name, value in data["config"].items()]
    return fields


def _config_fields(changes: ProjectConfigChanges) -> list[tuple[str, str]]:
    """The hash fields a PatchProject sets (the change set names only config fields: checked where it was made)."""
    changed = changes.as_dict()
    plain = config_to_json(changes.apply(ProjectConfig()))
    return [(f"config.{name}", _json(plain[name])) for name in changed]


def _items(reply: Any) -> Iterable[tuple[Any, Any]]:
    """A hash's (field, value) pairs, as HGETALL (a dict) or a script (a flat list) returns it."""
    return reply.items() if isinstance(reply, Mapping) else zip(reply[::2], reply[1::2], strict=True)


def _pairs(reply: Any) -> dict[str, str]:
    """A hash (`_items`) in str; {} for nil or empty."""
    return {_text(key): _text(value) for key, value in _items(reply)} if reply else {}


def _project(reply: Any) -> Project | None:
    fields = _pairs(reply)
    if not fields:
        return None
    prefix = "config."
    return project_from_json(
        {
            "id": fields["id"],
            "display_name": fields["display_name"],
            "created_at_millis": int(fields["created_at_millis"]),
            "signing_key": fields["signing_key"],
            "config": {k[len(prefix) :]: orjson.loads(v) for k, v in fields.items() if k.startswith(prefix)},
            "keys": orjson.loads(fields["keys"]),
        }
    )


def _json_fields(record: Any) -> dict[str, str]:
    """A record's hash: one field per record field, holding the field's JSON (a user's as `user_to_json` writes
    it)."""
    data = user_to_json(record) if isinstance(record, User) else dataclasses.asdict(record)
    return {name: _json(value) for name, value in data.items()}


def _decoded(reply: Any) -> dict[str, Any]:
    """A hash of JSON fields (as `_pairs` reads it) decoded; {} for nil or empty. A script may return the record
    as the text of one JSON object instead (`record_json` in `backends.redis.lua`). (orjson reads the values'
    bytes as they come: no text is made of them first.)"""
    if not reply:
        return {}
    if isinstance(reply, (bytes, str)):
        data: dict[str, Any] = orjson.loads(reply)
        return data
    return {_text(name): orjson.loads(value) for name, value in _items(reply)}


def _plain(cls: Any, **convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The decoder of records of `cls` from their hash (`_decoded`; None for none): fields it does not know are
    ignored, missing ones default; `convert` turns a stored value back into its field's type (an enum's value into
    the member, as the memory store holds it; a JSON array into a tuple)."""
    known = frozenset(f.name for f in dataclasses.fields(cls))

    def decode(reply: Any) -> Any:
        data = _decoded(reply)
        if not data:
            return None
        values = {name: value for name, value in data.items() if name in known}
        for name, to in convert.items():
            if name in values:
                values[name] = to(values[name])
        return cls(**values)

    return decode


_code: Callable[[Any], VerificationCode | None] = _plain(VerificationCode, purpose=CodePurpose)
_session: Callable[[Any], Session | None] = _plain(Session)
_team: Callable[[Any], Team | None] = _plain(Team)
_membership: Callable[[Any], Membership | None] = _plain(Membership, permissions=tuple)
_api_key: Callable[[Any], ApiKey | None] = _plain(ApiKey, type=ApiKeyType)
_email: Callable[[Any], Email | None] = _plain(Email)


def _user(reply: Any) -> User | None:
    data = _decoded(reply)
    return user_from_json(data) if data else None


def _required(record: T | None) -> T:
    if record is None:
        raise RuntimeError("the script returned no record")
    return record


def _change_fields(changes: UserChanges | TeamChanges | MembershipChanges) -> list[tuple[str, str]]:
    """The hash fields a commit's PatchUser / PatchTeam / PatchMembership sets: each changed field's JSON, as the
    record's codec (`user_to_json`, `dataclasses.asdict`) would write it in the whole record. orjson writes a nested
    dataclass (`RiskScores`) as that object and a tuple as an array, so encoding the changed values alone gives the
    same text without copying the whole record first (a deep copy of every metadata field: most of a PATCH's
    encoding cost)."""
    return [(name, _json(value)) for name, value in changes.pairs]


def _email_json(email: Email) -> str:
    """An outbox item: the e-mail's JSON object with `to` first (ListOutbox matches on that prefix); the optional
    `code` and `magic_link` only when the mail has them."""
    data = dataclasses.asdict(email)
    for name in ("code", "magic_link"):
        if data[name] is None:
            del data[name]
    return _json({"to": data.pop("to"), **data})


def _outbox_prefix(to: str) -> str:
    return '{"to":' + _json(to) + ","
