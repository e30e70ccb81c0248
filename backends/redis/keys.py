"""Every key the Redis store uses, named (`KeySpace`); the key layout is the table in `backends/README.md`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from identity_proto.effects import codes as effects_codes
from identity_proto.effects.commit import IndexName
from identity_proto.effects.webhooks import message_tag_of

DEFAULT_NAMESPACE: Final = "identity:"

#: How long Redis keeps a code, its nonce counter and a session after their `expires_at_millis`. The core judges
#: expiry against the request's clock; TTLs only collect garbage, and this grace keeps an expired record around
#: long enough for the core to see it and answer EXPIRED (a code) or refuse it (a session), instead of NOT_FOUND,
#: whatever the skew between the two clocks.
GRACE_MS: Final = 24 * 3_600_000

#: How long a nonce counter lives when an attempt (not a code) creates it: no live code has that nonce, so its
#: count only matters if such a code is created soon after (then the code extends it to its own expiry). The
#: memory store keeps such counters as long.
ORPHAN_NONCE_TTL_MS: Final = effects_codes.ORPHAN_NONCE_TTL_MS

#: How long Redis keeps a short-lived value (an OAuth state, an outer code, the mock provider's) past its lifetime
#: (the core judges expiry; this only absorbs the skew between the core's clock and Redis's, and then collects the
#: abandoned ones).
OAUTH_GRACE_MS: Final = 60_000

#: A settled (succeeded or failed) delivery's hash expires this long after it settled: a backstop to the configured
#: retention, which `TrimWebhookData` applies (normally sooner); a retention set longer keeps them this long only.
SETTLED_DELIVERY_TTL_MS: Final = 30 * 24 * 3_600_000


#: A stream entry id (``<ms>-<seq>``).
_ENTRY_ID: Final = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


def webhook_sortable(entry_id: str) -> str:
    """A stream entry id (``<ms>-<seq>``) as text whose byte order is the ids' order (each part 20 digits)."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms:0>20}-{seq:0>20}"


def webhook_delivery_id(entry_id: str, endpoint_id: str) -> str:
    """The id of a delivery in the webhook keys: the sortable form of its message's stream entry id, ``:``, the
    endpoint id (the first part has a fixed form, so the id is unambiguous)."""
    return f"{webhook_sortable(entry_id)}:{endpoint_id}"


#: Rate-limit counters outlive their window by this much (Redis's clock may differ a little from the core's).
RATE_COUNTER_GRACE_MS: Final = 60_000

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _one(name: str) -> Callable[[KeySpace, str], str]:
    """The project's key `name` (``<p><name>``): a method of `KeySpace` taking the project id."""

    def key(self: KeySpace, project_id: str) -> str:
        return f"{self.namespace}{{p:{project_id}}}:{name}"

    return key


