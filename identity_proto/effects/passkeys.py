"""Passkey storage effects (`identity_proto.flows.passkeys`).

A user's passkeys live on the user record (`User.passkeys`), so every user read renders `passkey_auth_enabled`.
The project's passkey index maps each passkey's credential id to its user: sign-in looks it up, and no two
passkeys of a project share a credential id. They are written by commits (`SetPasskeys`, with `SetIndex` /
`DropIndex` on `IndexName.PASSKEY`), guarded on the list the flow decided on (`FieldsAre(user, ("passkeys",))`):
a sign-in's new signature counter is such a write, so of two concurrent sign-ins deciding on one counter one
re-runs and meets the other's. The challenges are one-time codes (`CodePurpose.PASSKEY_REGISTRATION`,
`PASSKEY_AUTHENTICATION`: `PutCode`, `AttemptVerificationCode`), stored as hashes like every other code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.effects.commit import CommitWrite, IndexName
from identity_proto.effects.users import FindUserByIndex
from identity_proto.records import Passkey

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = ["SetPasskeys", "find_user_by_passkey"]


@dataclass(frozen=True, slots=True)
class SetPasskeys(CommitWrite):
    """A commit's write: the user's passkeys become `passkeys` (a change set never sets them; guard the list the
    flow decided on with `FieldsAre(user, ("passkeys",))`). The passkey index is the flow's to keep in step
    (`SetIndex`, `DropIndex` on `IndexName.PASSKEY`)."""

    user_id: str
    passkeys: tuple[Passkey, ...]


def find_user_by_passkey(project_id: str, credential_id: str) -> FindUserByIndex:
    """The user holding the passkey whose credential id (base64url) is `credential_id`."""
    return FindUserByIndex(project_id, IndexName.PASSKEY, credential_id)
