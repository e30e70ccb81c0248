"""The in-process fake's `last_code` reads the codes of each kind: a contact channel verified with the code its
mail carries, and a sign-in code still found as before (and not mistaken for a verification code)."""

from __future__ import annotations

import pytest

from identity_testing import IdentityFake


def test_the_fake_finds_the_verification_code_mailed_for_a_contact_channel() -> None:
    project = IdentityFake().create_project()
    user = project.create_user("ada@example.com", verified=False)
    tokens = project.sign_in(user["id"])
    with project.client("client", access_token=tokens["access_token"]) as http:
        sent = http.post(
            "/api/v1/contact-channels/send-verification-code",
            json={"email": "ada@example.com", "callback_url": "http://localhost/handler/email-verification"},
        )
        assert sent.json() == {"success": True}
        with pytest.raises(LookupError):
            project.last_code("ada@example.com")  # no sign-in code was mailed
        code = project.last_code("ada@example.com", kind="email_verification")
        assert len(code) == 45
        assert http.post("/api/v1/contact-channels/verify", json={"code": code}).json() == {"success": True}
        assert http.get("/api/v1/users/me").json()["primary_email_verified"] is True


def test_last_code_names_the_kinds_it_knows() -> None:
    project = IdentityFake().create_project()
    with pytest.raises(ValueError, match="email_verification"):
        project.last_code("ada@example.com", kind="no_such_kind")
