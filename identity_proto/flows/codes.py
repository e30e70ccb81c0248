"""One-time codes (reference §2.1): 45 lower-case Crockford characters; the first 6 are the OTP a person types,
the last 39 the nonce the API returns. Only hashes are stored, and attempts are counted per nonce."""

from __future__ import annotations

from dataclasses import dataclass

from identity_proto.context import RequestContext
from identity_proto.effects import AttemptVerificationCode, CodeAttempt, CodeOutcome, Flow, PutCode, perform
from identity_proto.effects.commit import commit
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.records import CodePurpose, VerificationCode
from identity_proto.tokens import hash_secret, random_string

__all__ = ["CODE_LENGTH", "MAX_ATTEMPTS_PER_NONCE", "OTP_LENGTH", "NewCode", "check_code", "create_code", "new_code"]
__all__ += ["present_code"]
__all__ += ["refused_code"]  # contact channels

CODE_LENGTH = 45
OTP_LENGTH = 6
#: reference §2.1: a code is accepted only while fewer than 20 earlier attempts were made on its nonce.
MAX_ATTEMPTS_PER_NONCE = 20

_OUTCOME_ERRORS = {
    CodeOutcome.NOT_FOUND: ErrorCode.VERIFICATION_CODE_NOT_FOUND,
    CodeOutcome.EXPIRED: ErrorCode.VERIFICATION_CODE_EXPIRED,
    CodeOutcome.ALREADY_USED: ErrorCode.VERIFICATION_CODE_ALREADY_USED,
    CodeOutcome.MAX_ATTEMPTS_REACHED: ErrorCode.VERIFICATION_CODE_MAX_ATTEMPTS_REACHED,
}


@dataclass(frozen=True, slots=True)
class NewCode:
    """A code just made: its plaintext (never stored) and its parts."""

    code: str

    @property
    def otp(self) -> str:
        """The part a person types, upper-cased as mailed."""
        return self.code[:OTP_LENGTH].upper()

    @property
    def nonce(self) -> str:
        """The part the API returns."""
        return self.code[OTP_LENGTH:]


def new_code(
    ctx: RequestContext,
    purpose: CodePurpose,
    lifetime_ms: int,
    *,
    email: str | None = None,
    user_id: str | None = None,
    is_new_user: bool = False,
) -> tuple[NewCode, VerificationCode]:
    """A fresh code and the record to store for it (hashes only)."""
    code = random_string(ctx.entropy, CODE_LENGTH)
    record = VerificationCode(
        code_hash=hash_secret(code),
        nonce_hash=hash_secret(code[OTP_LENGTH:]),
        purpose=purpose,
        created_at_millis=ctx.now_ms,
        expires_at_millis=ctx.now_ms + lifetime_ms,
        email=email,
        user_id=user_id,
        is_new_user=is_new_user,
    )
    return NewCode(code), record


def create_code(
    ctx: RequestContext,
    project_id: str,
    purpose: CodePurpose,
    lifetime_ms: int,
    *,
    email: str | None = None,
    user_id: str | None = None,
    is_new_user: bool = False,
) -> Flow[NewCode]:
    """Make and store a code (a commit's `PutCode`); only its hashes reach the store."""
    code, record = new_code(ctx, purpose, lifetime_ms, email=email, user_id=user_id, is_new_user=is_new_user)
    yield from commit(project_id, writes=(PutCode(record),))
    return code


def check_code(
    ctx: RequestContext, project_id: str, code: str, purpose: CodePurpose, *, consume: bool
) -> Flow[VerificationCode]:
    """Present `code` (case-insensitive): counts an attempt on its nonce, then raises the first failing check
    (404 NOT_FOUND, 400 EXPIRED, 409 ALREADY_USED, 400 MAX_ATTEMPTS_REACHED) or returns the code (consumed if
    asked, atomically: of concurrent callers exactly one gets it)."""
    found = (yield from present_code(ctx, project_id, code, purpose, consume=consume)).code
    if found is None:  # pragma: no cover - present_code answers only a found code
        raise RuntimeError("a code attempt answered OK without the code")
    return found


def present_code(
    ctx: RequestContext, project_id: str, code: str, purpose: CodePurpose, *, consume: bool, with_holder: bool = False
) -> Flow[CodeAttempt]:
    """`check_code`, answering the whole attempt: with `with_holder`, who holds the code's address as well, read
    in the same step (`AttemptVerificationCode`)."""
    code = code.lower()
    attempt = yield from perform(
        AttemptVerificationCode(
            project_id,
            code_hash=hash_secret(code),
            nonce_hash=hash_secret(code[OTP_LENGTH:]),
            purpose=purpose,
            now_ms=ctx.now_ms,
            consume=consume,
            max_attempts=MAX_ATTEMPTS_PER_NONCE,
            with_holder=with_holder,
        )
    )
    if attempt.outcome is not CodeOutcome.OK or attempt.code is None:
        raise KnownError(_OUTCOME_ERRORS.get(attempt.outcome, ErrorCode.VERIFICATION_CODE_NOT_FOUND))
    return attempt


# contact channels
def refused_code(outcome: CodeOutcome) -> KnownError:
    """The error answering a code attempt whose outcome is not OK (as `check_code` raises it), for flows that
    present a code inside an effect of their own (verifying a contact channel consumes and marks in one step)."""
    return KnownError(_OUTCOME_ERRORS.get(outcome, ErrorCode.VERIFICATION_CODE_NOT_FOUND))
