"""One-time codes and their nonce counters; TOTP acceptance (the MFA attempt code and the user's last step).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _code, _flat, _json, _json_fields, _text, _user
from backends.redis.keys import GRACE_MS, ORPHAN_NONCE_TTL_MS, KeySpace
from backends.redis.lua import _ATTEMPT_CODE, _CREATE_CODE, _EXTEND_EXPIRY, _FIELDS
from backends.redis.plan import Arg, Plan, Script, _plans, script
from identity_proto.effects import (
    AcceptTotp,
    AddressHolder,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    ConsumeVerificationCode,
    CreateVerificationCode,
    TotpAcceptance,
)

# KEYS: code, nonce counter. ARGV: expires_at_millis, then field, value, ... of the code.
script(
    "create_code",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + """
create_code(KEYS[1], KEYS[2], ARGV[1], {unpack(ARGV, 2)})
return 1
""",
)


@_plans(CreateVerificationCode)
def _create_code(keys: KeySpace, effect: CreateVerificationCode) -> Plan[None]:
    code = effect.code
    args: tuple[Arg, ...] = (code.expires_at_millis + GRACE_MS, *_flat(_json_fields(dataclasses.asdict(code))))
    yield Script(
        "create_code",
        (keys.code(effect.project_id, code.code_hash), keys.nonce(effect.project_id, code.nonce_hash)),
        args,
    )


# KEYS: code, nonce counter, and with the holder: the e-mail index. ARGV: purpose (JSON), now_ms, max_attempts,
# consume (1/0), orphan TTL (ms), and with the holder: the user key prefix. Returns {outcome} or {outcome, code as
# it was}, on OK with the holder followed by {id the index names for the code's e-mail, or false; that user's
# fields}; the checks run in the contract's order.
script(
    "attempt_code",
    _FIELDS
    + _ATTEMPT_CODE
    + """
local reply, f = attempt_code(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if reply[1] == 'ok' and #KEYS > 2 then
  local email = f['email'] and cjson.decode(f['email'])
  local id = type(email) == 'string' and redis.call('HGET', KEYS[3], email)
  reply[3] = id or false
  reply[4] = id and redis.call('HGETALL', ARGV[6] .. id) or {}
end
return reply
""",
)


@_plans(AttemptVerificationCode)
def _attempt_code(keys: KeySpace, effect: AttemptVerificationCode) -> Plan[CodeAttempt]:
    p = effect.project_id
    script_keys: tuple[str, ...] = (keys.code(p, effect.code_hash), keys.nonce(p, effect.nonce_hash))
    args: tuple[Arg, ...] = (_json(effect.purpose), effect.now_ms, effect.max_attempts, 1 if effect.consume else 0)
    args += (ORPHAN_NONCE_TTL_MS,)
    if effect.with_holder:
        script_keys += (keys.users_by_email(p),)
        args += (keys.user(p),)
    reply = yield Script("attempt_code", script_keys, args)
    outcome = CodeOutcome(_text(reply[0]))
    code = _code(reply[1]) if len(reply) > 1 else None
    holder = None
    if outcome is CodeOutcome.OK and effect.with_holder and code is not None and code.email is not None:
        holder_id = _text(reply[2]) if len(reply) > 2 and reply[2] else None
        holder = AddressHolder(holder_id, _user(reply[3]) if holder_id is not None else None)
    return CodeAttempt(outcome, code, holder)


# KEYS: code. Returns 1 if this call marked it used, 0 if it is missing or was used.
script(
    "consume_code",
    """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'used') == 'true' then return 0 end
redis.call('HSET', KEYS[1], 'used', 'true')
return 1
""",
)


@_plans(ConsumeVerificationCode)
def _consume_code(keys: KeySpace, effect: ConsumeVerificationCode) -> Plan[bool]:
    return bool((yield Script("consume_code", (keys.code(effect.project_id, effect.code_hash),))))


# KEYS: MFA attempt code, user. ARGV: the TOTP's time step (decimal). Returns 'accepted' (code marked used and
# the step stored as the user's totp_last_step), or 'code_used' / 'user_not_found' / 'step_used' (nothing
# written), checked in that order.
script(
    "accept_totp",
    """
local used = redis.call('HGET', KEYS[1], 'used')
if not used or used == 'true' then return 'code_used' end
if redis.call('EXISTS', KEYS[2]) == 0 then return 'user_not_found' end
local last = redis.call('HGET', KEYS[2], 'totp_last_step')
if last and last ~= 'null' and tonumber(last) >= tonumber(ARGV[1]) then return 'step_used' end
redis.call('HSET', KEYS[1], 'used', 'true')
redis.call('HSET', KEYS[2], 'totp_last_step', ARGV[1])
return 'accepted'
""",
)


@_plans(AcceptTotp)
def _accept_totp(keys: KeySpace, effect: AcceptTotp) -> Plan[TotpAcceptance]:
    code_key = keys.code(effect.project_id, effect.code_hash)
    user_key = keys.user(effect.project_id, effect.user_id)
    return TotpAcceptance(_text((yield Script("accept_totp", (code_key, user_key), (str(effect.step),)))))
