"""Team invitations (reference part 2 §3)."""

from __future__ import annotations

from pydantic import Field, field_validator

from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _code_of_45,
    _email,
    _optional_uuid_or_me,
    _uuid_or_me,
    _web_url,
    documented,
    is_uuid,
)


@documented({"pattern": UUID_PATTERN})
def _uuid_only(value: str | None) -> str | None:
    if value is not None and not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


class SendTeamInvitationBody(Body):
    """POST /team-invitations/send-code."""

    team_id: str
    email: str
    callback_url: str = Field(max_length=2048)
    _team = field_validator("team_id")(_uuid_only)
    _email_rule = field_validator("email")(_email)
    _callback = field_validator("callback_url")(_web_url)


class TeamInvitationCodeBody(Body):
    """POST /team-invitations/accept, /accept/check-code and /accept/details: the code of the mailed link."""

    code: str
    _code = field_validator("code")(_code_of_45)


class ListTeamInvitationsQuery(Query):
    """GET /team-invitations: exactly one of `team_id` and `user_id` (the flow says which is missing)."""

    team_id: str | None = None
    user_id: str | None = None
    _team = field_validator("team_id")(_uuid_only)
    _user = field_validator("user_id")(_optional_uuid_or_me)


class RevokeTeamInvitationQuery(Query):
    """DELETE /team-invitations/{id}: the team the invitation is of (required; the flow answers its absence)."""

    team_id: str | None = None
    _team = field_validator("team_id")(_uuid_only)


class AcceptTeamInvitationQuery(Query):
    """POST /team-invitations/{id}/accept: who accepts (`me` or a user id)."""

    user_id: str
    _user = field_validator("user_id")(_uuid_or_me)


class TeamInvitationIdParams(Query):
    """Path parameters naming an invitation."""

    invitation_id: str
    _id = field_validator("invitation_id")(_uuid_only)
