"""A real SMTP server for the tests (aiosmtpd on a free loopback port) that keeps what it receives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.processes import free_port

#: The only password `Collector.authenticate` accepts.
PASSWORD = "hunter2-Sesame"


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


@dataclass
class Collector:
    """An aiosmtpd handler that keeps what it receives; optionally refuses every recipient or answers slowly."""

    refuse_rcpt: str | None = None
    data_delay_s: float = 0.0
    received: list[Received] = field(default_factory=list)
    logins: list[tuple[bytes, bytes]] = field(default_factory=list)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        if self.refuse_rcpt is not None:
            return self.refuse_rcpt
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.data_delay_s:
            await asyncio.sleep(self.data_delay_s)
        # SMTP's CRLF line endings are the transport's; compare content in Python's \n.
        content = (envelope.original_content or b"").replace(b"\r\n", b"\n")
        message = message_from_bytes(content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(Received(str(envelope.mail_from), list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        self.logins.append((auth_data.login, auth_data.password))
        # handled=False: aiosmtpd itself answers (235, or 535 on failure); True would mean "already answered".
        return AuthResult(success=auth_data.password == PASSWORD.encode(), handled=False)


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    handler: Collector


StartServer = Callable[..., Server]


@pytest.fixture
def start_smtp() -> Iterator[StartServer]:
    """Starts real aiosmtpd servers on free loopback ports; stops every one of them afterwards."""
    controllers: list[Controller] = []

    def start(handler: Collector | None = None, **smtp_kwargs: Any) -> Server:
        handler = handler if handler is not None else Collector()
        for _attempt in range(3):  # another process may take the free port between asking and binding
            port = free_port()
            # server_hostname: otherwise aiosmtpd asks socket.getfqdn(), which can stall on a container's DNS.
            controller = Controller(
                handler, hostname="127.0.0.1", port=port, server_hostname="smtp.test", ready_timeout=10, **smtp_kwargs
            )
            try:
                controller.start()
            except OSError:
                controller.loop.close()  # the server thread never ran the loop, so it never closed it
                continue
            controllers.append(controller)
            return Server("127.0.0.1", port, handler)
        pytest.fail("aiosmtpd could not bind a free loopback port in 3 attempts", pytrace=False)

    yield start
    for controller in controllers:
        controller.stop()
