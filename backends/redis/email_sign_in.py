"""Signing in by e-mail: the sign-in code (refused for an unverified holder or a closed sign-up). Signing in with
it is the core's decision and one `Commit` (`identity_proto.flows.otp.sign_in_by_email`).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _flat, _json_fields, _text
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import _ADDRESS_VERIFIED, _CREATE_CODE, _EXTEND_EXPIRY
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import CreateSignInCode, EmailRefusal

# KEYS: code, nonce counter, e-mail index. ARGV: expires_at_millis, the code's e-mail, user key prefix,
# sign-up enabled (1/0), contact channels key prefix, then field, value, ... of the code. Whether the address is
# verified is its channel's (the primary, or another auth channel of the user). Returns 'ok' (stored), or 'unverified' /
# 'sign_up_disabled' (nothing written).
script(
    "create_sign_in_code",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + _ADDRESS_VERIFIED
    + """
local uid = redis.call('HGET', KEYS[3], ARGV[2])
if uid and redis.call('EXISTS', ARGV[3] .. uid) == 1 then
  if not address_verified(ARGV[3] .. uid, ARGV[5] .. uid, ARGV[2]) then return 'unverified' end
elseif ARGV[4] ~= '1' then
  return 'sign_up_disabled'
end
create_code(KEYS[1], KEYS[2], ARGV[1], {unpack(ARGV, 6)})
return 'ok'
""",
)


@_plans(CreateSignInCode)
def _create_sign_in_code(keys: KeySpace, effect: CreateSignInCode) -> Plan[EmailRefusal | None]:
    code, project_id = effect.code, effect.project_id
    reply = yield Script(
        "create_sign_in_code",
        (
            keys.code(project_id, code.code_hash),
            keys.nonce(project_id, code.nonce_hash),
            keys.users_by_email(project_id),
        ),
        (
            code.expires_at_millis + GRACE_MS,
            code.email or "",
            keys.user(project_id),
            1 if effect.sign_up_enabled else 0,
            keys.user_channels(project_id),
            *_flat(_json_fields(dataclasses.asdict(code))),
        ),
    )
    outcome = _text(reply)
    return None if outcome == "ok" else EmailRefusal(outcome)