def _each(name: str) -> Callable[[KeySpace, str, str], str]:
    """The project's key `name` of one record (``<p><name>:<id>``): a method of `KeySpace` taking the project id
    and the id; with the id ``""``, the prefix an id is appended to (what a script builds a pointed-to key from)."""

    def key(self: KeySpace, project_id: str, record_id: str) -> str:
        return f"{self.namespace}{{p:{project_id}}}:{name}:{record_id}"

    return key


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The key names under one namespace (the key layout, and what each key holds: `backends/README.md`). Every key
    of a project starts with `prefix` (its hash tag ``{p:<project_id>}``: one Redis Cluster slot)."""

    namespace: str = DEFAULT_NAMESPACE
    #: Whether the keys live on one Redis server (not a Cluster): a script may then touch keys of several hash tags
    #: (a project's and its rate counters': `Admit`).
    one_node: bool = True

    def __post_init__(self) -> None:
        if "{" in self.namespace or "}" in self.namespace:
            raise ValueError("the namespace must not contain '{' or '}' (it would change the hash tags)")

    project = _one("project")
    code = _each("code")
    nonce = _each("nonce")
    user = _each("user")
    users_by_email = _one("user-by-email")
    user_order = _one("user-order")
    session = _each("session")
    session_by_token = _each("session-by-token")
    user_sessions = _each("user-sessions")
    outbox = _one("outbox")
    events = _one("events")  # appended by `lua._EMIT_EVENT`, in the commit of each change
    webhook_endpoints = _one("webhook-endpoints")
    webhook_endpoint_from = _one("webhook-endpoint-from")
    webhook_cursor = _one("webhook-cursor")
    webhook_deliveries = _each("webhook-deliveries")  # per endpoint
    webhook_due = _one("webhook-due")
    webhook_pending = _one("webhook-pending")
    webhook_settled = _one("webhook-settled")
    team = _each("team")
    team_order = _one("team-order")
    membership = _each("membership")  # by its sequence number
    membership_seq = _one("membership-seq")
    membership_order = _one("membership-order")
    team_members = _each("team-members")
    user_teams = _each("user-teams")
    user_permissions = _each("user-permissions")
    permission_users = _one("permission-users")
    api_key = _each("api-key")
    api_key_by_hash = _one("api-key-by-hash")
    invitation = _each("invitation")
    team_invitations = _each("team-invitations")
    invitations_to = _each("invitations-to")
    user_channels = _each("user-channels")
    outer_code = _each("oauth-code")
    oauth_index = _one("oauth-index")
    passkey_index = _one("passkey-index")
    provider_tokens = _one("oauth-tokens")

    @property
    def index(self) -> str:
        """The set of every project id (hash tag `{projects}`)."""
        return f"{self.namespace}{{projects}}:index"

    @property
    def webhook_projects(self) -> str:
        """The set of the ids of projects with a webhook endpoint (hash tag `{webhooks}`: its own slot)."""
        return f"{self.namespace}{{webhooks}}:projects"

    def rate_counter(self, key: str) -> str:
        """A rate-limit counter (identity_proto.ratelimits); its own hash tag, so counters spread over a cluster."""
        return f"{self.namespace}{{{key}}}"

    def clock_override(self) -> str:
        """Dev/test mode: the clock override shared by every worker (hash tag `{clock}`: its own slot)."""
        return f"{self.namespace}{{clock}}:override"

    def mock_oauth(self, suffix: str) -> str:
        """A key of the mock OAuth provider (hash tag `{mock-oauth}`: its own slot): `keys`, `code:<hash>`,
        `token:<hash>`, `fail:<client id>`."""
        return f"{self.namespace}{{mock-oauth}}:{suffix}"

    def oauth_state(self, state_hash: str) -> str:
        """An OAuth state, by the hash of the inner state (the callback knows no project: the key has its own hash
        tag, like a rate counter)."""
        return f"{self.namespace}{{oauth-state:{state_hash}}}"

    def prefix(self, project_id: str) -> str:
        """What every key of the project starts with (its hash tag `{p:<project_id>}` included)."""
        return f"{self.namespace}{{p:{project_id}}}:"

    def project_pattern(self, project_id: str) -> str:
        """A SCAN MATCH pattern for every key of the project (glob characters of the prefix escaped)."""
        return _GLOB_SPECIAL.sub(r"\\\1", self.prefix(project_id)) + "*"

    def owner_api_keys(self, project_id: str, key_type: str, owner_id: str) -> str:
        """The ids of one owner's API keys (`key_type` user or team), scored by created_at_millis."""
        return f"{self.prefix(project_id)}api-keys:{key_type}:{owner_id}"

    def user_index(self, project_id: str, index: IndexName) -> str:
        """One of the project's unique indexes (key -> user id)."""
        if index is IndexName.EMAIL:
            return self.users_by_email(project_id)
        return self.oauth_index(project_id) if index is IndexName.OAUTH else self.passkey_index(project_id)

    def webhook_message_tag(self, project_id: str) -> str:
        """The tag of the project's message ids (`identity_proto.events.message_id`): derived from the namespace and
        the project id, so that two projects' streams (or two deployments' on one Redis) never make one id; the
        stream's entry ids, unique within it and ordered by Redis's clock, tell its messages apart."""
        digest = hashlib.sha256(f"{self.namespace}\0{project_id}".encode()).digest()
        return message_tag_of(digest)

    def webhook_entry_id(self, project_id: str, message_id: str) -> str | None:
        """The stream entry id `message_id` names, when it is one of the project's (its tag), else None. Deliveries
        made before ids had a tag carry ``msg_<entry id>``: read too."""
        tag = "msg_" + self.webhook_message_tag(project_id)
        position = message_id[len(tag) :] if message_id.startswith(tag) else message_id.removeprefix("msg_")
        return position if _ENTRY_ID.fullmatch(position) else None

    def webhook_delivery(self, project_id: str, message_id: str = "", endpoint_id: str = "") -> str:
        """A delivery, by its message id and endpoint id (`webhook_delivery_id` of the message's stream entry id);
        without them, the prefix."""
        entry_id = self.webhook_entry_id(project_id, message_id) if message_id else None
        suffix = webhook_delivery_id(entry_id, endpoint_id) if entry_id else ""
        return f"{self.prefix(project_id)}webhook-delivery:{suffix}"
