"""Over real HTTP against a real Hypercorn process: start-up, the authentication matrix, projects."""

from __future__ import annotations

import httpx
import pytest

from tests.auth_cases import AUTH_CASES, AuthCase
from tests.e2e.conftest import Server
from tests.support import PROJECT_ID, client_headers, internal_headers, server_headers

pytestmark = pytest.mark.e2e


def test_the_service_answers_on_its_embedded_defaults(server: Server, http: httpx.Client) -> None:
    response = http.get("/api/v1")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "Authentication: None" in response.text
    # Reported, not asserted on timing (shared machines are noisy); the benchmark prints it too.
    print(f"hypercorn process start to first 200: {server.seconds_to_first_200:.3f} s")


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.name)
def test_authentication_matrix_over_http(case: AuthCase, http: httpx.Client) -> None:
    headers = dict(case.headers)
    if case.content_type:
        headers["content-type"] = case.content_type
    response = http.request(case.method, case.path, headers=headers, content=case.body)
    assert response.status_code == case.status, response.text
    assert response.headers.get("x-service-known-error") == case.code
    if case.code is not None:
        body = response.json()
        assert body["code"] == case.code
        for key, value in case.details.items():
            assert body["details"][key] == value


def test_header_names_are_case_insensitive(http: httpx.Client) -> None:
    headers = {name.title(): value for name, value in server_headers().items()}
    response = http.get("/api/v1/projects/current", headers=headers)
    assert response.status_code == 200
    assert response.json()["id"] == PROJECT_ID


def test_a_project_lives_and_dies_over_http(http: httpx.Client) -> None:
    created = http.post("/api/v1/internal/projects", headers=internal_headers(), json={"display_name": "Over HTTP"})
    assert created.status_code == 201
    project = created.json()
    headers = {
        **client_headers(),
        "x-service-project-id": project["id"],
        "x-service-publishable-client-key": project["publishable_client_key"],
    }
    assert http.get("/api/v1/projects/current", headers=headers).json()["display_name"] == "Over HTTP"
    assert http.delete(f"/api/v1/internal/projects/{project['id']}", headers=internal_headers()).json() == {
        "success": True
    }
    gone = http.get("/api/v1/projects/current", headers=headers)
    assert (gone.status_code, gone.headers["x-service-known-error"]) == (400, "CURRENT_PROJECT_NOT_FOUND")


def test_an_oversized_body_is_413_over_http(http: httpx.Client) -> None:
    response = http.post(
        "/api/v1/internal/projects",
        headers={**internal_headers(), "content-type": "application/json"},
        content=b'{"display_name": "' + b"x" * (1024 * 1024 + 10) + b'"}',
    )
    assert response.status_code == 413
    assert response.json()["code"] == "REQUEST_BODY_TOO_LARGE"
