"""Contact channels (reference part 2 §2): create and update bodies per access type (`is_verified` is the
server's), the list query, the path parameters, the send-verification bodies and the verification code."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from identity_proto.schemas.base import Body, Query, _code_of_45, _email, _optional_uuid_or_me, _uuid_or_me, _web_url
from identity_proto.schemas.teams import _uuid_only


class ClientContactChannelCreateBody(Body):
    """POST /contact-channels from a client: channels it creates start unverified."""

    user_id: str
    type: Literal["email"]
    value: str
    used_for_auth: bool
    is_primary: bool | None = None
    _user = field_validator("user_id")(_uuid_or_me)
    _value = field_validator("value")(_email)


class ServerContactChannelCreateBody(ClientContactChannelCreateBody):
    """POST /contact-channels from a server or admin: may create a channel verified."""

    is_verified: bool | None = None


class ClientContactChannelUpdateBody(Body):
    """PATCH /contact-channels/{user_id}/{contact_channel_id} from a client (every field optional)."""

    value: str | None = None
    type: Literal["email"] | None = None
    used_for_auth: bool | None = None
    is_primary: bool | None = None
    _value = field_validator("value")(_email)


class ServerContactChannelUpdateBody(ClientContactChannelUpdateBody):
    """PATCH /contact-channels/{user_id}/{contact_channel_id} from a server or admin."""

    is_verified: bool | None = None


class ListContactChannelsQuery(Query):
    """GET /contact-channels."""

    user_id: str | None = None
    contact_channel_id: str | None = None
    _user = field_validator("user_id")(_optional_uuid_or_me)
    _channel = field_validator("contact_channel_id")(_uuid_only)


class ContactChannelParams(Query):
    """Path parameters naming one channel: its user (or `me`) and its id (a UUID)."""

    user_id: str
    contact_channel_id: str
    _user = field_validator("user_id")(_uuid_or_me)
    _channel = field_validator("contact_channel_id")(_uuid_only)


class SendChannelVerificationBody(Body):
    """POST /contact-channels/{user_id}/{contact_channel_id}/send-verification-code."""

    callback_url: str = Field(max_length=2048)
    _callback = field_validator("callback_url")(_web_url)


class SendPrimaryVerificationBody(Body):
    """POST /contact-channels/send-verification-code (the legacy form: the user's primary e-mail)."""

    email: str
    callback_url: str = Field(max_length=2048)
    _email_rule = field_validator("email")(_email)
    _callback = field_validator("callback_url")(_web_url)


class VerificationCodeBody(Body):
    """POST /contact-channels/verify and /verify/check-code: the 45-character code the mail's link carries."""

    code: str
    _code = field_validator("code")(_code_of_45)
