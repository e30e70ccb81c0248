"""Presenting a one-time code: its nonce's attempt counter, and using it (a commit stores one: `PutCode`)."""

from __future__ import annotations

from backends.redis.codecs import _code, _json, _text, _user
from backends.redis.keys import ORPHAN_NONCE_TTL_MS, KeySpace
from backends.redis.lua import _FIELDS
from backends.redis.plan import Arg, Plan, Script, _plans, script
from identity_proto.effects import AddressHolder, AttemptVerificationCode, CodeAttempt, CodeOutcome

# KEYS: code, nonce counter, and with the holder: the e-mail index. ARGV: purpose (JSON), now_ms, max_attempts,
# consume (1/0), orphan TTL (ms), and with the holder: the user key prefix. Counts an attempt on the nonce, then
# returns {outcome} or {outcome, code as it was}, on OK with the holder followed by {id the index names for the
# code's e-mail, or false; that user's fields}; the checks run in the contract's order, on the arguments given.
script(
    "attempt_code",
    _FIELDS
    + """
local before = redis.call('INCR', KEYS[2]) - 1
if redis.call('PTTL', KEYS[2]) == -1 then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
local code = redis.call('HGETALL', KEYS[1])
local f = fields(code)
if #code == 0 or f['purpose'] ~= ARGV[1] then return {'not_found'} end
if tonumber(ARGV[2]) >= tonumber(f['expires_at_millis']) then return {'expired', code} end
if f['used'] == 'true' then return {'already_used', code} end
if before >= tonumber(ARGV[3]) then return {'max_attempts_reached', code} end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'used', 'true') end
local reply = {'ok', code}
if #KEYS > 2 then
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
        args += (keys.user(p, ""),)
    reply = yield Script("attempt_code", script_keys, args)
    outcome = CodeOutcome(_text(reply[0]))
    code = _code(reply[1]) if len(reply) > 1 else None
    holder = None
    if outcome is CodeOutcome.OK and effect.with_holder and code is not None and code.email is not None:
        holder_id = _text(reply[2]) if len(reply) > 2 and reply[2] else None
        holder = AddressHolder(holder_id, _user(reply[3]) if holder_id is not None else None)
    return CodeAttempt(outcome, code, holder)
