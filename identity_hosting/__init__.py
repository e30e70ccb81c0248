"""identity_hosting: what the service's hosts share (configuration from the environment, store selection, mailers,
the dashboard's files) and the WSGI host (`identity_hosting.wsgi`). The ASGI host is the top-level `asgi_app`."""

from __future__ import annotations

from identity_hosting.mailers import (
    AsyncConsoleMailer,
    AsyncSmtpMailer,
    ConsoleMailer,
    MailDeliveryFailed,
    MailerPair,
    SmtpMailer,
    mailer_from_url,
)
from identity_hosting.settings import (
    DEV_INTERNAL_ADMIN_KEY,
    DEV_KEYS,
    DEV_PROJECT,
    DEV_PROJECT_ID,
    ConfigurationError,
    Dashboard,
    Settings,
    SystemEntropy,
    build_async_store,
    build_sync_store,
    configure_logging,
    report_configuration_error,
    wall_clock_ms,
)

__all__ = [
    "DEV_INTERNAL_ADMIN_KEY",
    "DEV_KEYS",
    "DEV_PROJECT",
    "DEV_PROJECT_ID",
    "AsyncConsoleMailer",
    "AsyncSmtpMailer",
    "ConfigurationError",
    "ConsoleMailer",
    "Dashboard",
    "MailDeliveryFailed",
    "MailerPair",
    "Settings",
    "SmtpMailer",
    "SystemEntropy",
    "build_async_store",
    "build_sync_store",
    "configure_logging",
    "mailer_from_url",
    "report_configuration_error",
    "wall_clock_ms",
]
