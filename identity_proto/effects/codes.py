"""Presenting a one-time code (stored by a commit's `PutCode`, used by its `UseCode` under `CodeIsUnused`)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.records import CodePurpose, User, VerificationCode

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


#: How long a store keeps the attempt count of a nonce that no code has (an attempt made it): only a code made with
#: that nonce soon after would read it (and then keeps it as long as the code). Guessed nonces cost this much, no
#: more.
ORPHAN_NONCE_TTL_MS = 3_600_000


class CodeOutcome(Enum):
    """The result of presenting a one-time code, in the order the checks run (reference §2.1)."""

    #: The code is valid (and was consumed, if asked).
    OK = "ok"
    #: No code with this hash and purpose exists.
    NOT_FOUND = "not_found"
    #: The code's lifetime is over.
    EXPIRED = "expired"
    #: The code was consumed before.
    ALREADY_USED = "already_used"
    #: Its nonce had already seen the maximum number of attempts before this one.
    MAX_ATTEMPTS_REACHED = "max_attempts_reached"


@dataclass(frozen=True, slots=True)
class AddressHolder:
    """Who the e-mail index gave a code's address to, read in the step that accepted the code: the id the entry
    names (None: the address is free) and that user as stored (None when the entry names nobody)."""

    user_id: str | None
    user: User | None


@dataclass(frozen=True, slots=True)
class CodeAttempt:
    """What `AttemptVerificationCode` found: the outcome and, when the code exists, the code as it was; with
    `with_holder`, on OK, who holds the code's address (`AddressHolder`), else None."""

    outcome: CodeOutcome
    code: VerificationCode | None = None
    holder: AddressHolder | None = None


@dataclass(frozen=True, slots=True)
class AttemptVerificationCode(StorageEffect[CodeAttempt]):
    """Present a code, atomically:

    1. count one attempt on the nonce (`nonce_hash`), remembering the count from before;
    2. look the code up by `code_hash`; a code of another purpose counts as not found;
    3. outcome, first match wins: NOT_FOUND, EXPIRED (`now_ms >= expires_at_millis`), ALREADY_USED,
       MAX_ATTEMPTS_REACHED (count before >= `max_attempts`), else OK;
    4. on OK with `consume`, mark the code used: of concurrent attempts exactly one gets OK;
    5. on OK with `with_holder`, read who the e-mail index gives the code's `email` to (`CodeAttempt.holder`): a
       read in the same step, so a code sign-in reads the address's holder without a round trip of its own.
    """

    project_id: str
    code_hash: str
    nonce_hash: str
    purpose: CodePurpose
    now_ms: int
    consume: bool
    max_attempts: int = 20
    with_holder: bool = False
