"""The fake's permission helpers: a definition made and a project permission granted in one line each, read by the
signed-in user as the SDK reads it."""

from __future__ import annotations

import pytest

from identity_testing import IdentityFake


def test_the_fake_defines_and_grants_a_project_permission_the_user_then_reads() -> None:
    project = IdentityFake().create_project()
    project.define_permission("read_reports")
    made = project.define_permission("manage_reports", contained=["read_reports"], description="Reports")
    assert made == {"id": "manage_reports", "description": "Reports", "contained_permission_ids": ["read_reports"]}
    user = project.create_user("ada@example.com")
    project.grant_project_permission(user["id"], "manage_reports")
    tokens = project.sign_in(user["id"])
    with project.client("client", access_token=tokens["access_token"]) as http:
        listed = http.get("/api/v1/project-permissions", params={"user_id": "me", "recursive": "true"}).json()
    assert [p["id"] for p in listed["items"]] == ["manage_reports", "read_reports"]


def test_the_fake_refuses_a_grant_of_a_permission_nobody_defined() -> None:
    project = IdentityFake().create_project()
    user = project.create_user("ada@example.com")
    with pytest.raises(AssertionError, match="PERMISSION_NOT_FOUND"):
        project.grant_project_permission(user["id"], "never_defined")
    with pytest.raises(AssertionError, match="PERMISSION_ID_ALREADY_EXISTS"):
        project.define_permission("team_admin", scope="team")
