"""What every host shares: configuration from the environment, the wall clock, system entropy, store selection.

Hosts compose: they read `Settings`, build a store and a `Service`, and run the service's flows with a driver.
Nothing here holds state that matters between requests; any worker can serve any request.

Environment variables: all optional, every one read by `Settings.from_env`; the README's Configuration section
is their one table (tests/unit/test_readme_configuration.py checks that it names exactly the variables read
here).

With no project variables set the service runs in dev mode on a dev project whose id and keys are fixed, public
and printed at start (see DEV_* below). Setting IDENTITY_PROJECT_ID switches to production mode: the three keys
must then be set as well, nothing falls back to a dev value, no dev id or key is accepted as configuration, and a
dev project left in the store by an earlier start in dev mode is disabled at start-up (logged).
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.mailers import MailerPair, mailer_from_url
from identity_hosting.pages import Pages, StaticFiles, page_urls
from identity_proto import (
    AsyncStore,
    Entropy,
    IssuedKeys,
    MalformedRequest,
    ProjectSeed,
    Service,
    ServiceOptions,
    Store,
)
from identity_proto.effects import Flow, LoadProject, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.provider_tokens import decode_token_key
from identity_proto.records import Project
from identity_proto.schemas.problems import is_uuid

__all__ = [
    "CONFIGURATION_EXIT_STATUS",
    "DEV_INTERNAL_ADMIN_KEY",
    "DEV_KEYS",
    "DEV_PROJECT",
    "DEV_PROJECT_ID",
    "ConfigurationError",
    "Dashboard",
    "Settings",
    "SystemEntropy",
    "body_too_large",
    "build_async_store",
    "build_sync_store",
    "configure_logging",
    "declared_body_length",
    "end_hypercorn_worker",
    "report_configuration_error",
    "settings_or_exit",
    "wall_clock_ms",
]

logger = logging.getLogger("identity_service")

#: The dev project: fixed, documented, obviously not secret. Used only when no project is configured.
DEV_PROJECT_ID = "00000000-0000-4000-8000-000000000000"
# Public by design (they are in the README), hence the noqa for "hard-coded password".
DEV_KEYS = IssuedKeys(
    publishable_client_key="pck_dev_publishable_client_key_not_secret",
    secret_server_key="ssk_dev_secret_server_key_not_secret",  # noqa: S106
    super_secret_admin_key="sak_dev_super_secret_admin_key_not_secret",  # noqa: S106
)
DEV_INTERNAL_ADMIN_KEY = "sak_dev_internal_admin_key_not_secret"
DEV_PROJECT = ProjectSeed(DEV_PROJECT_ID, "Dev project", DEV_KEYS)
_DEV_KEY_VALUES = frozenset(
    (
        DEV_KEYS.publishable_client_key,
        DEV_KEYS.secret_server_key,
        DEV_KEYS.super_secret_admin_key,
        DEV_INTERNAL_ADMIN_KEY,
    )
)
_DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

_DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: How long the ASGI host waits for a request's whole body (a client that declares 100 bytes and sends 10 would
#: otherwise hold its connection, and a worker's memory, forever).
_DEFAULT_BODY_TIMEOUT_S = 30.0


class ConfigurationError(ValueError):
    """The environment describes a configuration the service refuses to start with. The message names the
    variable and what is wrong with it."""


def report_configuration_error(error: ConfigurationError) -> None:
    """Say why the service will not start, in one line on standard error (logging is not set up yet: its level is
    part of the configuration that failed)."""
    print(f"identity service: configuration error: {error}", file=sys.stderr, flush=True)


#: The exit status of a process that refused to start on a bad environment (as Gunicorn's worker boot error).
CONFIGURATION_EXIT_STATUS = 3


def settings_or_exit(environ: Mapping[str, str] | None = None) -> Settings:
    """`Settings.from_env`, for hosts built at a module's import (`IdentityASGI.from_env()`,
    `IdentityWSGI.from_env()`): on a bad environment, one line on standard error naming the variable, and the
    process ends with `CONFIGURATION_EXIT_STATUS` instead of a traceback (`SystemExit`, which Python, Flask's
    command line, Gunicorn and pytest report without one; under Hypercorn's command line its master ends too,
    `end_hypercorn_worker`). Every host fails alike: `hypercorn asgi_app:app`, `identity-service`, and an app
    embedding the service in FastAPI, Starlette, Flask or Django."""
    try:
        return Settings.from_env(environ)
    except ConfigurationError as exc:
        report_configuration_error(exc)
        end_hypercorn_worker(CONFIGURATION_EXIT_STATUS)
        raise SystemExit(CONFIGURATION_EXIT_STATUS) from None


def end_hypercorn_worker(status: int) -> None:
    """Under Hypercorn's command line, end the process now with `status`, the line that says why already printed.

    Hypercorn turns `lifespan.startup.failed` into a traceback, and its master process drops a worker's exit status
    (up to 0.18.0 it exits 0 whenever a worker fails: pgjones/hypercorn#269), so a supervisor would read a refused
    start as a clean stop. A worker therefore ends its master with a signal the master does not handle, which is a
    failure status, and exits without unwinding (there is nothing to clean up: no store was built). Elsewhere (other
    servers, Hypercorn's `serve()` called by an application) this does nothing: they honour the ASGI message."""
    process = multiprocessing.current_process()
    target = getattr(process, "_target", None)
    worker = str(getattr(target, "__module__", "")).startswith("hypercorn.")
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    command_line = Path(sys.argv[0]).name == "hypercorn" or getattr(main_spec, "name", "") == "hypercorn.__main__"
    if not (worker or command_line):
        return
    parent = multiprocessing.parent_process()
    if worker and parent is not None and parent.pid == os.getppid():
        os.kill(parent.pid, signal.SIGUSR1)
    sys.stderr.flush()
    os._exit(status)


class SystemEntropy:
    """Randomness from the operating system (`os.urandom`), for serving real users."""

    def token_bytes(self, n: int) -> bytes:
        """`n` random bytes."""
        return os.urandom(n)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, from the system clock."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Settings:
    """A host's configuration."""

    backend: str = "memory"
    redis_url: str = _DEFAULT_REDIS_URL
    redis_cluster: bool = False
    default_project: ProjectSeed = DEV_PROJECT
    internal_admin_key: str | None = DEV_INTERNAL_ADMIN_KEY
    dev_mode: bool = True
    max_body_bytes: int = _DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = _DEFAULT_BODY_TIMEOUT_S
    base_url: str = ""
    log_level: str = "INFO"
    mail: str = "outbox"
    password_rounds: int = 4
    #: "stack": the original's header names work too (its official SDK speaks them); "" off.
    compat: str = ""
    rate_limits: bool = True
    trusted_proxy_header: str = ""
    #: OAuth: the key provider tokens are sealed with (32 bytes), or None (see `identity_proto.provider_tokens`).
    oauth_token_key: bytes | None = field(default=None, repr=False)
    # OAuth provider side
    #: Seconds each call to an OAuth provider may take (connect, each read) before it counts as unavailable.
    oauth_timeout_s: float = 10.0
    # webhooks: delivery
    #: Seconds between two passes of the delivery loop when the last found nothing to do.
    webhook_poll_s: float = 1.0
    #: Seconds a receiver has to answer one POST.
    webhook_timeout_s: float = 15.0
    #: Events and settled deliveries are kept this many hours at most, and the newest `webhook_keep_events` events.
    webhook_retention_hours: float = 72.0
    webhook_keep_events: int = 10_000
    #: Outbound requests (webhooks, OAuth providers) may reach private and loopback addresses too (always in dev
    #: mode; in production only when the operator says: `IDENTITY_ALLOW_PRIVATE_ADDRESSES=1`).
    webhook_allow_private: bool = False
    # operators (identity_hosting.observability)
    #: The access log's format, "text" or "json"; "" off.
    access_log: str = ""
    #: Whether GET /metrics answers (Prometheus), and the bearer token it then asks for (None: none).
    metrics: bool = False
    metrics_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables (the README's Configuration section lists them)."""
        env = os.environ if environ is None else environ
        backend = env.get("IDENTITY_BACKEND", "memory")
        if backend not in {"memory", "redis"}:
            raise ConfigurationError(f"IDENTITY_BACKEND must be 'memory' or 'redis', not {backend!r}")
        project_id = env.get("IDENTITY_PROJECT_ID")
        key_names = ("IDENTITY_PUBLISHABLE_CLIENT_KEY", "IDENTITY_SECRET_SERVER_KEY", "IDENTITY_SUPER_SECRET_ADMIN_KEY")
        if project_id is None:
            if any(name in env for name in key_names):
                raise ConfigurationError("project keys are set but IDENTITY_PROJECT_ID is not")
            seed, dev_mode = DEV_PROJECT, True
            internal_key: str | None = env.get("IDENTITY_INTERNAL_ADMIN_KEY", DEV_INTERNAL_ADMIN_KEY)
        else:
            missing = [name for name in key_names if not env.get(name)]
            if missing:
                raise ConfigurationError(f"IDENTITY_PROJECT_ID is set, so these must be too: {', '.join(missing)}")
            keys = IssuedKeys(*(env[name] for name in key_names))
            for value, prefix, name in zip(
                (keys.publishable_client_key, keys.secret_server_key, keys.super_secret_admin_key),
                ("pck_", "ssk_", "sak_"),
                key_names,
                strict=True,
            ):
                if not value.startswith(prefix) or len(value) < 20:
                    raise ConfigurationError(f"{name} must start with {prefix} and be at least 20 characters")
            if not is_uuid(project_id):
                # Not only a format: `internal` would have made the project's admin key the internal project's,
                # which creates, lists and deletes every project.
                raise ConfigurationError(f"IDENTITY_PROJECT_ID must be a lower-case UUID, not {project_id!r}")
            if project_id == DEV_PROJECT_ID:
                raise ConfigurationError("IDENTITY_PROJECT_ID must not be the dev project's id, which is public")
            if {keys.publishable_client_key, keys.secret_server_key, keys.super_secret_admin_key} & _DEV_KEY_VALUES:
                raise ConfigurationError("the project keys must not be the dev keys, which are public")
            seed, dev_mode = ProjectSeed(project_id, "Default project", keys), False
            internal_key = env.get("IDENTITY_INTERNAL_ADMIN_KEY") or None
            if internal_key in _DEV_KEY_VALUES:
                raise ConfigurationError("IDENTITY_INTERNAL_ADMIN_KEY must not be the dev key, which is public")
        try:
            max_body = int(env.get("IDENTITY_MAX_BODY_BYTES", _DEFAULT_MAX_BODY_BYTES))
        except ValueError:
            raise ConfigurationError("IDENTITY_MAX_BODY_BYTES must be an integer") from None
        if max_body < 1024:
            raise ConfigurationError("IDENTITY_MAX_BODY_BYTES must be at least 1024")
        try:
            body_timeout = float(env.get("IDENTITY_BODY_TIMEOUT_SECONDS", _DEFAULT_BODY_TIMEOUT_S))
        except ValueError:
            raise ConfigurationError("IDENTITY_BODY_TIMEOUT_SECONDS must be a number") from None
        if not 0 < body_timeout <= 3600:
            raise ConfigurationError("IDENTITY_BODY_TIMEOUT_SECONDS must be more than 0 and at most 3600")
        mail = env.get("IDENTITY_MAIL", "outbox")
        try:
            mailer_from_url(mail)
        except ValueError as exc:
            raise ConfigurationError(f"IDENTITY_MAIL: {exc}") from None
        try:
            rounds = int(env.get("IDENTITY_PASSWORD_ROUNDS", 4 if dev_mode else 12))
        except ValueError:
            raise ConfigurationError("IDENTITY_PASSWORD_ROUNDS must be an integer") from None
        if not 4 <= rounds <= 16:
            raise ConfigurationError("IDENTITY_PASSWORD_ROUNDS must be between 4 and 16")
        compat = env.get("IDENTITY_COMPAT", "").strip().lower()
        if compat not in {"", "off", "stack"}:
            raise ConfigurationError("IDENTITY_COMPAT must be 'stack' or unset")
        redis_cluster = env.get("IDENTITY_REDIS_CLUSTER", "0").strip().lower()
        if redis_cluster not in {"0", "1"}:
            raise ConfigurationError("IDENTITY_REDIS_CLUSTER must be 1 or 0")
        rate_limits = env.get("IDENTITY_RATE_LIMITS", "on").strip().lower()
        if rate_limits not in {"on", "off"}:
            raise ConfigurationError("IDENTITY_RATE_LIMITS must be 'on' or 'off'")
        # OAuth: provider tokens are sealed with this key at rest.
        oauth_token_key = None
        if env.get("IDENTITY_OAUTH_TOKEN_KEY"):
            try:
                oauth_token_key = decode_token_key(env["IDENTITY_OAUTH_TOKEN_KEY"])
            except ValueError as exc:
                raise ConfigurationError(f"IDENTITY_OAUTH_TOKEN_KEY {exc}") from None
        # OAuth provider side
        try:
            oauth_timeout_s = float(env.get("IDENTITY_OAUTH_TIMEOUT_SECONDS", "10"))
        except ValueError:
            raise ConfigurationError("IDENTITY_OAUTH_TIMEOUT_SECONDS must be a number of seconds") from None
        if not 0.1 <= oauth_timeout_s <= 120:  # also refuses nan and inf
            raise ConfigurationError("IDENTITY_OAUTH_TIMEOUT_SECONDS must be between 0.1 and 120")
        webhooks = _webhook_settings(env)
        return cls(
            **webhooks,
            **_operator_settings(env),
            oauth_timeout_s=oauth_timeout_s,
            oauth_token_key=oauth_token_key,
            redis_cluster=redis_cluster == "1",
            rate_limits=rate_limits == "on",
            trusted_proxy_header=env.get("IDENTITY_TRUSTED_PROXY_HEADER", "").strip().lower(),
            compat="" if compat == "off" else compat,
            mail=mail,
            password_rounds=rounds,
            backend=backend,
            redis_url=env.get("IDENTITY_REDIS_URL", _DEFAULT_REDIS_URL),
            default_project=seed,
            internal_admin_key=internal_key,
            dev_mode=dev_mode,
            max_body_bytes=max_body,
            body_timeout_s=body_timeout,
            base_url=env.get("IDENTITY_BASE_URL", "").rstrip("/"),
            log_level=env.get("IDENTITY_LOG_LEVEL", "INFO").upper(),
        )

    def service_options(self) -> ServiceOptions:
        """The core's options for these settings."""
        return ServiceOptions(
            header_prefixes=("x-service-", "x-stack-") if self.compat == "stack" else ("x-service-",),
            base_url=self.base_url,
            dev_mode=self.dev_mode,
            password_rounds=self.password_rounds,
            mail_delivery="outbox" if self.mail == "outbox" else "mailer",
            rate_limits_enabled=self.rate_limits,
            trusted_proxy_header=self.trusted_proxy_header,
            oauth_token_key=self.oauth_token_key,
            webhook_allow_private=self.webhook_allow_private,  # webhook endpoints
            # webhooks: delivery
            webhook_retention_ms=int(self.webhook_retention_hours * 3600 * 1000),
            webhook_keep_events=self.webhook_keep_events,
            webhook_timeout_s=self.webhook_timeout_s,
        )

    # webhooks: delivery
    @property
    def may_reach_private_addresses(self) -> bool:
        """Whether outbound requests (webhook deliveries, OAuth provider calls) may reach private, loopback and
        other non-global addresses (the SSRF guard off): in dev mode, or when `IDENTITY_ALLOW_PRIVATE_ADDRESSES=1`
        (or its former name `IDENTITY_WEBHOOK_ALLOW_PRIVATE=1`)."""
        return self.dev_mode or self.webhook_allow_private

    @property
    def disabled_projects(self) -> tuple[str, ...]:
        """Projects start-up disables if the store has them: in production mode the dev project, whose keys are
        public (a store once used in dev mode keeps it)."""
        return () if self.dev_mode else (DEV_PROJECT_ID,)

    def mailers(self) -> MailerPair:
        """The sync and async mailers for `mail` (both None for the outbox, which lives in the store)."""
        return mailer_from_url(self.mail)

    def pages(self) -> Pages:
        """What the hosts serve before the core: the dashboard, the API explorer, and in dev mode the home page."""
        return Pages(Dashboard(), dev_project=self.default_project if self.dev_mode else None)

    def announce(self, bound_url: str | None = None) -> None:
        """Log what the service runs on; in dev mode, the dev project's public values too (never real keys), and
        where the dashboard and the API explorer are, one line each: under `IDENTITY_BASE_URL` when it is set, else
        under `bound_url` (the address the server listens on, when the host knows it)."""
        logger.info(
            "identity service starting: backend=%s mode=%s", self.backend, "dev" if self.dev_mode else "production"
        )
        if self.dev_mode:
            keys = self.default_project.keys
            logger.info(
                "DEV PROJECT (fixed, public dev values; never use them in production): project id %s, "
                "publishable client key %s, secret server key %s, super secret admin key %s; internal admin key %s",
                self.default_project.id,
                keys.publishable_client_key,
                keys.secret_server_key,
                keys.super_secret_admin_key,
                # A key set in the environment is a real secret even in dev mode: name it, never print it.
                self.internal_admin_key
                if self.internal_admin_key == DEV_INTERNAL_ADMIN_KEY
                else "from IDENTITY_INTERNAL_ADMIN_KEY"
                if self.internal_admin_key
                else "unset",
            )
            urls = page_urls(self.base_url or bound_url or "<this server's URL>")
            logger.info("dashboard: %s", urls["dashboard"])
            logger.info("API explorer: %s (OpenAPI document: %s)", urls["explorer"], urls["openapi"])
        else:
            logger.info("default project %s (keys from the environment)", self.default_project.id)

    def start_up(self, service: Service, *, now_ms: int, entropy: Entropy, bound_url: str | None = None) -> Flow[None]:
        """What both hosts do at start-up, as a flow each runs against its store (`arun` or `run`): announce (the
        server's address, `bound_url`, when the host knows it), make sure the configured projects exist
        (`Service.bootstrap`), log the ones disabled, and in production warn about settings that suit development
        only."""
        self.announce(bound_url)
        disabled = yield from service.bootstrap(
            self.default_project,
            self.internal_admin_key,
            now_ms=now_ms,
            entropy=entropy,
            disable=self.disabled_projects,
            recreate_missing=self.dev_mode,
        )
        self.announce_disabled(disabled)
        if not self.dev_mode:
            default = yield from perform(LoadProject(self.default_project.id))
            self.warn_about_production_risks(default)

    def announce_disabled(self, project_ids: tuple[str, ...]) -> None:
        """Log the projects start-up found in the store and disabled (see `disabled_projects`), one line each."""
        for project_id in project_ids:
            logger.warning(
                "production mode: the dev project %s was found in this store (left by a start in dev mode) and is "
                "disabled: its public keys authenticate nothing; its data is kept",
                project_id,
            )

    def warn_about_production_risks(self, default_project: Project | None) -> None:
        """In production mode, one warning line per setting that suits development only (`default_project` is the
        stored default project, after bootstrap)."""
        if self.dev_mode:
            return
        if self.backend == "memory":
            logger.warning(
                "production mode on the memory store (IDENTITY_BACKEND=memory): users and sessions are lost when the "
                "process ends, and each worker has its own; set IDENTITY_BACKEND=redis"
            )
        if self.mail in {"outbox", "console"}:
            logger.warning(
                "production mode with IDENTITY_MAIL=%s: sign-in mail is not delivered to anyone; set an smtp:// URL",
                self.mail,
            )
        if default_project is not None and default_project.config.allow_localhost:
            logger.warning(
                "production mode and project %s allows localhost callback URLs (config allow_localhost); turn it off "
                "with PATCH /api/v1/projects/current",
                default_project.id,
            )


#: More digits than this declares a length larger than any body a host accepts (and than `int` should parse).
_MAX_LENGTH_DIGITS = 18


def declared_body_length(value: str | None) -> int | None:
    """The body length a request's Content-Length declares (RFC 9110: one or more digits, nothing else); None when
    it declares none. A negative, signed, fractional or otherwise malformed value raises `MalformedRequest`: the
    hosts answer 400 before reading a byte of the body."""
    if value is None:
        return None
    text = value.strip(" \t")
    if not (text.isascii() and text.isdigit()):
        raise MalformedRequest("the Content-Length header must be a non-negative integer")
    if len(text) > _MAX_LENGTH_DIGITS:
        return sys.maxsize
    return int(text)


def body_too_large(limit: int) -> KnownError:
    """The error a host raises for a body over `limit` bytes (made only when one is: most requests never are)."""
    return KnownError(ErrorCode.REQUEST_BODY_TOO_LARGE, context={"max_bytes": limit})


def build_async_store(settings: Settings) -> AsyncStore:
    """The asyncio store the settings name (ASGI hosts)."""
    if settings.backend == "redis":
        from backends.redis import AsyncRedisStore  # only operators on Redis pay for importing redis-py

        return AsyncRedisStore.from_url(settings.redis_url, cluster=settings.redis_cluster)
    if settings.backend == "memory":
        return AsyncMemoryStore()
    raise ConfigurationError(f"unknown backend {settings.backend!r}")


def build_sync_store(settings: Settings) -> Store:
    """The sync store the settings name (WSGI hosts, in-process tests)."""
    if settings.backend == "redis":
        from backends.redis import RedisStore

        return RedisStore.from_url(settings.redis_url, cluster=settings.redis_cluster)
    if settings.backend == "memory":
        return MemoryStore()
    raise ConfigurationError(f"unknown backend {settings.backend!r}")


def configure_logging(level: str) -> None:
    """Send the service's log lines to standard error at `level`, unless the embedding application configured
    logging already."""
    service_logger = logging.getLogger("identity_service")
    if not logging.getLogger().handlers and not service_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
        for name in ("identity_service", "identity_proto"):
            logging.getLogger(name).addHandler(handler)
    for name in ("identity_service", "identity_proto"):
        logging.getLogger(name).setLevel(level)


#: The admin dashboard's files (a static page and its scripts), served by the hosts under /dashboard. They are
#: package data of `identity_hosting`, read through `importlib.resources` (so an installed wheel serves them too);
#: this is where they are in a checkout.
DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboard"
DASHBOARD_PREFIX = "/dashboard"
#: The page talks only to this service's API: no other origin may be reached, framed or loaded.
_DASHBOARD_HEADERS = (
    ("cache-control", "no-store, max-age=0"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    (
        "content-security-policy",
        "default-src 'self'; img-src 'self' data: https:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'",
    ),
)


class Dashboard(StaticFiles):
    """The dashboard's files, read once at start-up; answers GET requests under /dashboard (hosts ask first,
    before handing a request to the core: see `pages.Pages`)."""

    def __init__(self, directory: Traversable | None = None) -> None:
        root = directory if directory is not None else importlib.resources.files("identity_hosting") / "dashboard"
        super().__init__(DASHBOARD_PREFIX, root, _DASHBOARD_HEADERS)


# webhooks: delivery
def _operator_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The access log and the metrics (`identity_hosting.observability`)."""
    access_log = env.get("IDENTITY_ACCESS_LOG", "off").strip().lower()
    if access_log not in {"off", "text", "json"}:
        raise ConfigurationError("IDENTITY_ACCESS_LOG must be 'off', 'text' or 'json'")
    metrics = env.get("IDENTITY_METRICS", "off").strip().lower()
    if metrics not in {"on", "off"}:
        raise ConfigurationError("IDENTITY_METRICS must be 'on' or 'off'")
    token = env.get("IDENTITY_METRICS_TOKEN") or None
    if token is not None and (len(token) < 16 or not token.isascii() or not token.isprintable() or " " in token):
        raise ConfigurationError("IDENTITY_METRICS_TOKEN must be at least 16 printable ASCII characters, no spaces")
    if token is not None and metrics != "on":
        raise ConfigurationError("IDENTITY_METRICS_TOKEN is set but IDENTITY_METRICS is not 'on'")
    if metrics == "on" and importlib.util.find_spec("prometheus_client") is None:
        raise ConfigurationError("IDENTITY_METRICS=on needs the prometheus-client package, which is not installed")
    directory = env.get("PROMETHEUS_MULTIPROC_DIR")
    if metrics == "on" and directory and not Path(directory).is_dir():
        raise ConfigurationError("PROMETHEUS_MULTIPROC_DIR must name an existing directory (the metrics' files)")
    return {
        "access_log": "" if access_log == "off" else access_log,
        "metrics": metrics == "on",
        "metrics_token": token,
    }


def _webhook_number(env: Mapping[str, str], name: str, default: str, low: float, high: float) -> float:
    try:
        value = float(env.get(name, default))
    except ValueError:
        raise ConfigurationError(f"{name} must be a number") from None
    if not low <= value <= high:  # also refuses nan and inf
        raise ConfigurationError(f"{name} must be between {low:g} and {high:g}")
    return value


def _webhook_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The `IDENTITY_WEBHOOK_*` settings (the README's Configuration section lists them)."""
    # One switch for every outbound request (webhooks, OAuth providers); the former name still works.
    allowed = []
    for name in ("IDENTITY_ALLOW_PRIVATE_ADDRESSES", "IDENTITY_WEBHOOK_ALLOW_PRIVATE"):
        value = env.get(name, "0").strip().lower()
        if value not in {"0", "1"}:
            raise ConfigurationError(f"{name} must be 1 or 0")
        allowed.append(value == "1")
    keep = _webhook_number(env, "IDENTITY_WEBHOOK_KEEP_EVENTS", "10000", 1, 10_000_000)
    if keep != int(keep):
        raise ConfigurationError("IDENTITY_WEBHOOK_KEEP_EVENTS must be a whole number")
    return {
        "webhook_poll_s": _webhook_number(env, "IDENTITY_WEBHOOK_POLL_SECONDS", "1", 0.01, 3600),
        "webhook_timeout_s": _webhook_number(env, "IDENTITY_WEBHOOK_TIMEOUT_SECONDS", "15", 0.1, 120),
        "webhook_retention_hours": _webhook_number(env, "IDENTITY_WEBHOOK_RETENTION_HOURS", "72", 0.01, 24 * 365),
        "webhook_keep_events": int(keep),
        "webhook_allow_private": any(allowed),
    }
