"""Webhook events (reference part 2 §8): what the stores record with each change, and how a recorded event becomes
the `{"type", "data"}` payload receivers get.

The transactional outbox: a store records an event *inside the atomic step of the change it describes* (the same
lock on the memory store, the same Lua script on Redis), so a change is never acknowledged without its event and
no event exists for a change that did not happen. What the store records is not the rendered payload (rendering is
the core's business, and a Lua script cannot do it) but a `StoredEvent`: the event type, the changed record as the
store holds it at that moment (a user's or team's stored fields; on Redis the JSON text `record_json` makes of its
hash), and the ids the payload names. `event_data` renders it as the original does, whenever it is delivered: the
payload is the state right after the change, not the state at delivery.

Which write records which events is each store's handler's business, following the table below exactly; the
contract suite checks every store against it. A store records them only while the project has a webhook endpoint
(`Commit`): nobody else is owed them.
"""

from __future__ import annotations

from typing import Any

import orjson

from identity_proto.effects.webhooks import MESSAGE_TAG_LENGTH, message_id, message_position, new_message_tag
from identity_proto.records import StoredEvent

__all__ = [
    "EVENT_TYPES",
    "MESSAGE_TAG_LENGTH",
    "TEST_EVENT_TYPE",
    "StoredEvent",
    "event_data",
    "event_payload",
    "message_id",
    "message_position",
    "new_message_tag",
]

#: Event type -> what its `StoredEvent` holds, and when it is recorded (reference §8). `record`: the record's
#: stored fields; `ids`: the ids, in this order.
EVENT_TYPES: dict[str, str] = {
    "user.created": "record=user (selected team: none, recorded before the personal team); every user created: "
    "POST /users, every sign-up (code, password, anonymous, OAuth)",
    "user.updated": "record=user, team=selected team; every PATCH /users/{id|me} (even one that changes nothing), "
    "an anonymous upgrade, a password reset",
    "user.deleted": "ids=(user_id, *team_ids of the teams they were a member of); after one "
    "team_membership.deleted per team",
    "team.created": "record=team; POST /teams, a personal team",
    "team.updated": "record=team; PATCH /teams/{id}",
    "team.deleted": "ids=(team_id,)",
    "team_membership.created": "ids=(team_id, user_id); a membership added (invitation accepted included; not the "
    "creator's at team creation)",
    "team_membership.deleted": "ids=(team_id, user_id); a membership removed, a user's deletion",
    "team_permission.created": "ids=(permission_id, team_id, user_id); an explicit grant, and one per default "
    "permission of a membership added",
    "team_permission.deleted": "ids=(permission_id, team_id, user_id); an explicit revoke",
    "project_permission.created": "ids=(permission_id, user_id); an explicit grant (not sign-up defaults)",
    "project_permission.deleted": "ids=(permission_id, user_id); an explicit revoke",
}

#: The test event (`POST /webhook-endpoints/{id}/test`, `POST /internal/send-test-webhook`): never recorded by a
#: change; its `record` is the JSON text of its data.
TEST_EVENT_TYPE = "stack.test"


def _loaded(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def event_data(event: StoredEvent, config: Any) -> dict[str, Any]:
    """The `data` of `event` as the original sends it (server access rendering), for a project with `config`."""
    from identity_proto.auth import AccessType
    from identity_proto.records import Team, User, user_from_json
    from identity_proto.render import render_team, render_user

    kind = event.type
    if kind in ("user.created", "user.updated"):
        record = _loaded(event.record)
        user = record if isinstance(record, User) else user_from_json(record)
        team = _loaded(event.team)
        if team is not None and not isinstance(team, Team):
            team = Team(**team)
        return render_user(user, AccessType.SERVER, config, team)
    if kind in ("team.created", "team.updated"):
        record = _loaded(event.record)
        team = record if isinstance(record, Team) else Team(**record)
        return render_team(team, AccessType.SERVER)
    if kind == "user.deleted":
        return {"id": event.ids[0], "teams": [{"id": team_id} for team_id in event.ids[1:]]}
    if kind == "team.deleted":
        return {"id": event.ids[0]}
    if kind.startswith("team_membership."):
        return {"team_id": event.ids[0], "user_id": event.ids[1]}
    if kind.startswith("team_permission."):
        return {"id": event.ids[0], "team_id": event.ids[1], "user_id": event.ids[2]}
    if kind.startswith("project_permission."):
        return {"id": event.ids[0], "user_id": event.ids[1]}
    if kind == TEST_EVENT_TYPE:
        data: dict[str, Any] = _loaded(event.record)
        return data
    raise ValueError(f"unknown event type {kind!r}")


def event_payload(event: StoredEvent, config: Any) -> bytes:
    """The exact body receivers get (and sign over): `{"type": ..., "data": ...}` as compact JSON."""
    return orjson.dumps({"type": event.type, "data": event_data(event, config)})
