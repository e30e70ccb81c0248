"""The downstream section of the benchmark (benchmarks/downstream.py): the test each contender runs, against our
own fake, and how the section reports what it could not measure. Nothing here needs npm, moto or a port."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks import downstream
from benchmarks.run import Recorder
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_testing import IdentityFake
from identity_testing.fake import BASE_URL


@pytest.fixture(scope="module")
def fake() -> IdentityFake:
    return IdentityFake()


def test_the_in_process_test_signs_up_by_code_updates_and_reads_back_then_deletes_its_project(
    fake: IdentityFake,
) -> None:
    project = fake.create_project()
    with project.client("client") as client:
        user = downstream.fake_steps(project, client, "ada@example.com")
        assert user["display_name"] == downstream.DISPLAY_NAME
        assert user["primary_email"] == "ada@example.com"
        assert user["primary_email_verified"] is True  # signed up by the mailed code
        assert len(project.outbox("ada@example.com")) == 1
    project.delete()
    assert downstream.direct_test(fake, "bob@example.com")["display_name"] == downstream.DISPLAY_NAME


def test_the_lower_bound_makes_the_same_requests_into_the_core_and_deletes_its_project(fake: IdentityFake) -> None:
    user = downstream.core_test(fake, "erin@example.com")
    assert user["display_name"] == downstream.DISPLAY_NAME
    assert user["primary_email"] == "erin@example.com"
    assert user["primary_email_verified"] is True


@pytest.fixture
def dev_project_over_http(fake: IdentityFake) -> Iterator[tuple[httpx.Client, downstream.ServerInfo]]:
    """The fake's dev project as the standalone server serves it (same keys), through an in-process transport."""
    keys = DEV_PROJECT.keys
    info = downstream.ServerInfo(
        base_url=BASE_URL,
        project_id=DEV_PROJECT.id,
        publishable_client_key=keys.publishable_client_key,
        secret_server_key=keys.secret_server_key,
        internal_admin_key=DEV_INTERNAL_ADMIN_KEY,
    )
    with httpx.Client(transport=fake.transport(), base_url=BASE_URL) as http:
        yield http, info


def test_the_http_test_reads_the_code_from_the_outbox_and_its_tear_down_resets_the_project(
    fake: IdentityFake, dev_project_over_http: tuple[httpx.Client, downstream.ServerInfo]
) -> None:
    http, info = dev_project_over_http
    user = downstream.server_steps(http, info, "carol@example.com")
    assert user["display_name"] == downstream.DISPLAY_NAME
    assert user["primary_email"] == "carol@example.com"
    users = http.get("/api/v1/users", headers=info.server_headers()).json()["items"]
    assert [u["primary_email"] for u in users] == ["carol@example.com"]

    downstream.server_teardown(http, info)
    assert http.get("/api/v1/users", headers=info.server_headers()).json()["items"] == []
    assert http.get("/api/v1/emails/outbox", headers=info.server_headers()).json()["items"] == []
    # the same address signs up again after the reset: each test starts clean
    assert downstream.server_test(http, info, "carol@example.com")["primary_email"] == "carol@example.com"


def test_a_step_that_does_not_answer_as_expected_fails_the_test(fake: IdentityFake) -> None:
    project = fake.create_project(sign_up_enabled=False)
    with project.client("client") as client, pytest.raises(downstream.StepFailed, match=r"sign-in code|sign in"):
        downstream.fake_steps(project, client, "dave@example.com")
    project.delete()


def test_the_generated_suite_has_k_tests_on_the_plugins_fixtures_and_k_empty_ones(tmp_path: Path) -> None:
    direct, plugin, empty = downstream.write_test_files(tmp_path, 3)
    for generated, client in ((direct, "identity_direct"), (plugin, "identity_client")):
        tree = ast.parse(generated.read_text())
        tests = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        assert [[a.arg for a in t.args.args] for t in tests] == [["identity_project", client]] * 3
        assert len({downstream.email_of(i) for i in range(3)} & set(generated.read_text().split('"'))) == 3
    assert len([n for n in ast.parse(empty.read_text()).body if isinstance(n, ast.FunctionDef)]) == 3
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\n"  # the project's own pytest settings stay out


def test_the_generated_suite_passes_under_pytest_with_the_plugin_and_reports_each_tests_time(tmp_path: Path) -> None:
    direct, plugin, empty = downstream.write_test_files(tmp_path, 2)
    for generated in (direct, plugin):
        run = downstream.run_pytest(generated)
        assert len(run.per_test_s) == 2
        assert all(0 < seconds < run.wall_s for seconds in run.per_test_s)
    assert "def test_nothing_1():" in empty.read_text()


def test_contenders_that_could_not_run_read_not_measured_and_their_targets_are_never_met() -> None:
    rec = Recorder()
    for value in (10.0, 12.0, 11.0):
        rec.add("downstream.plugin_direct.ms", value)
        rec.add("downstream.plugin.ms", value * 2)
        rec.add("downstream.direct.ms", value - 1)
        rec.add("downstream.server.ms", value * 3)
    errors = {"firebase": "npm install firebase-tools failed (1): E404", "moto": "moto is not installed"}
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    downstream.add_to_report(report, rec, {"tests": 3, "errors": errors})
    by_label = {row["figure"]: row for row in report["rows"]}
    assert by_label[downstream.CONTENDERS["plugin_direct"]]["rate"] == 11.0
    assert by_label[downstream.CONTENDERS["plugin"]]["ratio"] == 2.0
    assert by_label[downstream.CONTENDERS["server"]]["ratio"] == 3.0
    assert str(by_label[downstream.CONTENDERS["firebase"]]["detail"]).startswith("not measured: npm install")
    assert [t["met"] for t in report["targets"]] == [None, None]
    assert all("not measured" in str(by_label[downstream.CONTENDERS[n]]["target"]) for n in ("firebase", "moto"))


def test_measured_contenders_are_held_to_the_targets() -> None:
    rec = Recorder()
    for name, ms in (("plugin_direct", 2.0), ("plugin", 4.0), ("firebase", 30.0), ("moto", 1.5)):
        rec.add(f"downstream.{name}.ms", ms)
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    downstream.add_to_report(report, rec, {"tests": 1, "errors": {}})
    assert [(t["value"], t["met"]) for t in report["targets"]] == [(15.0, True), (0.75, False)]
    assert math.isnan(float(str(report["rows"][-1]["rate"])))  # no pytest wall times recorded: no amortised figure


def test_nothing_is_reported_when_the_section_did_not_run() -> None:
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    downstream.add_to_report(report, Recorder(), {})
    assert report == {"rows": [], "targets": []}
