"""Mailers: how a host delivers the e-mail the core sends (sign-in codes, magic links, verification).

The core yields a `SendEmail` effect; a driver (`identity_proto.drivers.run` / `arun`) hands its `Email` to the
host's mailer, a `Mailer` (sync hosts) or an `AsyncMailer` (the ASGI host). A mailer delivers the message or
raises; it never drops one silently, so the core can tell the caller that mail did not go out.

Hosts choose the mailer with one spec string, parsed by `mailer_from_url`:

| spec | mailers | what happens to mail |
|---|---|---|
| `outbox` | none | nothing here: the core keeps every message in its store's outbox (dev, tests) |
| `console` | `ConsoleMailer`, `AsyncConsoleMailer` | each message is printed to standard output (dev) |
| `smtp://host:port` | `SmtpMailer`, `AsyncSmtpMailer` | each message is delivered to that SMTP server |

An SMTP spec may carry credentials and options: `smtp://user:password@host:587?starttls=1&from=id@example.com`
(`user` and `password` percent-encoded; `starttls=1` upgrades the connection with STARTTLS, verifying the server's
certificate, before logging in; `from=` sets the sender, `identity@localhost` by default). The port is required.

Why SMTP runs in a thread under asyncio: `smtplib` is blocking (connect, TLS handshake, one round trip per SMTP
command, up to `timeout` seconds each), and a slow or unreachable mail server must not stall every other request
on the event loop. `AsyncSmtpMailer.send` therefore runs the sync `SmtpMailer.send` in `asyncio.to_thread`.

Secrets: a message's text carries one-time codes and magic links, and the SMTP password is a credential. Neither
ever appears in a `MailDeliveryFailed` message, in a mailer's `repr`, or in a `ValueError` from
`mailer_from_url`. The console mailer writes to a stream, never to `logging`: it is the explicit dev choice of
printing mail, and log lines must never carry codes.

`smtplib`, `ssl`, `email` and `asyncio` are imported by the SMTP mailers when they first build or send a message,
not with this module, which every host imports (about 40 ms of CPU at start-up that a host on the outbox or the
console never needs).
"""

from __future__ import annotations

import errno
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO
from urllib.parse import parse_qs, unquote, urlsplit

from identity_proto.records import Email

if TYPE_CHECKING:
    from email.message import EmailMessage

__all__ = [
    "AsyncConsoleMailer",
    "AsyncSmtpMailer",
    "ConsoleMailer",
    "MailDeliveryFailed",
    "MailerPair",
    "SmtpMailer",
    "mailer_from_url",
]

DEFAULT_SENDER = "identity@localhost"
_SEPARATOR = "-" * 72
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_SMTP_OPTIONS = ("starttls", "from")


class MailDeliveryFailed(Exception):
    """A message could not be delivered. The message names the server and the kind of error, never the mail's
    text nor a credential."""


# --------------------------------------------------------------------------------------------------------------
# SMTP


class SmtpMailer:
    """Delivers each message over its own SMTP connection (standard library `smtplib`)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        sender: str = DEFAULT_SENDER,
        timeout: float = 10.0,
        starttls: bool = False,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        if not host:
            raise ValueError("SMTP host must not be empty")
        if not 0 < port < 65536:
            raise ValueError(f"SMTP port must be between 1 and 65535, not {port}")
        if "@" not in sender or any(char in sender for char in "\r\n"):
            raise ValueError(f"SMTP sender must be an e-mail address, not {sender!r}")
        if timeout <= 0:
            raise ValueError("SMTP timeout must be positive")
        if password is not None and username is None:
            raise ValueError("an SMTP password needs a username")
        self.host = host
        self.port = port
        self.sender = sender
        self.timeout = timeout
        self.starttls = starttls
        self.username = username
        self._password = password
        self._msgid_domain = sender.rpartition("@")[2].strip(">") or "localhost"

    def __repr__(self) -> str:
        # Never the password; whether there is one is all a log line needs.
        password = None if self._password is None else "***"
        return (
            f"SmtpMailer(host={self.host!r}, port={self.port}, sender={self.sender!r}, timeout={self.timeout}, "
            f"starttls={self.starttls}, username={self.username!r}, password={password})"
        )

    def build_message(self, email: Email) -> EmailMessage:
        """The RFC 5322 message for `email`: From, To, Subject, Date (its creation time), Message-ID and a UTF-8
        plain-text body."""
        from email.message import EmailMessage
        from email.utils import format_datetime, make_msgid

        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = email.to
        message["Subject"] = email.subject
        message["Date"] = format_datetime(datetime.fromtimestamp(email.created_at_millis / 1000, tz=UTC))
        message["Message-ID"] = make_msgid(domain=self._msgid_domain)
        # Quoted-printable keeps the message 7-bit clean: smtplib announces no BODY=8BITMIME for plain ASCII
        # addresses, and every relay accepts 7-bit mail.
        message.set_content(email.text, subtype="plain", charset="utf-8", cte="quoted-printable")
        return message

    def send(self, email: Email) -> None:
        """Deliver `email`, or raise `MailDeliveryFailed`."""
        import smtplib
        import ssl

        message = self.build_message(email)
        # The failure is raised *after* the except block, so it carries no __context__: the original exception's
        # text (a server's reply, an encoding error quoting part of the password) never reaches a traceback.
        failure: str | None = None
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self.username is not None:
                    smtp.login(self.username, self._password or "")
                refused = smtp.send_message(message, from_addr=self.sender, to_addrs=[email.to])
            if refused:
                codes = ", ".join(str(code) for code, _reply in refused.values())
                failure = f"the server refused the recipient (SMTP {codes})"
        except (smtplib.SMTPException, OSError, UnicodeError) as exc:
            failure = _describe(exc)
        if failure is not None:
            raise MailDeliveryFailed(f"mail delivery via SMTP {self.host}:{self.port} failed: {failure}")


def _describe(exc: BaseException) -> str:
    """The error's class and numeric details only: never its text, which may quote the message or a credential."""
    import smtplib

    detail = type(exc).__name__
    if isinstance(exc, smtplib.SMTPResponseException):
        detail += f" (SMTP {exc.smtp_code})"
    elif isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = ", ".join(str(code) for code, _reply in exc.recipients.values())
        detail += f" (SMTP {codes})"
    elif isinstance(exc, OSError) and exc.errno is not None:
        detail += f" ({errno.errorcode.get(exc.errno, exc.errno)})"
    return detail


