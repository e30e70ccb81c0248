"""Provider tokens at rest (`identity_proto.provider_tokens`): sealed with AES-GCM, bound to their account row."""

from __future__ import annotations

import base64

import pytest

from identity_hosting.settings import ConfigurationError, Settings
from identity_proto.context import ServiceOptions
from identity_proto.effects.oauth_provider import ProviderTokens
from identity_proto.provider_tokens import DEV_TOKEN_KEY, SealedTokens, decode_token_key, seal, token_key, unseal
from identity_proto.tokens import SeededEntropy

KEY = bytes(range(32))
TOKENS = ProviderTokens(access_token="at-secret", refresh_token="rt-secret", expires_at_millis=123, scope="ignored")


def _seal(key: bytes = KEY, row: str = "row-1") -> str:
    return seal(TOKENS, "openid email", key, project_id="p", account_row_id=row, entropy=SeededEntropy(1))


def test_sealed_tokens_open_with_their_key_and_carry_the_scope_they_were_tagged_with() -> None:
    opened = unseal(_seal(), KEY, project_id="p", account_row_id="row-1")
    assert opened == ProviderTokens("at-secret", "rt-secret", 123, "openid email")


def test_a_sealed_blob_shows_no_token() -> None:
    sealed = _seal()
    assert "secret" not in sealed
    assert b"secret" not in base64.urlsafe_b64decode(sealed[3:] + "==")


@pytest.mark.parametrize(
    ("key", "project_id", "row"),
    [(DEV_TOKEN_KEY, "p", "row-1"), (KEY, "other-project", "row-1"), (KEY, "p", "row-2")],
    ids=["other key", "other project", "other account row"],
)
def test_a_sealed_blob_opens_only_with_its_key_for_its_account_row(key: bytes, project_id: str, row: str) -> None:
    with pytest.raises(SealedTokens):
        unseal(_seal(), key, project_id=project_id, account_row_id=row)


@pytest.mark.parametrize("blob", ["", "v1.", "v2.AAAA", "v1.not*base64", "v1." + "A" * 40])
def test_a_malformed_blob_is_refused(blob: str) -> None:
    with pytest.raises(SealedTokens):
        unseal(blob, KEY, project_id="p", account_row_id="row-1")


def test_dev_mode_without_a_key_uses_the_dev_key_and_production_stores_no_tokens() -> None:
    assert token_key(ServiceOptions(dev_mode=True)) == DEV_TOKEN_KEY
    assert token_key(ServiceOptions(dev_mode=False)) is None
    assert token_key(ServiceOptions(dev_mode=False, oauth_token_key=KEY)) == KEY


def test_hosts_read_the_key_as_32_bytes_of_base64url() -> None:
    encoded = base64.urlsafe_b64encode(KEY).decode().rstrip("=")
    settings = Settings.from_env({"IDENTITY_OAUTH_TOKEN_KEY": encoded})
    assert settings.service_options().oauth_token_key == KEY
    assert decode_token_key(encoded + "=") == KEY
    with pytest.raises(ConfigurationError, match="IDENTITY_OAUTH_TOKEN_KEY"):
        Settings.from_env({"IDENTITY_OAUTH_TOKEN_KEY": base64.urlsafe_b64encode(b"short").decode()})
