"""The whole service over one store of the contract suite, driven in process: for rules that only hold if
the flows and every store agree."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import Request, SeededEntropy, Service, ServiceOptions, run
from identity_proto.drivers import Store
from tests.contract.factories import T0
from tests.support import Reply, client_headers, server_headers

__all__ = ["CALLBACK", "ServiceOver"]

CALLBACK = "http://localhost:3000/handler/magic-link-callback"


@dataclass
class ServiceOver:
    """The service with the dev project on `store`, driven in process at `T0` (so that nothing it stores in
    Redis expires during a test, whatever the wall clock says)."""

    store: Store
    service: Service = field(
        default_factory=lambda: Service(ServiceOptions(password_rounds=4, rate_limits_enabled=False))
    )
    entropy: SeededEntropy = field(default_factory=lambda: SeededEntropy(11))
    now_ms: int = T0

    def __post_init__(self) -> None:
        run(self.service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=T0, entropy=self.entropy), self.store)

    def request(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Reply:
        raw = {**headers, "content-type": "application/json"} if body is not None else headers
        encoded = orjson.dumps(body) if body is not None else b""
        path, _, query = path.partition("?")
        request = Request(method, path, tuple(raw.items()), encoded, query)
        return Reply.of(run(self.service.handle(request, self.now_ms, self.entropy), self.store))

    def code_sign_in(self, email: str) -> Reply:
        sent = self.request(
            "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), {"email": email, "callback_url": CALLBACK}
        )
        assert sent.status == 200, sent.body
        outbox = self.request("GET", f"/api/v1/emails/outbox?to={email}", server_headers())
        otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox.json["items"][0]["subject"])
        assert otp is not None
        return self.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), {"code": otp[1] + sent.json["nonce"]})

    def password(self, action: str, email: str, password: str) -> Reply:
        return self.request(
            "POST", f"/api/v1/auth/password/{action}", client_headers(), {"email": email, "password": password}
        )

    def claim(self, access_token: str, email: str) -> Reply:
        """The client PATCH /users/me that sets `email` as the signed-in user's primary e-mail."""
        me = client_headers(**{"x-service-access-token": access_token})
        return self.request("PATCH", "/api/v1/users/me", me, {"primary_email": email})