class AsyncSmtpMailer:
    """The asyncio twin of `SmtpMailer`: each send runs in a worker thread, so the event loop never blocks."""

    def __init__(self, mailer: SmtpMailer) -> None:
        self.mailer = mailer

    def __repr__(self) -> str:
        return f"AsyncSmtpMailer({self.mailer!r})"

    async def send(self, email: Email) -> None:
        """Deliver `email`, or raise `MailDeliveryFailed`."""
        import asyncio

        await asyncio.to_thread(self.mailer.send, email)


# --------------------------------------------------------------------------------------------------------------
# Console (dev)

# One lock for every console mailer: they usually share sys.stdout, and a message must print as one block.
_console_lock = threading.Lock()


class ConsoleMailer:
    """Prints each message to `stream` (standard output by default) as a readable block. Dev only: the text
    carries one-time codes, which is the point here and why this never goes through `logging`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def __repr__(self) -> str:
        return f"ConsoleMailer(stream={'sys.stdout' if self._stream is None else repr(self._stream)})"

    def send(self, email: Email) -> None:
        """Write `email` to the stream."""
        # sys.stdout is looked up per message, so a redirected stdout (pytest's capsys, say) is honoured.
        stream = sys.stdout if self._stream is None else self._stream
        text = email.text.rstrip("\n")
        block = f"To: {email.to}\nSubject: {email.subject}\n\n{text}\n{_SEPARATOR}\n"
        with _console_lock:
            stream.write(block)
            stream.flush()


class AsyncConsoleMailer:
    """The asyncio twin of `ConsoleMailer` (writing one short block to a stream does not need a thread)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.mailer = ConsoleMailer(stream)

    def __repr__(self) -> str:
        return f"AsyncConsoleMailer({self.mailer!r})"

    async def send(self, email: Email) -> None:
        """Write `email` to the stream."""
        self.mailer.send(email)


# --------------------------------------------------------------------------------------------------------------
# Selection


@dataclass(frozen=True, slots=True)
class MailerPair:
    """The mailers for one spec: `sync` (a `Mailer`) for sync hosts, `async_` (an `AsyncMailer`) for asyncio
    hosts; both None for `outbox`."""

    sync: SmtpMailer | ConsoleMailer | None
    async_: AsyncSmtpMailer | AsyncConsoleMailer | None


def mailer_from_url(spec: str) -> MailerPair:
    """The mailers `spec` describes (see the module docstring). Raises `ValueError` for anything else; the error
    never repeats the spec, which may hold a password."""
    spec = spec.strip()
    if spec == "outbox":
        return MailerPair(None, None)
    if spec == "console":
        return MailerPair(ConsoleMailer(), AsyncConsoleMailer())
    scheme = spec.partition("://")[0].lower() if "://" in spec else ""
    if scheme != "smtp":
        shown = f"scheme {scheme!r}" if scheme else "a spec that is neither a keyword nor a URL"
        raise ValueError(f"unknown mailer: {shown}; use 'outbox', 'console' or 'smtp://[user:password@]host:port'")
    smtp = _smtp_from_url(spec)
    return MailerPair(smtp, AsyncSmtpMailer(smtp))


def _smtp_from_url(url: str) -> SmtpMailer:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = 0
    if not parts.hostname or port is None or port == 0:
        raise ValueError("an smtp:// mailer URL needs a host and a port from 1 to 65535: smtp://host:port")
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError("an smtp:// mailer URL takes no path or fragment: smtp://[user:password@]host:port[?...]")
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError("the smtp:// mailer URL's query string is malformed") from None
    unknown = sorted(set(query) - set(_SMTP_OPTIONS))
    if unknown:
        raise ValueError(f"unknown smtp:// option(s) {', '.join(unknown)}; known: {', '.join(_SMTP_OPTIONS)}")
    if any(len(values) > 1 for values in query.values()):
        raise ValueError("each smtp:// option may be given once")
    starttls = False
    if "starttls" in query:
        flag = query["starttls"][0].lower()
        if flag not in _TRUE | _FALSE:
            raise ValueError("smtp:// option starttls must be 1 or 0")
        starttls = flag in _TRUE
    sender = query["from"][0] if "from" in query else DEFAULT_SENDER
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return SmtpMailer(
        parts.hostname, port, sender=sender, starttls=starttls, username=username or None, password=password
    )
