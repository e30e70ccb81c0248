"""The hosts' OAuth provider clients: perform the core's provider effects (`identity_proto.effects.oauth_provider`)
over HTTP with authlib (code exchange with the PKCE verifier, refresh) and joserfc (ID tokens verified against the
provider's JWKS: signature, `iss`, `aud` = client id, `exp`, `nonce`). Nothing here parses a JWT or builds an OAuth
request by hand.

- `ProviderHttpClient` (sync: WSGI host, the fake) and `AsyncProviderHttpClient` (the ASGI host); each holds one
  httpx client (closed with the host), a timeout for every call (`IDENTITY_OAUTH_TIMEOUT_SECONDS`), a cache of
  discovery documents and of JWKS (per URL, `CACHE_TTL_S`; a JWKS is fetched again, once, when an ID token names a
  key it does not hold).
- Identity: from the verified ID token when the provider speaks OpenID Connect (its endpoints name a `jwks_uri`;
  the userinfo endpoint fills in a missing e-mail), else from its API: GitHub `/user` + `/user/emails` (the primary
  verified address), Discord `/users/@me`, Bitbucket `/2.0/user` + `/2.0/user/emails`, Spotify `/v1/me`, and the
  OIDC userinfo of Microsoft (and of a provider whose token carries no ID token).
- Failures become `ProviderFailure`: an OAuth `access_denied` -> access_denied; `invalid_grant` at the token
  endpoint -> invalid_grant (for a refresh: invalid_token); connection errors, timeouts, 5xx, answers that are no
  JSON object, ID tokens that fail verification -> unavailable. Tokens are never logged.
- Addresses (SSRF): every URL called (discovery, token, userinfo, JWKS, the provider APIs) follows the address rule
  of the webhook sender (`identity_hosting.egress`: as written, and every resolved address at connect time; global
  unicast only unless `allow_private`), and must be https unless the host is in dev mode (`require_https`). A
  refusal is a connection error: `ProviderFailure("unavailable")`, no request made.
- In-process dispatch: a URL under the service's own mock provider (`MOCK_OAUTH_PATH` below the base URL) is served
  by the host's own app through an httpx WSGI/ASGI transport, so one worker never calls itself over a socket (the
  hosts give their app in dev mode only: production has no mock provider).

Where the code is: `identity_hosting.oauth_client_async` (`AsyncProviderHttpClient`, the source),
`identity_hosting.oauth_client_sync` (`ProviderHttpClient`, generated from it by `scripts/generate_sync`: edit the
source), `identity_hosting.oauth_answers` (what both share that is no I/O).
"""

from __future__ import annotations

from identity_hosting.oauth_answers import CACHE_TTL_S, is_local_mock_url, local_mock_mount
from identity_hosting.oauth_client_async import AsyncProviderHttpClient
from identity_hosting.oauth_client_sync import ProviderHttpClient

__all__ = [
    "CACHE_TTL_S",
    "AsyncProviderHttpClient",
    "ProviderHttpClient",
    "is_local_mock_url",
    "local_mock_mount",
]
