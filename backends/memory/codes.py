"""The memory store: presenting a one-time code (a commit stores one: `PutCode`)."""

from __future__ import annotations

from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import AddressHolder, AttemptVerificationCode, CodeAttempt, CodeOutcome
from identity_proto.records import VerificationCode, replaced

#: Expired codes are swept every this many new codes (the core judges expiry; this only frees memory).
_SWEEP_EVERY = 1024


def put_code(tenant: Tenant, code: VerificationCode) -> None:
    """Store a code in place of one with its hash (a commit's `PutCode`)."""
    tenant.codes[code.code_hash] = code
    tenant.codes_created += 1
    if tenant.codes_created % _SWEEP_EVERY == 0:
        now = code.created_at_millis
        expired = [h for h, c in tenant.codes.items() if c.expires_at_millis <= now]
        for code_hash in expired:
            nonce_hash = tenant.codes.pop(code_hash).nonce_hash
            if not any(c.nonce_hash == nonce_hash for c in tenant.codes.values()):
                tenant.nonce_attempts.pop(nonce_hash, None)


@_performs(AttemptVerificationCode)
def _attempt_code(store: MemoryStore, effect: AttemptVerificationCode) -> CodeAttempt:
    tenant = store.tenant(effect.project_id)
    before = tenant.nonce_attempts.get(effect.nonce_hash, 0)
    tenant.nonce_attempts[effect.nonce_hash] = before + 1
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.purpose != effect.purpose:
        return CodeAttempt(CodeOutcome.NOT_FOUND)
    if effect.now_ms >= code.expires_at_millis:
        return CodeAttempt(CodeOutcome.EXPIRED, code)
    if code.used:
        return CodeAttempt(CodeOutcome.ALREADY_USED, code)
    if before >= effect.max_attempts:
        return CodeAttempt(CodeOutcome.MAX_ATTEMPTS_REACHED, code)
    if effect.consume:
        tenant.codes[code.code_hash] = replaced(code, {"used": True})
    holder = None
    if effect.with_holder and code.email is not None:
        holder_id = tenant.email_index.get(code.email)
        holder = AddressHolder(holder_id, None if holder_id is None else tenant.users.get(holder_id))
    return CodeAttempt(CodeOutcome.OK, code, holder)
