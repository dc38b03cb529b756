"""The settings parser alone: durations, rates, algorithms, environment variables, refusals."""

from __future__ import annotations

import pytest

from gateway.setting_values import parse_duration, parse_rate
from server.cli import settings_from_args


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), (" 1.5h ", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-5", "5w", "", "1e3"])
def test_bad_durations_are_refused(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_rates():
    assert parse_rate("20/s") == (20, 20) and parse_rate("600/m") == (10, 600) and parse_rate("3600 / h") == (1, 3600)
    for bad in ("0/s", "fast", "10/d"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_environment_variables_feed_every_kind_of_flag(monkeypatch):
    monkeypatch.setenv("AGUI_GATEWAY_OAUTH_AUDIENCE", "api://a, api://b")
    monkeypatch.setenv("AGUI_GATEWAY_RATE_LIMIT", "600/m")
    monkeypatch.setenv("AGUI_GATEWAY_MAX_CONCURRENT_RUNS", "7")
    monkeypatch.setenv("AGUI_GATEWAY_INTERRUPT_TTL", "0")
    settings = settings_from_args(["--oauth-issuer", "https://issuer", "--oauth-jwks-url", "https://issuer/jwks"])
    assert settings.oauth_audience == ("api://a", "api://b") and settings.rate_limit == (10, 600)
    assert settings.max_concurrent_runs == 7 and settings.interrupt_ttl == 0


def test_unsafe_or_incomplete_oauth_settings_are_refused():
    with pytest.raises(ValueError):
        settings_from_args(["--oauth-algorithms", "HS256"])
    with pytest.raises(ValueError):
        settings_from_args(["--oauth-algorithms", "none"])
    with pytest.raises(ValueError):
        settings_from_args(["--oauth-jwks-url", "https://issuer/jwks"])


def test_workspace_roots_must_be_absolute():
    with pytest.raises(ValueError, match="absolute"):
        settings_from_args(["--allowed-cwd", "relative/path"])
    assert settings_from_args(["--allowed-cwd", "/srv//a/../b"]).allowed_cwd == ("/srv/b",)


def test_a_store_password_never_shows_in_the_settings_repr():
    from gateway.settings import Settings, redact_url

    settings = Settings(store="redis://:hunter2@redis:6379/0")
    assert "hunter2" not in repr(settings) and "redis://:***@redis:6379/0" in repr(settings)
    assert redact_url("redis+sentinel://u:p@h1:26379,h2:26379/mymaster") == "redis+sentinel://u:***@h1:26379,h2:26379/mymaster"
    assert redact_url("redis://redis:6379/0") == "redis://redis:6379/0"


def test_a_bad_value_in_a_repeatable_flags_variable_is_one_sentence_not_a_traceback(monkeypatch):
    from server.options import ConfigError

    monkeypatch.setenv("AGUI_GATEWAY_TRUSTED_PROXIES", "10.0.0.0/8, not-a-network")
    with pytest.raises(
        ConfigError,
        match=r"'not-a-network' is not an IP address or CIDR .* \(flag --trusted-proxies, variable AGUI_GATEWAY_TRUSTED_PROXIES\)",
    ):
        settings_from_args([])
