"""The in-process fake: `IdentityFake`, its `FakeClock` and its `TestProject`s (import them from `identity_testing`;
see its docstring)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import orjson
import pyotp

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT, Settings, SystemEntropy, wall_clock_ms
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import (
    Entropy,
    IssuedKeys,
    Request,
    Response,
    SeededEntropy,
    Service,
    run,
)
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import (
    ApiKeyWrite,
    DeleteProject,
    Flow,
    ListOutbox,
    LoadClockOverride,
    LoadProject,
    LoadUser,
    ResetProjectData,
    SetClockOverride,
    create_project,
    perform,
    update_project,
)
from identity_proto.effects.webhooks import ListDeliveries, ListEvents, ListWebhookEndpoints  # webhooks
from identity_proto.events import event_data  # webhooks
from identity_proto.flows.emails import outbox_item
from identity_proto.flows.portability import export_project_data, import_project_data
from identity_proto.flows.projects import new_project
from identity_proto.flows.webhook_delivery import WebhookDelivery  # webhooks
from identity_proto.flows.webhooks import render_delivery  # webhooks
from identity_proto.oauth import MOCK_CLIENT_ID, PROVIDER_TYPES
from identity_proto.records import (
    ApiKeyType,
    ClockOverride,
    Email,
    OAuthProviderConfig,
    ProjectConfig,
    TrustedDomain,
)
from identity_proto.tokens import secret_matches
from identity_proto.users import checked_email
from identity_testing.direct import DirectClient
from identity_testing.webhooks import (
    InProcessWebhookSender,
    ReceiverKind,
    RecordingReceiver,
    WebhookReceiver,
    receiver_kind,
)

if TYPE_CHECKING:
    import httpx  # imported where a client or a URL is made: a test through `DirectClient` never needs it
    import jwt

    from identity_testing.passkeys import PasskeyAuthenticator

__all__ = ["FakeClock", "IdentityFake", "OAuthFlowError", "TestProject"]

BASE_URL = "http://identity.test"
#: The Host header of requests to BASE_URL (a `DirectClient`'s, as httpx sends it).
BASE_HOST = urlsplit(BASE_URL).netloc
#: How the fake sends webhooks (`IdentityFake(webhooks=...)`): "manual" at `deliver_webhooks()`, "sync" also after
#: every request through its clients.
WEBHOOK_MODES = ("manual", "sync")  # webhooks


def _link_code(link: str) -> str:
    """The full 45-character code a magic link carries in its `code` parameter."""
    return dict(parse_qsl(urlsplit(link).query))["code"]


def _sign_in_code(mail: Mapping[str, Any]) -> str | None:
    """A sign-in mail's code as the sign-in endpoint takes it: the 6 characters the mail shows, then the nonce."""
    if mail.get("code") and mail.get("magic_link"):
        return str(mail["code"]) + _link_code(mail["magic_link"])[6:]
    return None


