"""E-mail: the outbox of sent mail, and handing mail to the host's mailer."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from identity_proto.effects.base import Flow, MailEffect, StorageEffect
from identity_proto.effects.commit import commit
from identity_proto.effects.passwords import PutMail
from identity_proto.records import Email

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


def append_outbox(project_id: str, email: Email, keep: int = 1000) -> Flow[None]:
    """Keep a sent e-mail in the project's outbox (the oldest go once a project holds `keep` of them): a commit's
    `PutMail`."""
    yield from commit(project_id, writes=(PutMail(email, keep),))


@dataclass(frozen=True, slots=True)
class ListOutbox(StorageEffect[tuple[Email, ...]]):
    """The project's outbox, newest first, only mail to `to` when given, at most `limit` items."""

    project_id: str
    to: str | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class SendEmail(MailEffect[None]):
    """Deliver an e-mail through the host's mailer; a failure raises (the flow turns it into an error)."""

    email: Email = field(repr=False)
