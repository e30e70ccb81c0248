"""One-time codes, and accepting a TOTP once (the second factor's step)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.records import CodePurpose, User, VerificationCode


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
class CreateVerificationCode(StorageEffect[None]):
    """Store a new one-time code (its hashes never collide: 224 random bits)."""

    project_id: str
    code: VerificationCode


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


@dataclass(frozen=True, slots=True)
class ConsumeVerificationCode(StorageEffect[bool]):
    """Mark a code used. True only for the one caller that found it unused."""

    project_id: str
    code_hash: str


# --------------------------------------------------------------------------------------------------------------
# Signing in with the second factor (reference §2.5)


class TotpAcceptance(Enum):
    """What `AcceptTotp` did, in the order it checks."""

    #: The attempt code was consumed and the step recorded: the sign-in may go on.
    ACCEPTED = "accepted"
    #: The attempt code is missing or was consumed before; nothing written.
    CODE_USED = "code_used"
    #: No user with that id; nothing written.
    USER_NOT_FOUND = "user_not_found"
    #: The user has had a TOTP of this time step or a later one accepted (a replay); nothing written.
    STEP_USED = "step_used"


@dataclass(frozen=True, slots=True)
class AcceptTotp(StorageEffect[TotpAcceptance]):
    """Accept a right TOTP, once: consume the MFA attempt code `code_hash` and record `step` (the TOTP's time
    step) as the user's `totp_last_step`, together, only if the code is unused and `step` is later than the
    user's `totp_last_step`. Of concurrent calls with one code, or with one step for one user, exactly one is
    ACCEPTED: a TOTP signs in once, however many sign-ins present it."""

    project_id: str
    code_hash: str
    user_id: str
    step: int
