"""The fake and password flows: `project.last_code(email, kind="password_reset")` gives the code of the newest
reset mail, which resets the password in process; the sign-in kind (the default) never returns a reset code."""

from __future__ import annotations

import pytest

from identity_testing import IdentityFake

CALLBACK = "http://localhost/handler/password-reset"


def test_last_code_of_the_password_reset_kind_resets_the_password() -> None:
    project = IdentityFake().create_project()
    project.create_user("ada@example.com", password="correct horse")
    with project.client("client") as http:
        sent = http.post(
            "/api/v1/auth/password/send-reset-code", json={"email": "ada@example.com", "callback_url": CALLBACK}
        )
        assert sent.json() == {"success": "maybe, only if user with e-mail exists"}
        code = project.last_code("ada@example.com", kind="password_reset")
        assert len(code) == 45
        assert project.outbox("ada@example.com")[0]["magic_link"] == f"{CALLBACK}?code={code}"
        with pytest.raises(LookupError, match="no sign-in code was mailed"):
            project.last_code("ada@example.com")  # a reset mail is no sign-in mail
        reset = http.post("/api/v1/auth/password/reset", json={"code": code, "password": "new staple 2024"})
        assert reset.json() == {"success": True}
        signed_in = http.post(
            "/api/v1/auth/password/sign-in", json={"email": "ada@example.com", "password": "new staple 2024"}
        )
        assert signed_in.status_code == 200


def test_last_code_knows_its_kinds() -> None:
    project = IdentityFake().create_project()
    with pytest.raises(LookupError, match=r"no password-reset code was mailed to nobody@example\.com"):
        project.last_code("nobody@example.com", kind="password_reset")
    with pytest.raises(ValueError, match="unknown kind of code 'reset'"):
        project.last_code("nobody@example.com", kind="reset")
