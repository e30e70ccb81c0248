"""The host's mailers against a real SMTP server (aiosmtpd on a free loopback port), the console mailer, and the
mailer spec parser."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from email.utils import parsedate_to_datetime

import pytest

from identity_hosting.mailers import (
    AsyncConsoleMailer,
    AsyncSmtpMailer,
    ConsoleMailer,
    MailDeliveryFailed,
    SmtpMailer,
    mailer_from_url,
)
from identity_proto.records import Email
from tests.processes import free_port
from tests.smtp_server import PASSWORD, Collector, Server, StartServer  # PASSWORD must never show up in an error

SENDER = "identity@example.test"
CODE = "314159"
EMAIL = Email(
    id="mail_1",
    to="ada@example.test",
    subject="Votre code de connexion, Ünïcode ✓",
    text=f"Your sign-in code is {CODE}.\nGrüße, ✓ the identity service\n",
    created_at_millis=1_700_000_000_123,
)


def _assert_arrived_intact(server: Server) -> None:
    assert len(server.handler.received) == 1
    got = server.handler.received[0]
    assert got.mail_from == SENDER
    assert got.rcpt_tos == [EMAIL.to]
    message = got.message
    assert message["From"] == SENDER
    assert message["To"] == EMAIL.to
    assert message["Subject"] == EMAIL.subject
    assert message.get_content_type() == "text/plain"
    assert message.get_content_charset() == "utf-8"
    assert message["Content-Transfer-Encoding"] == "quoted-printable"  # 7-bit clean on the wire
    assert message.get_content() == EMAIL.text
    assert parsedate_to_datetime(message["Date"]).timestamp() == EMAIL.created_at_millis // 1000
    assert message["Message-ID"].startswith("<")
    assert message["Message-ID"].endswith("@example.test>")


# --------------------------------------------------------------------------------------------------------------
# SMTP delivery


def test_sync_mailer_delivers_a_message_intact(start_smtp: StartServer) -> None:
    server = start_smtp()
    SmtpMailer(server.host, server.port, sender=SENDER, timeout=5).send(EMAIL)
    _assert_arrived_intact(server)


def test_async_mailer_delivers_a_message_intact(start_smtp: StartServer) -> None:
    server = start_smtp()
    mailer = AsyncSmtpMailer(SmtpMailer(server.host, server.port, sender=SENDER, timeout=5))
    asyncio.run(mailer.send(EMAIL))
    _assert_arrived_intact(server)


def test_async_mailer_built_from_a_url_does_not_block_the_event_loop(start_smtp: StartServer) -> None:
    server = start_smtp(Collector(data_delay_s=0.5))  # the server takes half a second to accept the message
    mailer = mailer_from_url(f"smtp://{server.host}:{server.port}?from={SENDER}").async_
    assert mailer is not None

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await mailer.send(EMAIL)
        task.cancel()
        return ticks

    ticks = asyncio.run(main())
    _assert_arrived_intact(server)
    assert ticks >= 10, f"the event loop ran only {ticks} ticks while mail was sent: send blocked it"


def test_a_closed_port_fails_fast_without_leaking_the_text_or_the_password() -> None:
    port = free_port()  # nothing listens there
    pair = mailer_from_url(f"smtp://mailer:{PASSWORD}@127.0.0.1:{port}?from={SENDER}")
    assert isinstance(pair.sync, SmtpMailer)
    assert pair.async_ is not None
    started = time.monotonic()
    with pytest.raises(MailDeliveryFailed) as info:
        pair.sync.send(EMAIL)
    assert time.monotonic() - started < pair.sync.timeout
    with pytest.raises(MailDeliveryFailed) as async_info:
        asyncio.run(pair.async_.send(EMAIL))

    for failure in (info.value, async_info.value):
        text = str(failure)
        assert f"127.0.0.1:{port}" in text
        assert "ConnectionRefusedError" in text
        for secret in (PASSWORD, CODE, EMAIL.text, "Grüße"):
            assert secret not in text
            assert secret not in repr(failure)
        # Raised outside the except block: the original error is neither the cause nor the context.
        assert failure.__cause__ is None
        assert failure.__context__ is None
    assert PASSWORD not in repr(pair)


def test_a_refused_recipient_raises(start_smtp: StartServer) -> None:
    server = start_smtp(Collector(refuse_rcpt="550 5.1.1 No such user here"))
    with pytest.raises(MailDeliveryFailed) as info:
        SmtpMailer(server.host, server.port, sender=SENDER, timeout=5).send(EMAIL)
    text = str(info.value)
    assert f"{server.host}:{server.port}" in text
    assert "SMTPRecipientsRefused" in text
    assert "550" in text
    assert CODE not in text
    assert server.handler.received == []


def test_credentials_from_the_url_reach_the_server(start_smtp: StartServer) -> None:
    handler = Collector()
    server = start_smtp(handler, authenticator=handler.authenticate, auth_require_tls=False)
    # Percent-encoded user and password: "ada@example" and the password.
    pair = mailer_from_url(f"smtp://ada%40example:{PASSWORD}@{server.host}:{server.port}?from={SENDER}")
    assert pair.sync is not None
    pair.sync.send(EMAIL)
    assert handler.logins == [(b"ada@example", PASSWORD.encode())]
    _assert_arrived_intact(server)


def test_a_wrong_password_raises_without_showing_it(start_smtp: StartServer) -> None:
    handler = Collector()
    server = start_smtp(handler, authenticator=handler.authenticate, auth_require_tls=False)
    wrong = "not-the-Sesame-password"
    mailer = SmtpMailer(server.host, server.port, sender=SENDER, timeout=5, username="ada", password=wrong)
    with pytest.raises(MailDeliveryFailed) as info:
        mailer.send(EMAIL)
    assert "SMTPAuthenticationError" in str(info.value)
    assert "535" in str(info.value)
    assert wrong not in str(info.value)
    assert wrong not in repr(mailer)
    assert handler.received == []


def test_starttls_against_a_server_without_it_raises(start_smtp: StartServer) -> None:
    server = start_smtp()  # no TLS context, so the server does not offer STARTTLS
    with pytest.raises(MailDeliveryFailed, match="SMTPNotSupportedError"):
        SmtpMailer(server.host, server.port, sender=SENDER, timeout=5, starttls=True).send(EMAIL)
    assert server.handler.received == []


# --------------------------------------------------------------------------------------------------------------
# Console


def test_console_mailer_writes_a_readable_block_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    async_mailer = AsyncConsoleMailer(stream)
    with asyncio.Runner() as runner, caplog.at_level(logging.DEBUG):  # the loop's own debug line comes before
        ConsoleMailer(stream).send(EMAIL)
        runner.run(async_mailer.send(EMAIL))
    block = stream.getvalue()
    first, second, rest = block.split("-" * 72 + "\n")
    assert first == second
    assert rest == ""
    assert first == f"To: {EMAIL.to}\nSubject: {EMAIL.subject}\n\n{EMAIL.text}"
    assert caplog.records == []


def test_console_mailer_defaults_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    pair = mailer_from_url("console")
    assert pair.sync is not None
    pair.sync.send(EMAIL)
    out = capsys.readouterr().out
    assert f"To: {EMAIL.to}" in out
    assert f"Subject: {EMAIL.subject}" in out
    assert EMAIL.text in out


# --------------------------------------------------------------------------------------------------------------
# mailer_from_url


def test_mailer_from_url_parses_the_four_forms() -> None:
    outbox = mailer_from_url("outbox")
    assert (outbox.sync, outbox.async_) == (None, None)

    console = mailer_from_url("console")
    assert isinstance(console.sync, ConsoleMailer)
    assert isinstance(console.async_, AsyncConsoleMailer)

    plain = mailer_from_url("smtp://mail.example.test:2525")
    assert isinstance(plain.sync, SmtpMailer)
    assert isinstance(plain.async_, AsyncSmtpMailer)
    assert plain.async_.mailer is plain.sync
    assert (plain.sync.host, plain.sync.port, plain.sync.starttls) == ("mail.example.test", 2525, False)
    assert (plain.sync.sender, plain.sync.username) == ("identity@localhost", None)
    assert "password=None" in repr(plain.sync)

    full = mailer_from_url(f"smtp://ada:{PASSWORD}@mail.example.test:587?starttls=1&from=id%40example.test")
    assert isinstance(full.sync, SmtpMailer)
    assert (full.sync.host, full.sync.port, full.sync.starttls) == ("mail.example.test", 587, True)
    assert (full.sync.sender, full.sync.username) == ("id@example.test", "ada")
    assert PASSWORD not in repr(full)
    assert "password=***" in repr(full.sync)


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("smtp://mail.example.test", "port"),
        (f"smtp://ada:{PASSWORD}@mail.example.test", "port"),
        ("smtp://mail.example.test:0", "port"),
        ("smtp://mail.example.test:99999", "port"),
        ("smtp://:25", "host"),
        ("smtp://mail.example.test:25?tls=1", "unknown smtp:// option"),
        ("smtp://mail.example.test:25?starttls=maybe", "starttls"),
        ("smtp://mail.example.test:25/path", "path"),
        ("pigeon://x", "unknown mailer"),
        ("smtps://mail.example.test:465", "unknown mailer"),
        ("", "unknown mailer"),
        ("Console", "unknown mailer"),
    ],
)
def test_mailer_from_url_rejects_other_specs(spec: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as info:
        mailer_from_url(spec)
    assert PASSWORD not in str(info.value)
