"""E-mail: delivering a message (to the outbox in the store, or to the host's mailer), and reading the outbox."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from identity_proto.context import RequestContext
from identity_proto.effects import Flow, ListOutbox, SendEmail, append_outbox, perform
from identity_proto.errors import ErrorCode, KnownError, StorageUnavailable
from identity_proto.http import Response
from identity_proto.records import Email
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid
from identity_proto.users import normalize_email

if TYPE_CHECKING:
    from identity_proto.schemas import OutboxQuery

__all__ = ["deliver", "list_outbox", "new_email", "outbox_item"]

logger = logging.getLogger("identity_proto")


def new_email(
    ctx: RequestContext, to: str, subject: str, text: str, *, code: str | None = None, magic_link: str | None = None
) -> Email:
    """An e-mail stamped with a fresh id and the request's time (with the code and magic link it carries, if any)."""
    return Email(
        id=new_uuid(ctx.entropy),
        to=to,
        subject=subject,
        text=text,
        created_at_millis=ctx.now_ms,
        code=code,
        magic_link=magic_link,
    )


def deliver(ctx: RequestContext, project_id: str, email: Email) -> Flow[None]:
    """Send `email` where the service is configured to: kept in the project's outbox, or handed to the mailer.
    A mailer failure is 502 EMAIL_DELIVERY_FAILED: the caller learns that no mail went out."""
    if ctx.options.mail_delivery == "outbox":
        yield from append_outbox(project_id, email)
        return
    try:
        yield from perform(SendEmail(email))
    except StorageUnavailable:
        raise
    except Exception as exc:
        # The message text carries a code: log only what failed, never what was in it.
        logger.warning("e-mail delivery failed (request %s): %s", ctx.request_id, type(exc).__name__)
        raise KnownError(ErrorCode.EMAIL_DELIVERY_FAILED) from None


def list_outbox(ctx: RequestContext[None, OutboxQuery]) -> Flow[Response]:
    """GET /emails/outbox?to= (server, admin): mail kept for this project, newest first. A sign-in mail's `code`
    (the 6 characters a person types) and `magic_link` are fields of their own; null on mail without them."""
    auth = ctx.require_auth()
    query: OutboxQuery = ctx.query
    to = normalize_email(query.to) if query.to else None
    emails = yield from perform(ListOutbox(auth.project.id, to, query.limit))
    return json_response(200, {"items": [outbox_item(e) for e in emails], "is_paginated": False})


def outbox_item(email: Email) -> dict[str, Any]:
    """One mail as GET /emails/outbox lists it (also what the in-process fake's `TestProject.outbox` returns)."""
    return {
        "id": email.id,
        "to": email.to,
        "subject": email.subject,
        "text": email.text,
        "created_at_millis": email.created_at_millis,
        "code": email.code,
        "magic_link": email.magic_link,
    }
