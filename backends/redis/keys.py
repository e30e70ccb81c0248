"""Key layout: every key the Redis store uses is named here (`KeySpace`), and this is its table.

Key layout. ``<ns>`` is the namespace prefix (``"identity:"`` by default) and ``<p>`` stands for
``<ns>{p:<project_id>}:``, the prefix of every key of one project. Its hash tag ``{p:<project_id>}`` puts all of
a project's keys in one Redis Cluster slot, so a multi-key script on one project is legal. Record fields marked
JSON hold the JSON text of one field of the record (``"a@b.c"``, ``1700000000123``, ``true``, ``null``, objects).

==============================  ======  ============================================  ===========================
Key                             Type    Holds                                         TTL
==============================  ======  ============================================  ===========================
``<ns>{projects}:index``        SET     The ids of every project. Hash tag            none
                                        ``{projects}``: its own slot, never in a
                                        script together with a project's keys.
``<p>project``                  HASH    The project record: ``id``,                   none
                                        ``display_name``, ``created_at_millis``
                                        (decimal), ``signing_key``, ``keys`` (JSON
                                        object of key hashes), ``config.<name>``
                                        (JSON) per config field.
``<p>code:<code_hash>``         HASH    A one-time code: one JSON field per           PEXPIREAT its
                                        `VerificationCode` field (``used`` is         ``expires_at_millis`` +
                                        ``true``/``false``).                          `GRACE_MS`
``<p>nonce:<nonce_hash>``       STRING  The attempt counter of a nonce (INCR; the     PEXPIREAT the latest
                                        codes of that nonce create it at ``0``).      ``expires_at_millis`` of
                                                                                      its codes + `GRACE_MS`;
                                                                                      1 h (`ORPHAN_NONCE_TTL_MS`)
                                                                                      when an attempt creates it
``<p>user:<user_id>``           HASH    A user: one JSON field per `User` field       none
                                        (``risk_scores`` a JSON object, metadata
                                        any JSON).
``<p>user-by-email``            HASH    The e-mail index: auth e-mail (plain text,    none
                                        the primary e-mail of users whose
                                        ``primary_email_auth_enabled``, and every
                                        stored contact channel used for auth) ->
                                        user id.
``<p>user-order``               ZSET    Every user id, scored by its                  none
                                        ``signed_up_at_millis``. Equal scores order
                                        by member, byte-wise: exactly the
                                        (signed_up_at_millis, id) order of
                                        ListUsers (ZRANK / ZREVRANK of the cursor,
                                        then ZRANGE by rank: O(log n + limit)).
``<p>session:<session_id>``     HASH    A session: one JSON field per `Session`       PEXPIREAT its
                                        field.                                        ``expires_at_millis`` +
                                                                                      `GRACE_MS`
``<p>session-by-token:<hash>``  STRING  The id of the session whose refresh token     PEXPIREAT the session's
                                        hashes to ``<hash>``.                         ``expires_at_millis`` +
                                                                                      `GRACE_MS`
``<p>user-sessions:<user_id>``  SET     The ids of the user's sessions (may hold ids  PEXPIREAT the latest
                                        of sessions gone by TTL; ListSessions skips   ``expires_at_millis`` of
                                        and removes those).                           its sessions + `GRACE_MS`
``<p>outbox``                   LIST    Sent e-mail, newest first: each item the      none (LTRIM to ``keep``)
                                        JSON object of an `Email`, ``to`` its first
                                        member (``code``, ``magic_link`` only when
                                        set).
``<p>events``                   STREAM  Webhook events, oldest first, each appended   ``MAXLEN ~ 100000``;
                                        by the script of the change it describes:     trimmed to the configured
                                        fields ``t`` (type), ``r`` / ``m`` (JSON of   retention by
                                        the record / the selected team, or ''),       `TrimWebhookData`
                                        ``i`` (ids, newline-joined). The entry id
                                        makes the message id ``msg_<tag><id>``.
``<ns>{webhooks}:projects``    SET     The ids of the projects that have a webhook   none
                                        endpoint. Hash tag ``{webhooks}``: its own
                                        slot, never in a script with a project's
                                        keys.
``<p>webhook-endpoints``        HASH    Webhook endpoint id -> its JSON object        none
                                        (`WebhookEndpoint`; the secret as given: a
                                        signature needs it).
``<p>webhook-endpoint-from``    HASH    Endpoint id -> the id of the last             none
                                        ``events`` entry when it was created (it
                                        gets later events only).
``<p>webhook-cursor``           STRING  The fan-out cursor: the id of the last        none
                                        ``events`` entry fanned out.
``<p>webhook-delivery:<d>``     HASH    A delivery; ``<d>`` is the delivery id:       PEXPIRE
                                        the message's entry id with both parts        `SETTLED_DELIVERY_TTL_MS`
                                        zero-padded to 20 digits, ``:``, the          (30 d) once settled (a
                                        endpoint id. Fields ``endpoint_id``,          backstop: `TrimWebhookData`
                                        ``message_id``, ``event_type``, ``state``,    applies the retention);
                                        ``next_attempt_at_millis`` (decimal, '' when  none while pending (PERSIST
                                        settled), ``attempts`` (JSON array),          on replay)
                                        ``created_at_millis``, ``failures`` (since
                                        the schedule (re)started), ``claim`` (the
                                        SHA-256 of the claim token, ''),
                                        ``last_attempt_at_millis``.
``<p>webhook-deliveries:<e>``   ZSET    The padded entry ids of endpoint ``<e>``'s    none (members of deliveries
                                        deliveries, score 0 (byte order: oldest       gone by TTL are skipped,
                                        message first).                               and removed by the trim)
``<p>webhook-due``              ZSET    The ids of pending deliveries, scored by      none
                                        their next attempt (a claimed one's: its
                                        lease's end).
``<p>webhook-pending``          ZSET    The ids of pending deliveries, score 0 (the   none
                                        first: the oldest event still needed).
``<p>webhook-settled``          ZSET    The ids of settled deliveries, scored by      none (trimmed by
                                        their last attempt's time.                    `TrimWebhookData`)
``<p>team:<team_id>``           HASH    A team: one JSON field per `Team` field       none
                                        (metadata any JSON).
``<p>team-order``               ZSET    Every team id, scored by its                  none
                                        ``created_at_millis``.
``<p>membership-seq``           STRING  The project's membership counter: INCR        none
                                        numbers each new membership (its *seq*).
``<p>membership:<seq>``         HASH    A membership: one JSON field per              none
                                        `Membership` field (``permissions`` a JSON
                                        array, kept sorted by the core).
``<p>membership-order``         ZSET    Every membership's seq (decimal), scored by   none
                                        itself: creation order, also within one
                                        millisecond.
``<p>team-members:<team_id>``   ZSET    The user ids of a team's members, each        none
                                        scored by its membership's seq (ZSCORE
                                        finds the membership of (team, user)).
``<p>user-teams:<user_id>``     ZSET    The team ids of a user's memberships, each    none
                                        scored by its membership's seq.
``<p>user-permissions:<uid>``   SET     The project permission ids the user holds     none
                                        directly (permissions group; gone with the
                                        user).
``<p>permission-users``         SET     The ids of users holding any project          none
                                        permission (what a definition's rename or
                                        removal walks).
``<p>api-key:<key_id>``         HASH    An API key: one JSON field per `ApiKey`       none
                                        field (``key_hash`` the SHA-256 of the key,
                                        never the key).
``<p>api-key-by-hash``          HASH    Key hash -> key id (what ``check`` looks      none
                                        up).
``<p>api-keys:<type>:<owner>``  ZSET    The ids of one user's (``user``) or team's    none
                                        (``team``) keys, scored by
                                        ``created_at_millis`` (ZRANGE ... REV: newest
                                        first, ties by id descending).
``<p>invitation:<id>``          STRING  Team invitations: the code hash of the        PEXPIREAT its code's
                                        invitation with this id (its record is        ``expires_at_millis`` +
                                        ``<p>code:<code_hash>``).                     `GRACE_MS`
``<p>team-invitations:<team>``  ZSET    The ids of a team's invitations, scored by    PEXPIREAT the latest
                                        their ``expires_at_millis`` (members gone     ``expires_at_millis`` of
                                        for more than `GRACE_MS` are dropped when     its members + `GRACE_MS`
                                        the next one is added).
``<p>invitations-to:<email>``   ZSET    The ids of the invitations sent to an         as ``team-invitations``
                                        address (as stored: normalised), scored
                                        and kept as ``team-invitations``.
``<p>user-channels:<user_id>``  HASH    A user's contact channels but the primary     none
                                        (which is the user's ``primary_email*``
                                        fields): channel id -> the channel's JSON
                                        object (``id``, ``value``, ``is_verified``,
                                        ``used_for_auth``, ``created_at_millis``).
                                        Their auth addresses are in
                                        ``user-by-email`` too.
``<ns>{oauth-state:<hash>}``   STRING  An OAuth state (the authorize request kept    PX its lifetime +
                                        for its callback), by the SHA-256 of the      `OAUTH_GRACE_MS`
                                        inner state: its JSON object. Its own hash
                                        tag (the callback knows no project), so a
                                        project's reset leaves it to expire.
``<p>oauth-code:<code_hash>``   STRING  An outer authorization code (OAuth): its      PX its lifetime +
                                        JSON object (`OuterCode`).                    `OAUTH_GRACE_MS`
``<p>oauth-index``              HASH    The OAuth index: the provider id and the      none
                                        account id, joined by a newline, of every
                                        sign-in account -> its user's id (the
                                        accounts are the user's ``oauth_accounts``
                                        field, a JSON array).
``<p>oauth-tokens``             HASH    Account row id -> the row's provider          none
                                        tokens, sealed (encrypted) by the core.
``<ns>{mock-oauth}:keys``       STRING  Dev/test mode only, the mock OAuth            none
                                        provider (hash tag ``{mock-oauth}``: its
                                        own slot): its two private signing JWKs
                                        (JSON ``{"es256", "rs256"}``).
``<ns>{mock-oauth}:code:<h>``   STRING  A mock authorization code, by its SHA-256:    PX its lifetime +
                                        the JSON of its `MockAuthorization`.          `OAUTH_GRACE_MS`
``<ns>{mock-oauth}:token:<h>``  STRING  A mock access or refresh token, by its         PX its lifetime +
                                        SHA-256: the JSON of its `MockToken`.         `OAUTH_GRACE_MS`
``<ns>{mock-oauth}:fail:<c>``   STRING  Test hook: how the next token request of      PX its lifetime +
                                        client ``<c>`` fails (``<c>`` empty: any      `OAUTH_GRACE_MS`
                                        client): JSON ``{kind, expires_at_millis}``.
==============================  ======  ============================================  ===========================

Scores are doubles: exact for integers up to 2**53, which every millisecond time and seq is. Memberships are keyed
by seq rather than by (team id, user id), so no id needs escaping to make a key unambiguous; the three membership
indexes are ZSETs scored by seq, so each lists in creation order, never by timestamp.

TTLs only collect garbage: the core judges expiry against the request's clock, and Redis expires keys against its
own. Codes, their nonce counters and sessions are therefore kept `GRACE_MS` (24 h) past their
``expires_at_millis``: in that time an expired code still answers EXPIRED (not NOT_FOUND) and an expired session is
still returned by UseRefreshToken for the core to refuse, as in the memory store, whatever the skew between the two
clocks. Only after the grace period is a code or session gone (NOT_FOUND, None) where the memory store would still
hold it. Counters, sessions and codes are security state: run Redis with ``maxmemory-policy noeviction`` (a
``volatile-*`` policy could evict a nonce counter and reset its attempts). Redis >= 7.0 (PEXPIREAT ... GT).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

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

# --- OAuth storage ---
#: How long Redis keeps a short-lived value (an OAuth state, an outer code, the mock provider's) past its lifetime
#: (the core judges expiry; this only absorbs the skew between the core's clock and Redis's, and then collects the
#: abandoned ones).
OAUTH_GRACE_MS: Final = 60_000
# --- end OAuth storage ---

# --- webhooks ---
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


# --- end webhooks ---

#: Rate-limit counters outlive their window by this much (Redis's clock may differ a little from the core's).
RATE_COUNTER_GRACE_MS: Final = 60_000

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The key names under one namespace (the table in the module docstring).

    The per-record methods called without an id return the prefix that id is appended to (what a script that
    follows a pointer is given in ARGV)."""

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

    # --- webhooks ---
    def events(self, project_id: str) -> str:
        """The project's recorded events (a stream: `lua._EMIT_EVENT` appends, in the script of each change)."""
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

    # --- end webhooks ---

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

    # --- permissions ---

    def user_permissions(self, project_id: str, user_id: str = "") -> str:
        """The project permission ids a user holds directly."""
        return f"{self.prefix(project_id)}user-permissions:{user_id}"

    def permission_users(self, project_id: str) -> str:
        """The ids of users holding any project permission."""
        return self.prefix(project_id) + "permission-users"

    # --- end permissions ---
    # --- API keys ---

    def api_key(self, project_id: str, key_id: str = "") -> str:
        """An API key record."""
        return f"{self.prefix(project_id)}api-key:{key_id}"

    def api_key_by_hash(self, project_id: str) -> str:
        """Key hash -> API key id."""
        return self.prefix(project_id) + "api-key-by-hash"

    def owner_api_keys(self, project_id: str, key_type: str, owner_id: str) -> str:
        """The ids of one owner's API keys (`key_type` user or team), scored by created_at_millis."""
        return f"{self.prefix(project_id)}api-keys:{key_type}:{owner_id}"

    # --- team invitations ---

    def invitation(self, project_id: str, invitation_id: str = "") -> str:
        """The code hash of a team invitation, by its id."""
        return f"{self.prefix(project_id)}invitation:{invitation_id}"

    def team_invitations(self, project_id: str, team_id: str = "") -> str:
        """The ids of a team's invitations, scored by expires_at_millis."""
        return f"{self.prefix(project_id)}team-invitations:{team_id}"

    def invitations_to(self, project_id: str, email: str = "") -> str:
        """The ids of the invitations sent to an address, scored by expires_at_millis."""
        return f"{self.prefix(project_id)}invitations-to:{email}"

    # --- contact channels ---
    def user_channels(self, project_id: str, user_id: str = "") -> str:
        """A user's stored (non-primary) contact channels: channel id -> channel JSON."""
        return f"{self.prefix(project_id)}user-channels:{user_id}"

    # --- end contact channels ---
    # --- mock OAuth provider (dev/test mode only) ---

    def mock_oauth(self, suffix: str) -> str:
        """A key of the mock OAuth provider (hash tag `{mock-oauth}`: its own slot): `keys`, `code:<hash>`,
        `token:<hash>`, `fail:<client id>`."""
        return f"{self.namespace}{{mock-oauth}}:{suffix}"

    # --- end mock OAuth provider ---
    # --- OAuth storage ---

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

    def provider_tokens(self, project_id: str) -> str:
        """Account row id -> the row's sealed provider tokens."""
        return self.prefix(project_id) + "oauth-tokens"

    # --- end OAuth storage ---
