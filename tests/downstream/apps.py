"""Two tiny applications that use the identity service as their users would: a Flask app and a Starlette app.

Both trust the identity service for who is calling: they forward the caller's access token to GET /users/me
(client access), and their admin routes write server metadata with the server key.
"""

from __future__ import annotations

from typing import Any

import httpx
import jwt
from flask import Flask, jsonify, request
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _bearer(authorization: str | None) -> str | None:
    if authorization and authorization.startswith("Bearer "):
        return authorization[7:]
    return None


def create_flask_app(identity: httpx.Client, client_headers: dict[str, str], server_headers: dict[str, str]) -> Flask:
    """A shop backend: /profile greets the signed-in user; /admin/plan/<user_id> sets their plan."""
    app = Flask("shop")

    @app.get("/profile")
    def profile() -> Any:
        token = _bearer(request.headers.get("Authorization"))
        if token is None:
            return jsonify(error="sign in first"), 401
        me = identity.get("/api/v1/users/me", headers={**client_headers, "x-service-access-token": token})
        if me.status_code != 200:
            return jsonify(error=me.json()["code"]), 401
        user = me.json()
        plan = (user.get("client_read_only_metadata") or {}).get("plan", "free")
        return jsonify(greeting=f"Hello, {user['display_name'] or user['primary_email']}!", plan=plan)

    @app.post("/admin/plan/<user_id>")
    def set_plan(user_id: str) -> Any:
        plan = request.get_json()["plan"]
        reply = identity.patch(
            f"/api/v1/users/{user_id}",
            headers=server_headers,
            json={"client_read_only_metadata": {"plan": plan}, "server_metadata": {"billing": "manual"}},
        )
        return jsonify(ok=reply.status_code == 200), reply.status_code

    return app


def create_starlette_app(
    identity: httpx.AsyncClient, client_headers: dict[str, str], server_headers: dict[str, str]
) -> Starlette:
    """A notes API: /whoami says who the token belongs to; /teams lists the caller's teams."""

    async def whoami(request: Request) -> JSONResponse:
        token = _bearer(request.headers.get("authorization"))
        if token is None:
            return JSONResponse({"error": "sign in first"}, status_code=401)
        me = await identity.get("/api/v1/users/me", headers={**client_headers, "x-service-access-token": token})
        if me.status_code != 200:
            return JSONResponse({"error": me.json()["code"]}, status_code=401)
        return JSONResponse({"user_id": me.json()["id"], "email": me.json()["primary_email"]})

    async def teams(request: Request) -> JSONResponse:
        token = _bearer(request.headers.get("authorization")) or ""
        listed = await identity.get(
            "/api/v1/teams", params={"user_id": "me"}, headers={**client_headers, "x-service-access-token": token}
        )
        if listed.status_code != 200:
            return JSONResponse({"error": listed.json()["code"]}, status_code=401)
        return JSONResponse({"teams": [team["display_name"] for team in listed.json()["items"]]})

    return Starlette(routes=[Route("/whoami", whoami), Route("/teams", teams)])


def create_verifying_flask_app(jwk_client: jwt.PyJWKClient, issuer: str, audience: str) -> Flask:
    """A reports backend that verifies access tokens itself (no call to the identity service per request): the
    signature with the project's JWKS, then `iss`, `aud` and `exp` with PyJWT."""
    app = Flask("reports")

    @app.get("/reports")
    def reports() -> Any:
        token = _bearer(request.headers.get("Authorization"))
        if token is None:
            return jsonify(error="sign in first"), 401
        try:
            key = jwk_client.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key, algorithms=["ES256"], audience=audience, issuer=issuer)
        except jwt.ExpiredSignatureError:
            return jsonify(error="expired"), 401
        except jwt.PyJWTError as exc:
            return jsonify(error=type(exc).__name__), 401
        return jsonify(user_id=claims["sub"], email=claims["email"])

    return app
