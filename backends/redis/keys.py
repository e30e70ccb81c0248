"""Every key the Redis store uses, named (`KeySpace`); the key layout is the table in `backends/README.md`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from identity_proto.effects.commit import IndexName
from identity_proto.effects.webhooks import message_tag_of

DEFAULT_NAMESPACE: Final = "identity:"

#: How long Redis keeps a code, its nonce counter and a session after their `expires_at_millis`. The core judges
#: expiry against the request's clock; TTLs only collect garbage, and this grace keeps an expired record around
#: long enough for the core to see it and answer EXPIRED (a code) or refuse it (a session), instead of NOT_FOUND,
#: whatever the skew between the two clocks.
GRACE_MS: Final = 24 * 3_600_000

#: How long a nonce counter lives when an attempt (not a code) creates it: no live code has that nonce, so its
#: count only matters if such a code is created soon after (then the code extends it to its own expiry).
ORPHAN_NONCE_TTL_MS: Final = 3_600_000

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


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The key names under one namespace (the key layout: `backends/README.md`).

    The per-record methods called without an id return the prefix that id is appended to (what a script builds a
    pointed-to key from)."""

    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if "{" in self.namespace or "}" in self.namespace:
            raise ValueError("the namespace must not contain '{' or '}' (it would change the hash tags)")

    @property
    def index(self) -> str:
        """The set of every project id (hash tag `{projects}`)."""
        return f"{self.namespace}{{projects}}:index"

    def rate_counter(self, key: str) -> str:
        """A rate-limit counter (identity_proto.ratelimits); its own hash tag, so counters spread over a cluster."""
        return f"{self.namespace}{{{key}}}"

    def clock_override(self) -> str:
        """Dev/test mode: the clock override shared by every worker (hash tag `{clock}`: its own slot)."""
        return f"{self.namespace}{{clock}}:override"

    def prefix(self, project_id: str) -> str:
        """What every key of the project starts with (its hash tag `{p:<project_id>}` included)."""
        return f"{self.namespace}{{p:{project_id}}}:"

    def project_pattern(self, project_id: str) -> str:
        """A SCAN MATCH pattern for every key of the project (glob characters of the prefix escaped)."""
        return _GLOB_SPECIAL.sub(r"\\\1", self.prefix(project_id)) + "*"

    def project(self, project_id: str) -> str:
        """The project record (hash tag `{p:<project_id>}`, shared by all of the project's keys)."""
        return self.prefix(project_id) + "project"

    def code(self, project_id: str, code_hash: str) -> str:
        """A one-time code."""
        return f"{self.prefix(project_id)}code:{code_hash}"

    def nonce(self, project_id: str, nonce_hash: str) -> str:
        """The attempt counter of a nonce."""
        return f"{self.prefix(project_id)}nonce:{nonce_hash}"

    def user(self, project_id: str, user_id: str = "") -> str:
        """A user record."""
        return f"{self.prefix(project_id)}user:{user_id}"

    def users_by_email(self, project_id: str) -> str:
        """The e-mail index: auth e-mail -> user id."""
        return self.prefix(project_id) + "user-by-email"

    def session(self, project_id: str, session_id: str = "") -> str:
        """A session record."""
        return f"{self.prefix(project_id)}session:{session_id}"

    def session_by_token(self, project_id: str, refresh_token_hash: str = "") -> str:
        """The id of the session with this refresh token hash."""
        return f"{self.prefix(project_id)}session-by-token:{refresh_token_hash}"

    def user_sessions(self, project_id: str, user_id: str = "") -> str:
        """The ids of a user's sessions."""
        return f"{self.prefix(project_id)}user-sessions:{user_id}"

    def outbox(self, project_id: str) -> str:
        """The project's outbox."""
        return self.prefix(project_id) + "outbox"

    def events(self, project_id: str) -> str:
        """The project's recorded events (a stream: `lua._EMIT_EVENT` appends, in the commit of each change)."""
        return self.prefix(project_id) + "events"

    @property
    def webhook_projects(self) -> str:
        """The set of the ids of projects with a webhook endpoint (hash tag `{webhooks}`: its own slot)."""
        return f"{self.namespace}{{webhooks}}:projects"

    def webhook_endpoints(self, project_id: str) -> str:
        """Endpoint id -> the endpoint's JSON."""
        return self.prefix(project_id) + "webhook-endpoints"

    def webhook_endpoint_from(self, project_id: str) -> str:
        """Endpoint id -> the id of the last stream entry when it was created (it gets later events only)."""
        return self.prefix(project_id) + "webhook-endpoint-from"

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

    def webhook_cursor(self, project_id: str) -> str:
        """The fan-out cursor: the id of the last stream entry fanned out."""
        return self.prefix(project_id) + "webhook-cursor"

    def webhook_delivery(self, project_id: str, message_id: str = "", endpoint_id: str = "") -> str:
        """A delivery, by its message id and endpoint id (`webhook_delivery_id` of the message's stream entry id);
        without them, the prefix."""
        entry_id = self.webhook_entry_id(project_id, message_id) if message_id else None
        suffix = webhook_delivery_id(entry_id, endpoint_id) if entry_id else ""
        return f"{self.prefix(project_id)}webhook-delivery:{suffix}"

    def webhook_deliveries(self, project_id: str, endpoint_id: str = "") -> str:
        """The sortable message ids of an endpoint's deliveries (score 0: newest last in byte order)."""
        return f"{self.prefix(project_id)}webhook-deliveries:{endpoint_id}"

    def webhook_due(self, project_id: str) -> str:
        """The ids of pending deliveries, scored by when their next attempt (or their lease's end) is due."""
        return self.prefix(project_id) + "webhook-due"

    def webhook_pending(self, project_id: str) -> str:
        """The ids of pending deliveries, score 0 (byte order: oldest event first)."""
        return self.prefix(project_id) + "webhook-pending"

    def webhook_settled(self, project_id: str) -> str:
        """The ids of settled deliveries, scored by their last attempt's time (the service's clock)."""
        return self.prefix(project_id) + "webhook-settled"

    def user_order(self, project_id: str) -> str:
        """Every user id, scored by signed_up_at_millis (the order of ListUsers)."""
        return self.prefix(project_id) + "user-order"

    def team(self, project_id: str, team_id: str = "") -> str:
        """A team record."""
        return f"{self.prefix(project_id)}team:{team_id}"

    def team_order(self, project_id: str) -> str:
        """Every team id, scored by created_at_millis."""
        return self.prefix(project_id) + "team-order"

    def membership(self, project_id: str, seq: int | str = "") -> str:
        """A membership record, by its sequence number."""
        return f"{self.prefix(project_id)}membership:{seq}"

    def membership_seq(self, project_id: str) -> str:
        """The counter that numbers the project's memberships."""
        return self.prefix(project_id) + "membership-seq"

    def membership_order(self, project_id: str) -> str:
        """Every membership's sequence number, scored by itself (creation order)."""
        return self.prefix(project_id) + "membership-order"

    def team_members(self, project_id: str, team_id: str = "") -> str:
        """The ids of a team's members, scored by their membership's sequence number."""
        return f"{self.prefix(project_id)}team-members:{team_id}"

    def user_teams(self, project_id: str, user_id: str = "") -> str:
        """The ids of a user's teams, scored by their membership's sequence number."""
        return f"{self.prefix(project_id)}user-teams:{user_id}"

    def user_permissions(self, project_id: str, user_id: str = "") -> str:
        """The project permission ids a user holds directly."""
        return f"{self.prefix(project_id)}user-permissions:{user_id}"

    def permission_users(self, project_id: str) -> str:
        """The ids of users holding any project permission."""
        return self.prefix(project_id) + "permission-users"

    def api_key(self, project_id: str, key_id: str = "") -> str:
        """An API key record."""
        return f"{self.prefix(project_id)}api-key:{key_id}"

    def api_key_by_hash(self, project_id: str) -> str:
        """Key hash -> API key id."""
        return self.prefix(project_id) + "api-key-by-hash"

    def owner_api_keys(self, project_id: str, key_type: str, owner_id: str) -> str:
        """The ids of one owner's API keys (`key_type` user or team), scored by created_at_millis."""
        return f"{self.prefix(project_id)}api-keys:{key_type}:{owner_id}"

    def invitation(self, project_id: str, invitation_id: str = "") -> str:
        """The code hash of a team invitation, by its id."""
        return f"{self.prefix(project_id)}invitation:{invitation_id}"

    def team_invitations(self, project_id: str, team_id: str = "") -> str:
        """The ids of a team's invitations, scored by expires_at_millis."""
        return f"{self.prefix(project_id)}team-invitations:{team_id}"

    def invitations_to(self, project_id: str, email: str = "") -> str:
        """The ids of the invitations sent to an address, scored by expires_at_millis."""
        return f"{self.prefix(project_id)}invitations-to:{email}"

    def user_channels(self, project_id: str, user_id: str = "") -> str:
        """A user's stored (non-primary) contact channels: channel id -> channel JSON."""
        return f"{self.prefix(project_id)}user-channels:{user_id}"

    def mock_oauth(self, suffix: str) -> str:
        """A key of the mock OAuth provider (hash tag `{mock-oauth}`: its own slot): `keys`, `code:<hash>`,
        `token:<hash>`, `fail:<client id>`."""
        return f"{self.namespace}{{mock-oauth}}:{suffix}"

    def oauth_state(self, state_hash: str) -> str:
        """An OAuth state, by the hash of the inner state (the callback knows no project: the key has its own hash
        tag, like a rate counter)."""
        return f"{self.namespace}{{oauth-state:{state_hash}}}"

    def outer_code(self, project_id: str, code_hash: str) -> str:
        """An outer authorization code, by its hash."""
        return f"{self.prefix(project_id)}oauth-code:{code_hash}"

    def oauth_index(self, project_id: str) -> str:
        """The OAuth index: `oauth_index_key(provider id, account id)` of each sign-in account -> user id."""
        return self.prefix(project_id) + "oauth-index"

    def user_index(self, project_id: str, index: IndexName) -> str:
        """One of the project's unique indexes (key -> user id)."""
        return self.users_by_email(project_id) if index is IndexName.EMAIL else self.oauth_index(project_id)

    def provider_tokens(self, project_id: str) -> str:
        """Account row id -> the row's sealed provider tokens."""
        return self.prefix(project_id) + "oauth-tokens"