def _whole_link_code(subject: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The reader of a kind of mail known by how its subject starts, whose code is the whole code of its link."""

    def read(mail: Mapping[str, Any]) -> str | None:
        if str(mail.get("subject", "")).startswith(subject) and mail.get("magic_link"):
            return _link_code(mail["magic_link"])
        return None

    return read


#: The kinds of code `TestProject.last_code` finds: kind -> how to read that kind's code from a mail (None: the mail
#: is of another kind). One entry per kind of code the service mails (the subjects of reference part 2 §0).
CODE_KINDS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "sign_in": _sign_in_code,
    "team_invitation": _whole_link_code("You have been invited to join "),
    "password_reset": _whole_link_code("Reset your password at "),
    "email_verification": _whole_link_code("Verify your email at "),
}


# --- OAuth (the mock provider) ---


class OAuthFlowError(AssertionError):
    """`TestProject.oauth_sign_in` ended elsewhere than at the app's redirect URI with a code: an error redirect
    (`error_code`, `message` and `details` are its `errorCode`, `message` and `details`), or an answer that is no
    redirect at all (`error_code` is then the `x-service-known-error` header, if any; `status` is its status)."""

    def __init__(
        self, step: str, status: int, error_code: str | None, message: str, details: Any = None, body: str = ""
    ) -> None:
        super().__init__(f"OAuth sign-in failed at {step} ({status}): {error_code or 'no error code'}: {message}")
        self.step = step
        self.status = status
        self.error_code = error_code
        self.message = message
        self.details = details
        self.body = body


class _LoginForm(HTMLParser):
    """The mock provider's login form, as a browser reads it: its action and its inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {name: value or "" for name, value in attrs}
        if tag == "form" and self.action is None:
            self.action = named.get("action", "")
        elif tag == "input" and named.get("name"):
            self.fields[named["name"]] = named.get("value", "")


def _pkce_pair(entropy: Entropy) -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = base64.urlsafe_b64encode(entropy.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


# --- end OAuth (the mock provider) ---


class FakeClock:
    """The service's clock: the host's time until frozen, set or advanced. Codes, access tokens and sessions expire
    against it exactly as against real time. (Kept in the store, like the HTTP clock routes.)"""

    def __init__(self, fake: IdentityFake) -> None:
        self._fake = fake

    def _override(self) -> ClockOverride | None:
        return run(perform(LoadClockOverride()), self._fake.store)

    def now_ms(self) -> int:
        """The service's time, in milliseconds since the epoch."""
        override = self._override()
        host = wall_clock_ms()
        return host if override is None else override.now(host)

    def freeze(self, at_ms: int | None = None) -> int:
        """Stop the clock (at `at_ms`, or now); returns the frozen time."""
        at = self.now_ms() if at_ms is None else at_ms
        self._store(ClockOverride(frozen_ms=at))
        return at

    def set(self, when: int | dt.datetime) -> None:
        """Jump to `when` (milliseconds or an aware datetime), staying frozen if frozen, running if running."""
        target = int(when.timestamp() * 1000) if isinstance(when, dt.datetime) else when
        override = self._override()
        if override is not None and override.frozen_ms is not None:
            self._store(ClockOverride(frozen_ms=target))
        else:
            self._store(ClockOverride(offset_ms=target - wall_clock_ms()))

    def advance(self, ms: int = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0) -> int:
        """Move the clock forward (or back, with negative values); returns the new time."""
        delta = int(ms + 1000 * (seconds + 60 * minutes + 3600 * hours + 86400 * days))
        override = self._override() or ClockOverride()
        if override.frozen_ms is not None:
            new = ClockOverride(frozen_ms=override.frozen_ms + delta)
        else:
            new = ClockOverride(offset_ms=override.offset_ms + delta)
        self._store(new)
        return new.now(wall_clock_ms())

    def reset(self) -> None:
        """Back to the host's real time."""
        self._store(None)

    def _store(self, override: ClockOverride | None) -> None:
        run(perform(SetClockOverride(override)), self._fake.store)


class IdentityFake:
    """An identity service in process on the memory store, in dev/test mode, with a controllable clock."""

    def __init__(
        self,
        *,
        password_rounds: int = 4,
        compat: bool = False,
        seed: int | None = None,
        rate_limits: bool = False,
        webhooks: str = "manual",
    ) -> None:
        # Rate limits are off by default here: a test suite sends bursts from one address on purpose. Turn them on
        # (rate_limits=True) to test how your application handles 429.
        self.settings = Settings(
            dev_mode=True,
            password_rounds=password_rounds,
            compat="stack" if compat else "",
            rate_limits=rate_limits,
            # Tokens name this issuer whichever client (or Host header) asked for them.
            base_url=BASE_URL,
        )
        self.store = MemoryStore(keep_every_event=True)  # `project.events()` lists them with or without endpoints
        self.service = Service(self.settings.service_options())
        self.entropy: Entropy = SeededEntropy(seed) if seed is not None else SystemEntropy()
        self.wsgi = IdentityWSGI(
            self.settings,
            store=self.store,
            service=self.service,
            entropy=self.entropy,
            webhook_delivery=False,  # webhooks: the fake delivers itself (deliver_webhooks, "sync" mode)
        )
        self.asgi = IdentityASGI(
            self.settings, store=AsyncMemoryStore(self.store), service=self.service, entropy=self.entropy
        )
        self.wsgi.startup()
        self.asgi._started = True  # same store, already bootstrapped by the WSGI face
        self.clock = FakeClock(self)
        self.internal_admin_key = DEV_INTERNAL_ADMIN_KEY
        # --- webhooks ---
        #: "manual": webhooks go out when `deliver_webhooks()` is called; "sync": after every request made through
        #: the fake's clients and transports too. Either may be set at any time.
        self.webhooks = webhooks
        if webhooks not in WEBHOOK_MODES:
            raise ValueError(f"webhooks must be one of {', '.join(WEBHOOK_MODES)}, not {webhooks!r}")
        self.webhook_sender = InProcessWebhookSender()
        self._webhook_delivery = WebhookDelivery(self.service.options)
        self._delivering = threading.local()
        # --- end webhooks ---

    @property
    def dev_project(self) -> TestProject:
        """The fixed dev project every fake has (id 00000000-0000-4000-8000-000000000000)."""
        return TestProject(self, DEV_PROJECT.id, DEV_PROJECT.keys)

    def create_project(self, display_name: str = "Test project", **config: Any) -> TestProject:
        """A fresh, empty project (any config keys as keyword arguments); costs well under a millisecond."""
        if "domains" in config:
            config["domains"] = tuple(TrustedDomain(**d) if isinstance(d, Mapping) else d for d in config["domains"])
        for name, value in config.items():
            if isinstance(value, list):
                config[name] = tuple(value)
        project, keys = new_project(self.entropy, self.clock.now_ms(), display_name, ProjectConfig(**config))
        assert run(create_project(project), self.store)
        return TestProject(self, project.id, keys)

    def transport(self) -> httpx.WSGITransport:
        """An httpx transport to the service in process (WSGI): give it to the HTTP client your own code uses,
        e.g. to fetch the JWKS: `httpx.Client(transport=fake.transport())`."""
        import httpx

        return httpx.WSGITransport(app=self._delivering_wsgi)

    def async_transport(self) -> httpx.ASGITransport:
        """An async httpx transport to the service in process (ASGI)."""
        import httpx

        return httpx.ASGITransport(app=self._delivering_asgi)

    # --- webhooks ---

    def deliver_webhooks(self, *, max_passes: int = 1000) -> int:
        """Deliver webhooks now, at the fake's clock: run the service's delivery passes (the same as a host's
        delivery loop runs) until nothing is due, and return how many POSTs were made. A failed attempt is due
        again after the retry schedule's next step: `clock.advance(seconds=5)` then `deliver_webhooks()` retries
        it. Deliveries go to the receivers of `TestProject.add_webhook_receiver`, in process."""
        if getattr(self._delivering, "active", False):
            return 0  # a receiver that calls the fake while a delivery is under way: the running pass goes on
        self._delivering.active = True
        try:
            attempts = 0
            for _ in range(max_passes):
                report = run(
                    self._webhook_delivery.run_pass(wall_clock_ms(), self.entropy),
                    self.store,
                    webhooks=self.webhook_sender,
                )
                attempts += report.attempted
                if not (report.more or report.attempted or report.fanned_out):
                    break
            return attempts
        finally:
            self._delivering.active = False

    def _delivering_wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI app with the "sync" webhook mode: the response is read whole, then webhooks go out."""
        body = b"".join(self.wsgi(environ, start_response))
        if self.webhooks == "sync":
            self.deliver_webhooks()
        return [body]

    async def _delivering_asgi(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """The ASGI app with the "sync" webhook mode (delivery on a worker thread: receivers may be sync)."""
        await self.asgi(scope, receive, send)
        if scope.get("type") == "http" and self.webhooks == "sync":
            await asyncio.to_thread(self.deliver_webhooks)

    # --- end webhooks ---

    def client(self, headers: Mapping[str, str] | None = None) -> httpx.Client:
        """An `httpx.Client` wired to the service in process (WSGI, no port)."""
        import httpx

        return httpx.Client(transport=self.transport(), base_url=BASE_URL, headers=headers)

    def direct_client(self, headers: Mapping[str, str] | None = None) -> DirectClient:
        """The fastest client: requests straight to the service's core, no HTTP client (`identity_testing.direct`:
        the same answers as `client()`'s, with the part of httpx's surface tests use)."""
        return DirectClient(self, headers, host=BASE_HOST)

    def answer(self, request: Request) -> Response:
        """The service's answer to `request` (a `DirectClient`'s): as the WSGI face answers it, then webhooks in
        the "sync" mode."""
        try:
            response = self.wsgi.answer(request)
        except Exception:  # as the WSGI face answers an error of its own
            response = self.wsgi.host_error()
        if self.webhooks == "sync":
            self.deliver_webhooks()
        return response

    def async_client(self, headers: Mapping[str, str] | None = None) -> httpx.AsyncClient:
        """An `httpx.AsyncClient` wired to the service in process (ASGI, no port)."""
        import httpx

        return httpx.AsyncClient(transport=self.async_transport(), base_url=BASE_URL, headers=headers)


class TestProject:
    """One project of a fake: its keys, clients by access type, and shortcuts for what tests do most."""

    __test__ = False  # not a pytest test class

    def __init__(self, fake: IdentityFake, project_id: str, keys: IssuedKeys) -> None:
        self.fake = fake
        self.id = project_id
        self.keys = keys

    @property
    def issuer(self) -> str:
        """The `iss` of this project's access tokens (for users neither anonymous nor restricted)."""
        return f"{BASE_URL}/api/v1/projects/{self.id}"

    @property
    def audience(self) -> str:
        """The `aud` of this project's access tokens (for users neither anonymous nor restricted): its id."""
        return self.id

    @property
    def jwks_url(self) -> str:
        """Where the public keys of this project's tokens are: the issuer + `/.well-known/jwks.json`."""
        return f"{self.issuer}/.well-known/jwks.json"

    def jwks(self) -> dict[str, Any]:
        """The JWKS document (`{"keys": [...]}`) at `jwks_url`, fetched in process."""
        with self.fake.client() as http:
            response = http.get(self.jwks_url)
        response.raise_for_status()
        keys: dict[str, Any] = response.json()
        return keys

    def jwk_client(self, **options: Any) -> jwt.PyJWKClient:
        """A PyJWT `PyJWKClient` for `jwks_url` that fetches the JWKS from the fake in process (no port);
        `options` go to `PyJWKClient`. Needs PyJWT with its crypto extra (`pip install "pyjwt[crypto]"`)."""
        import jwt  # PyJWT: only suites that verify tokens with it need it

        project = self

        class InProcessJWKClient(jwt.PyJWKClient):
            def fetch_data(self) -> Any:
                return project.jwks()

        return InProcessJWKClient(self.jwks_url, **options)

    def headers(self, access: str = "server", *, access_token: str | None = None) -> dict[str, str]:
        """The authentication headers of `access` (client, server or admin) for this project."""
        key_header, key = {
            "client": ("x-service-publishable-client-key", self.keys.publishable_client_key),
            "server": ("x-service-secret-server-key", self.keys.secret_server_key),
            "admin": ("x-service-super-secret-admin-key", self.keys.super_secret_admin_key),
        }[access]
        headers = {"x-service-access-type": access, "x-service-project-id": self.id, key_header: key}
        if access_token is not None:
            headers["x-service-access-token"] = access_token
        return headers

    def client(self, access: str = "server", *, access_token: str | None = None) -> httpx.Client:
        """An in-process `httpx.Client` that sends this project's headers."""
        return self.fake.client(self.headers(access, access_token=access_token))

    def async_client(self, access: str = "server", *, access_token: str | None = None) -> httpx.AsyncClient:
        """An in-process `httpx.AsyncClient` that sends this project's headers."""
        return self.fake.async_client(self.headers(access, access_token=access_token))

    def direct_client(self, access: str = "server", *, access_token: str | None = None) -> DirectClient:
        """The fastest client, sending this project's headers: requests straight to the service's core
        (`identity_testing.direct.DirectClient`; same answers as `client()`'s, no HTTP client)."""
        return self.fake.direct_client(self.headers(access, access_token=access_token))

    def _server(self, method: str, path: str, **kw: Any) -> Any:
        # The shortcuts below go through the direct client: the same answers, a fraction of an httpx round's cost.
        response = self.direct_client("server").request(method, path, **kw)
        if response.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {response.status_code}: {response.text}")
        return response.json()

    def create_user(
        self,
        email: str | None = None,
        *,
        password: str | None = None,
        display_name: str | None = None,
        verified: bool = True,
        **fields: Any,
    ) -> dict[str, Any]:
        """A user, created through POST /users (server): the returned dict is the server view of the user. An
        e-mail given signs the user in (auth enabled) and is verified unless `verified=False`."""
        body: dict[str, Any] = dict(fields)
        if email is not None:
            body.update(primary_email=email, primary_email_verified=verified, primary_email_auth_enabled=True)
        if password is not None:
            body["password"] = password
        if display_name is not None:
            body["display_name"] = display_name
        return dict(self._server("POST", "/api/v1/users", json=body))

    def sign_in(self, user_id: str, *, expires_in_millis: int | None = None) -> dict[str, str]:
        """Tokens for `user_id` without any sign-in ceremony (POST /auth/sessions)."""
        body: dict[str, Any] = {"user_id": user_id}
        if expires_in_millis is not None:
            body["expires_in_millis"] = expires_in_millis
        return dict(self._server("POST", "/api/v1/auth/sessions", json=body))

    # passkeys
    def passkey_authenticator(self, origin: str = "http://localhost:3000") -> PasskeyAuthenticator:
        """A software passkey authenticator in a page at `origin` (`identity_testing.passkeys`): it registers and
        signs in with real WebAuthn answers, no browser. The origin must be one the project trusts (localhost is,
        unless `allow_localhost` is off); the project needs `passkey_enabled`."""
        from identity_testing.passkeys import PasskeyAuthenticator

        return PasskeyAuthenticator(origin)

    # anonymous users
    def sign_up_anonymous(self) -> dict[str, str]:
        """A new anonymous user, signed up as the SDK's `getUser({or: "anonymous"})` does (POST
        /auth/anonymous/sign-up, client access): `{access_token, refresh_token, user_id}`. Requests with its
        access token need the header `x-service-allow-anonymous-user: true`; a sign-up sent with it (password, or
        a code to a new address) upgrades that same user."""
        with self.client("client") as http:
            response = http.post("/api/v1/auth/anonymous/sign-up")
        if response.status_code >= 400:
            raise AssertionError(f"POST /api/v1/auth/anonymous/sign-up -> {response.status_code}: {response.text}")
        return dict(response.json())

    def outbox(self, to: str | None = None) -> list[dict[str, Any]]:
        """Mail the service sent for this project, newest first: the items of `GET /emails/outbox?to=` (server
        access), read from the store in process (what that route reads, without a request's cost). Where the route
        would refuse (an address it does not take, the project gone, its server key no longer valid), the route
        answers, as an AssertionError."""
        address: str | None = None
        if to:
            try:
                address = checked_email(to)  # the route's `to` rule (and its normalised form)
            except ValueError:
                address = None
        mail = None if to and address is None else run(_outbox(self.id, self.keys, address), self.fake.store)
        if mail is None:
            params = {"to": to} if to else {}
            return list(self._server("GET", "/api/v1/emails/outbox", params=params)["items"])
        if self.fake.webhooks == "sync":  # webhooks: as after a request through the fake's clients
            self.fake.deliver_webhooks()
        return [outbox_item(email) for email in mail]

    def last_code(self, email: str, kind: str = "sign_in") -> str:
        """The newest code of `kind` (a key of `CODE_KINDS`) mailed to `email`, as its endpoint takes it. A sign-in
        code is the 6-character code the mail shows (its outbox item's `code`) followed by the nonce (the rest of
        the magic link's code); the other kinds' is the whole code of their link."""
        read = CODE_KINDS.get(kind)
        if read is None:
            raise ValueError(f"unknown kind of code {kind!r}; known: {', '.join(CODE_KINDS)}")
        for mail in self.outbox(email):
            code = read(mail)
            if code is not None:
                return code
        raise LookupError(f"no {kind.replace('_', '-')} code was mailed to {email}")

    def last_magic_link(self, email: str) -> str:
        """The newest magic link mailed to `email` (its outbox item's `magic_link`)."""
        for mail in self.outbox(email):
            if mail.get("magic_link"):
                return str(mail["magic_link"])
        raise LookupError(f"no magic link was mailed to {email}")

    def enable_totp(self, user_id: str, secret: bytes | None = None) -> str:
        """Turn two-factor sign-in on for a user; returns the secret as base64."""
        secret_b64 = base64.b64encode(secret or self.fake.entropy.token_bytes(20)).decode()
        self._server("PATCH", f"/api/v1/users/{user_id}", json={"totp_secret_base64": secret_b64})
        return secret_b64

    def current_totp(self, user_id: str) -> str:
        """The TOTP a user's authenticator shows right now (by the fake's clock)."""
        user = run(perform(LoadUser(self.id, user_id)), self.fake.store)
        if user is None or user.totp_secret_base64 is None:
            raise LookupError(f"user {user_id} has no TOTP secret")
        secret = base64.b32encode(base64.b64decode(user.totp_secret_base64)).decode()
        return str(pyotp.TOTP(secret).at(self.fake.clock.now_ms() // 1000))

    # --- permissions ---

    def define_permission(
        self,
        permission_id: str,
        *,
        scope: str = "project",
        contained: Sequence[str] = (),
        description: str | None = None,
    ) -> dict[str, Any]:
        """Define a permission of `scope` (`project` or `team`) containing `contained` (POST
        /<scope>-permission-definitions, admin); returns the definition."""
        body: dict[str, Any] = {"id": permission_id, "contained_permission_ids": list(contained)}
        if description is not None:
            body["description"] = description
        with self.client("admin") as http:
            response = http.post(f"/api/v1/{scope}-permission-definitions", json=body)
        if response.status_code >= 400:
            raise AssertionError(f"defining {permission_id} -> {response.status_code}: {response.text}")
        return dict(response.json())

    def grant_project_permission(self, user_id: str, permission_id: str) -> None:
        """Grant a user a project permission (POST /project-permissions/{user_id}/{permission_id}, server); the
        permission must be defined (`define_permission`)."""
        self._server("POST", f"/api/v1/project-permissions/{user_id}/{permission_id}", json={})

    # --- end permissions ---

    # --- API keys ---

    def create_api_key(
        self,
        *,
        user_id: str | None = None,
        team_id: str | None = None,
        description: str = "Test key",
        expires_at_millis: int | None = None,
        is_public: bool = False,
    ) -> str:
        """A new API key of the user `user_id` or of the team `team_id` (give exactly one), returned whole: the
        text `POST /user-api-keys/check` (or `/team-api-keys/check`) takes. Made directly in the store, whether or
        not the project allows API keys; checking it needs the project's `allow_user_api_keys` (or
        `allow_team_api_keys`), e.g. `fake.create_project(allow_user_api_keys=True)`."""
        if (user_id is None) == (team_id is None):
            raise ValueError("give exactly one of user_id and team_id")
        key_type, owner_id = (ApiKeyType.USER, user_id) if user_id is not None else (ApiKeyType.TEAM, team_id)
        assert owner_id is not None
        from identity_proto.flows.api_keys import new_api_key, store_api_key  # its models load pydantic

        made = new_api_key(
            self.fake.entropy,
            self.fake.clock.now_ms(),
            key_type,
            owner_id,
            description=description,
            expires_at_millis=expires_at_millis,
            is_public=is_public,
        )
        created = run(store_api_key(self.id, made.record), self.fake.store)
        if created is ApiKeyWrite.OWNER_NOT_FOUND:
            raise LookupError(f"no {key_type.value} {owner_id} in project {self.id}")
        return made.text

    # --- OAuth (the mock provider) ---

    def use_mock_oauth(self, provider_id: str = "github", type: str | None = None, **flags: Any) -> None:
        """Configure the OAuth provider `provider_id`, served by the fake's own mock provider (one call): of `type`
        (default: `provider_id` when it is a provider type such as "github" or "google", else "mock"), with
        client id "MOCK" (the mock stands in for the real provider); `flags` are other fields of the provider's
        config (`allow_sign_in`, `allow_connected_accounts`, `client_secret`). A provider of the same id is
        replaced; the others are kept. The project's merge strategy is `create_project(
        oauth_account_merge_strategy=...)`'s."""
        kind = type or (provider_id if provider_id in PROVIDER_TYPES else "mock")
        if kind not in PROVIDER_TYPES:
            raise ValueError(f"unknown provider type {kind!r}; known: {', '.join(PROVIDER_TYPES)}")
        flags.setdefault("client_id", MOCK_CLIENT_ID)
        config = OAuthProviderConfig(id=provider_id, type=kind, **flags)
        project = run(perform(LoadProject(self.id)), self.fake.store)
        if project is None:
            raise LookupError(f"no project {self.id}")
        providers = (*(p for p in project.config.oauth_providers if p.id != provider_id), config)
        changes = ProjectConfigChanges.of([("oauth_providers", providers)])
        run(update_project(self.id, config=changes), self.fake.store)
        self.fake.service.projects.forget(self.id)  # the service reads the new config at once

    def oauth_authorize_url(
        self,
        provider_id: str,
        *,
        code_challenge: str,
        redirect_uri: str = "http://localhost:3000/oauth-callback",
        state: str = "fake-state",
        access_token: str | None = None,
        link: bool = False,
        **extra: str,
    ) -> str:
        """The URL an app sends the browser to for OAuth sign-in with `provider_id` (GET
        /auth/oauth/authorize/{provider_id}, redirect mode), its PKCE challenge S256. With `access_token`, the
        signed-in (or anonymous) user it names: an anonymous user is upgraded; with `link=True` the provider
        account is linked to that user instead (`type=link`). `extra` adds query parameters."""
        query: dict[str, str] = {
            "client_id": self.id,
            "client_secret": self.keys.publishable_client_key,
            "redirect_uri": redirect_uri,
            "scope": "legacy",
            "state": state,
            "grant_type": "authorization_code",
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
            "response_type": "code",
            **extra,
        }
        if access_token is not None:
            query["token"] = access_token
        if link:
            query["type"] = "link"
        import httpx

        return str(httpx.URL(f"{BASE_URL}/api/v1/auth/oauth/authorize/{provider_id}", params=query))

    def oauth_sign_in(
        self,
        provider_id: str,
        *,
        email: str,
        display_name: str | None = None,
        access_token: str | None = None,
        redirect_uri: str = "http://localhost:3000/oauth-callback",
        link: bool = False,
    ) -> dict[str, Any]:
        """Sign in with the OAuth provider `provider_id` (see `use_mock_oauth`) as a browser and an app would, in
        process: authorize in redirect mode, the mock's login page filled in with `email` (and `display_name`) and
        posted, the provider's callback with the inner cookie, then the app's code exchange at POST
        /auth/oauth/token with its PKCE verifier. Returns the token response: `access_token`, `refresh_token`,
        `is_new_user`, `after_callback_redirect_url`, ... `access_token` signs in as (or, anonymous, upgrades;
        with `link=True` links to) the user it names. A flow that ends in an error redirect (or any other answer)
        raises `OAuthFlowError` carrying its `errorCode`, `message` and `details`.

        The same flow with your own HTTP client: any httpx client on `fake.transport()` that keeps cookies and
        follows redirects (`follow_redirects=True`) gets the login page from `oauth_authorize_url(...)`; posting
        its form lands on `redirect_uri?code=...&state=...` (the fake itself answers that URL 404: read the code
        from `response.url`); then POST the code with your verifier to /api/v1/auth/oauth/token."""
        verifier, challenge = _pkce_pair(self.fake.entropy)
        state = base64.urlsafe_b64encode(self.fake.entropy.token_bytes(12)).decode()
        url = self.oauth_authorize_url(
            provider_id,
            code_challenge=challenge,
            redirect_uri=redirect_uri,
            state=state,
            access_token=access_token,
            link=link,
        )
        with self.fake.client() as browser:  # keeps cookies (the inner one); follows no redirect by itself
            to_provider = browser.get(url)
            _expect_redirect("authorize", to_provider)
            page = browser.get(to_provider.headers["location"])
            if page.status_code != 200:
                raise _flow_error("the mock provider's login page", page)
            form = _LoginForm()
            form.feed(page.text)
            fields = {**form.fields, "email": email, "display_name": display_name or "", "action": "sign_in"}
            back = browser.post(urljoin(str(page.url), form.action or ""), data=fields)
            _expect_redirect("the mock provider's login form", back)
            to_app = browser.get(back.headers["location"])
            _expect_redirect("the callback", to_app)
        location = to_app.headers["location"]
        if not location.startswith(redirect_uri.split("?")[0]):
            raise OAuthFlowError("the callback", to_app.status_code, None, f"redirected to {location}")
        params = dict(parse_qsl(urlsplit(location).query))
        if "code" not in params:
            details: Any = params.get("details")
            with contextlib.suppress(ValueError):  # the JSON the redirect's `details` carries
                details = orjson.loads(details or "null")
            raise OAuthFlowError(
                "the callback", to_app.status_code, params.get("errorCode"), params.get("message", ""), details
            )
        if params.get("state") != state:
            raise OAuthFlowError("the callback", to_app.status_code, None, "the app's state did not come back")
        with self.fake.client() as app:
            answer = app.post(
                "/api/v1/auth/oauth/token",
                data={
                    "grant_type": "authorization_code",
                    "client_id": self.id,
                    "client_secret": self.keys.publishable_client_key,
                    "code": params["code"],
                    "redirect_uri": redirect_uri,
                    "code_verifier": verifier,
                },
            )
        if answer.status_code != 200:
            raise _flow_error("the code exchange", answer)
        return dict(answer.json())

    # --- end OAuth (the mock provider) ---

    # --- webhooks ---

    def events(self, *types: str) -> list[dict[str, Any]]:
        """Every webhook event the service recorded for this project (still kept), oldest first, as `{"id",
        "type", "data"}` dicts (`data` as receivers get it), whatever the endpoints: also with none at all. With
        `types`, only events of those types."""
        project = run(perform(LoadProject(self.id)), self.fake.store)
        if project is None:
            raise LookupError(f"no project {self.id}")
        events: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = run(perform(ListEvents(self.id, after=after, limit=500)), self.fake.store)
            for event in page:
                if not types or event.type in types:
                    events.append({"id": event.id, "type": event.type, "data": event_data(event, project.config)})
            if len(page) < 500:
                return events
            after = page[-1].id

    def webhook_deliveries(self) -> list[dict[str, Any]]:
        """Every delivery still kept, of every endpoint of this project, oldest message first: the
        `GET /webhook-endpoints/{id}/deliveries` items (`message_id`, `event_type`, `state`, `attempts`...) plus
        the endpoint's `endpoint_id` and `url`."""
        store = self.fake.store
        found: list[dict[str, Any]] = []
        for endpoint in run(perform(ListWebhookEndpoints(self.id)), store):
            for delivery in run(perform(ListDeliveries(self.id, endpoint.id, limit=1_000_000)), store):
                found.append({"endpoint_id": endpoint.id, "url": endpoint.url, **render_delivery(delivery)})
        found.sort(key=lambda item: (item["created_at_millis"], item["message_id"], item["url"]))
        return found

    def add_webhook_receiver(
        self,
        target: Any,
        event_types: Sequence[str] | None = None,
        *,
        path: str = "/",
        kind: ReceiverKind | None = None,
        description: str = "",
    ) -> WebhookReceiver:
        """Register `target` as a webhook endpoint of this project, delivered in process (no port): a callable
        `(headers, body) -> status` (headers a dict, lower-case names; body the raw bytes the signature covers),
        or a WSGI or ASGI app, which gets the POST at `path` (`kind` says which when the guess of
        `identity_testing.webhooks.receiver_kind` would be wrong). `event_types`: the types it gets (None: every
        type). Deliveries are signed exactly as real ones, with the endpoint's secret (`.secret` of the result; a
        `RecordingReceiver` is given it). They go out at `fake.deliver_webhooks()`, or after every request in the
        fake's "sync" mode. Only events recorded after this call are delivered to it."""
        sender = self.fake.webhook_sender
        url = sender.new_url(path)
        body: dict[str, Any] = {"url": url, "description": description}
        if event_types is not None:
            body["event_types"] = list(event_types)
        with self.client("admin") as http:
            created = http.post("/api/v1/webhook-endpoints", json=body)
        if created.status_code != 201:
            raise AssertionError(f"POST /api/v1/webhook-endpoints -> {created.status_code}: {created.text}")
        endpoint = created.json()
        receiver = WebhookReceiver(endpoint["id"], url, endpoint["secret"], target, kind or receiver_kind(target))
        if isinstance(target, RecordingReceiver):
            target.endpoint_id, target.secret = receiver.endpoint_id, receiver.secret
        sender.register(receiver)
        return receiver

    # --- end webhooks ---

    def reset(self) -> None:
        """Remove every user, team, session, code and mail of this project; other projects are untouched."""
        assert run(perform(ResetProjectData(self.id)), self.fake.store)

    def delete(self) -> None:
        """Remove the project and all its data."""
        run(perform(DeleteProject(self.id)), self.fake.store)

    def export(self) -> dict[str, Any]:
        """This project's data as a JSON-ready dict, secrets as the store keeps them (password hashes, API key hashes,
        invitation code hashes; webhook signing secrets as they are): `identity_proto.flows.portability`."""
        result: dict[str, Any] = run(export_project_data(self.id, self.fake.clock.now_ms()), self.fake.store)
        return result

    def import_data(self, data: Mapping[str, Any]) -> dict[str, int]:
        """Add an export's records to this project, all or nothing (a version 2 export sets its config too);
        answers how many of each kind."""
        result: dict[str, int] = run(import_project_data(self.id, dict(data)), self.fake.store)
        return result


def _outbox(project_id: str, keys: IssuedKeys, to: str | None) -> Flow[tuple[Email, ...] | None]:
    """What `GET /emails/outbox?to=` lists for a server holding `keys` (at most 100 mails, newest first), or None
    where it would not answer 200: no such project, or the server key is not (or no longer) the project's."""
    project = yield from perform(LoadProject(project_id))
    if project is None or not secret_matches(keys.secret_server_key, project.keys.secret_server_key_hash):
        return None
    return (yield from perform(ListOutbox(project_id, to, 100)))


# --- OAuth (the mock provider) ---


def _flow_error(step: str, response: httpx.Response) -> OAuthFlowError:
    code = response.headers.get("x-service-known-error")
    message, details = response.text, None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message, details = str(body.get("error", message)), body.get("details")
    return OAuthFlowError(step, response.status_code, code, message, details, response.text)


def _expect_redirect(step: str, response: httpx.Response) -> None:
    if response.status_code not in (302, 303, 307) or "location" not in response.headers:
        raise _flow_error(step, response)


# --- end OAuth (the mock provider) ---
