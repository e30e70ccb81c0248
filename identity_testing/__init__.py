"""identity_testing: the identity service as an in-process fake for your own test suites.

    from identity_testing import IdentityFake

    fake = IdentityFake()                          # memory store, dev/test mode: starts in milliseconds
    project = fake.create_project(sign_up_enabled=True)
    user = project.create_user(email="ada@example.com", password="correct horse")
    tokens = project.sign_in(user["id"])           # {"access_token", "refresh_token"}
    with project.client("client", access_token=tokens["access_token"]) as http:
        assert http.get("/api/v1/users/me").json()["primary_email"] == "ada@example.com"
    fake.clock.advance(minutes=10)                 # the access token has now expired

Everything goes through the real service (the same core, the same rules, real ES256 tokens, real TOTP), in process:
`client()` is an `httpx.Client` on the WSGI host and `async_client()` an `httpx.AsyncClient` on the ASGI host, with
no port. The pytest plugin (`identity_testing.pytest_plugin`, registered automatically) turns this into fixtures.

Verifying the fake's tokens in your own backend, without a port: `project.issuer`, `project.audience`,
`project.jwks_url`, `project.jwks()` (the JWKS document) and `project.jwk_client()` (a PyJWT `PyJWKClient` that
fetches the JWKS from the fake in process); `fake.transport()` serves any other HTTP client (httpx) in process.

Passkeys without a browser: `project.passkey_authenticator()` is a software authenticator
(`identity_testing.passkeys.PasskeyAuthenticator`) that registers (`register(client)`) and signs in
(`sign_in(client)`) with real WebAuthn answers.

    signing_key = project.jwk_client().get_signing_key_from_jwt(token)
    claims = jwt.decode(token, signing_key, algorithms=["ES256"], audience=project.audience, issuer=project.issuer)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from identity_testing.fake import FakeClock, IdentityFake, TestProject
    from identity_testing.passkeys import PasskeyAuthenticator

__all__ = ["FakeClock", "IdentityFake", "PasskeyAuthenticator", "TestProject"]


def __getattr__(name: str) -> Any:
    # The service is imported when a name of it is first used, not with the package: the pytest plugin lives in this
    # package and pytest loads it in every suite where the package is installed, most of which never use it.
    if name == "PasskeyAuthenticator":
        from identity_testing import passkeys

        return passkeys.PasskeyAuthenticator
    if name in __all__:
        from identity_testing import fake

        return getattr(fake, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
