"""The peers section of the benchmark (benchmarks/peers.py): how the Firebase Auth emulator is configured and
started, and how its figures are reported. Nothing here needs npm or starts the emulator."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import peers
from benchmarks.run import Recorder


def test_firebase_json_puts_the_auth_emulator_and_its_helpers_on_our_loopback_ports_without_ui() -> None:
    config = peers.firebase_json(41001, 41002, 41003)["emulators"]
    assert config["auth"] == {"host": "127.0.0.1", "port": 41001}
    assert config["hub"] == {"host": "127.0.0.1", "port": 41002}
    assert config["logging"] == {"host": "127.0.0.1", "port": 41003}
    assert config["ui"] == {"enabled": False}
    started = {name for name, value in config.items() if isinstance(value, dict) and "port" in value}
    assert started == {"auth", "hub", "logging"}


def test_emulator_command_starts_auth_alone_on_a_demo_project() -> None:
    command = peers.emulator_command(Path("/x/firebase.js"))
    assert command[1:] == ["/x/firebase.js", "emulators:start", "--only", "auth", "--project", "demo-bench"]


def test_emulator_command_refuses_a_project_that_would_need_credentials() -> None:
    with pytest.raises(ValueError, match="demo-"):
        peers.emulator_command(Path("/x/firebase.js"), project="my-real-project")


def test_emulator_env_keeps_the_users_home_and_credentials_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/home/someone/key.json")
    monkeypatch.setenv("FIREBASE_TOKEN", "token")
    env = peers.emulator_env(tmp_path)
    assert env["HOME"] == str(tmp_path)
    assert env["TMPDIR"] == str(tmp_path)
    assert env["XDG_CONFIG_HOME"].startswith(str(tmp_path))
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env
    assert "FIREBASE_TOKEN" not in env


def _run(rate: float, cpu_us: float = 500.0, errors: int = 0) -> peers.Run:
    return peers.Run(rate=rate, p50_ms=1.0, p99_ms=2.0, cpu_us=cpu_us, errors=errors)


def test_each_of_ours_is_divided_by_the_mean_of_the_emulator_runs_around_it() -> None:
    emulator = [_run(100, 900), _run(300, 700), _run(200, 800)]
    ours = [_run(400, 400), _run(500, 500)]
    assert peers.pair_ratios(emulator, ours) == [(2.0, 2.0), (2.0, 1.5)]


def test_a_run_with_failed_requests_on_either_side_gives_no_ratio() -> None:
    emulator = [_run(100), _run(100, errors=3), _run(100)]
    ratios = peers.pair_ratios(emulator, [_run(400), _run(400)])
    assert all(math.isnan(value) for pair in ratios for value in pair)
    ratios = peers.pair_ratios([_run(100), _run(100)], [_run(400, errors=1)])
    assert all(math.isnan(value) for value in ratios[0])


def test_emulator_runs_must_bracket_ours() -> None:
    with pytest.raises(ValueError, match="bracket"):
        peers.pair_ratios([_run(100)], [_run(200)])


def test_a_section_that_could_not_measure_reports_its_targets_not_measured_never_met() -> None:
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    peers.add_to_report(report, Recorder(), {"error": "npm install firebase-tools failed (1): E404"})
    assert [(row["figure"], row["detail"]) for row in report["rows"]] == [
        ("not measured", "npm install firebase-tools failed (1): E404")
    ]
    assert [t["threshold"] for t in report["targets"]] == [15.0, 2.0]
    assert all(t["met"] is None for t in report["targets"])


def test_measured_figures_are_held_to_their_targets() -> None:
    rec = Recorder()
    for value in (14.0, 16.0, 15.5):
        rec.add("peers.startup.ratio", value)
    for value in (1.9, 1.2, 1.5):
        rec.add("peers.load.ratio", value)
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    peers.add_to_report(report, rec, {"emulator": "firebase-tools 1.2.3"})
    assert [(t["value"], t["met"]) for t in report["targets"]] == [(15.5, True), (1.5, False)]
    assert "firebase-tools 1.2.3" in str(report["rows"][0]["section"])


def test_a_run_without_the_section_reports_nothing_of_it() -> None:
    report: dict[str, list[dict[str, object]]] = {"rows": [], "targets": []}
    peers.add_to_report(report, Recorder(), {})
    assert report == {"rows": [], "targets": []}
