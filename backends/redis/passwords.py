"""What the password flows read and commit (the core decides: `identity_proto.flows.passwords`): the holder of an
address with their channels, in one script; a commit's guard on a user's sessions (SCARD and SISMEMBER), a one-time
code stored (the code with its TTL, its nonce counter created once) and a mail appended to the outbox (LPUSH,
LTRIM). No Lua here decides anything.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _email_json, _flat, _json_fields
from backends.redis.commit import Ops, writes
from backends.redis.contact_channels import _LIST_CHANNELS, user_channels
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import _RECORD_JSON
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import FindAuthAddressHolder, PutCode, PutMail, UserChannels

# KEYS: e-mail index. ARGV: the address, user key prefix, channels key prefix. Returns what `list_channels` does
# for the user the index gives the address to ({'none'}: nobody, or a user who is gone).
script(
    "find_auth_address_holder",
    _RECORD_JSON
    + _LIST_CHANNELS
    + """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return {'none'} end
return list_channels(ARGV[2] .. id, ARGV[3] .. id, KEYS[1], {ARGV[1]})
""",
)


@_plans(FindAuthAddressHolder)
def _find_auth_address_holder(keys: KeySpace, effect: FindAuthAddressHolder) -> Plan[UserChannels | None]:
    p = effect.project_id
    reply = yield Script(
        "find_auth_address_holder",
        (keys.users_by_email(p),),
        (effect.email, keys.user(p), keys.user_channels(p)),
    )
    return user_channels(reply)


@writes(PutCode)
def _put_code(ops: Ops, write: PutCode) -> None:
    # TTLs collect garbage only: `GRACE_MS` past the code's expiry (`keys.py`), the nonce counter's at least that.
    space, p, code = ops.space, ops.project_id, write.code
    expires = str(code.expires_at_millis + GRACE_MS)
    code_key = ops.key(space.code(p, code.code_hash))
    nonce_key = ops.key(space.nonce(p, code.nonce_hash))
    items = _flat(_json_fields(dataclasses.asdict(code)))
    ops.writes += [["del", code_key], ["hset", code_key, *items], ["pexpireat", code_key, expires]]
    ops.writes += [["setnx", nonce_key, "0"], ["extend", nonce_key, expires]]


@writes(PutMail)
def _put_mail(ops: Ops, write: PutMail) -> None:
    outbox = ops.key(ops.space.outbox(ops.project_id))
    if write.keep <= 0:
        ops.writes.append(["del", outbox])
        return
    ops.writes += [["lpush", outbox, _email_json(write.mail)], ["ltrim", outbox, "0", str(write.keep - 1)]]
