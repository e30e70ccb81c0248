"""Production configuration never takes a public dev value: the dev project's id and the dev keys are refused, and
start-up disables a dev project found in the store (`Settings.disabled_projects`)."""

from __future__ import annotations

import pytest

from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_KEYS, DEV_PROJECT_ID, ConfigurationError, Settings

PRODUCTION = {
    "IDENTITY_PROJECT_ID": "33333333-3333-4333-8333-333333333333",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_production_client_key_0000",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_production_server_key_0000",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_production_admin_key_00000",
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("IDENTITY_PROJECT_ID", DEV_PROJECT_ID),
        ("IDENTITY_PUBLISHABLE_CLIENT_KEY", DEV_KEYS.publishable_client_key),
        ("IDENTITY_SECRET_SERVER_KEY", DEV_KEYS.secret_server_key),
        ("IDENTITY_SUPER_SECRET_ADMIN_KEY", DEV_KEYS.super_secret_admin_key),
        ("IDENTITY_INTERNAL_ADMIN_KEY", DEV_INTERNAL_ADMIN_KEY),
    ],
)
def test_production_configuration_refuses_the_public_dev_values(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match="dev"):
        Settings.from_env({**PRODUCTION, name: value})


def test_production_start_disables_the_dev_project_and_dev_mode_does_not() -> None:
    assert Settings.from_env(PRODUCTION).disabled_projects == (DEV_PROJECT_ID,)
    assert Settings.from_env({}).disabled_projects == ()
