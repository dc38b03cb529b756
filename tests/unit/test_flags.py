"""The flags are declared once, on Settings (gateway/settings.py): the parser, the variables and the reference table
all follow it."""

from __future__ import annotations

import os
import pathlib

import msgspec
import pytest

from gateway.settings import Settings
from server.flags import FLAGS, reference_table, settings_from_args
from server.options import env_name

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("AGUI_GATEWAY_") or name == "IAC_CODE_AGUI_AUTH_TOKEN":
            monkeypatch.delenv(name)


def test_every_setting_has_exactly_one_flag():
    fields = [flag.field for flag in FLAGS]
    assert sorted(fields) == sorted(field.name for field in msgspec.structs.fields(Settings))


def test_the_flags_defaults_are_the_settings_defaults(clean_environment):
    assert settings_from_args([]) == Settings()


def test_a_variable_stands_for_its_flag_and_a_list_variable_is_split(clean_environment, monkeypatch):
    monkeypatch.setenv(env_name("--port"), "9000")
    monkeypatch.setenv(env_name("--oauth-scope"), "read, write")
    monkeypatch.setenv(env_name("--allowed-cwd"), os.pathsep.join(["/srv/a", "/srv/b/"]))
    settings = settings_from_args([])
    assert (settings.port, settings.oauth_scope, settings.allowed_cwd) == (9000, ("read", "write"), ("/srv/a", "/srv/b"))
    assert settings_from_args(["--port", "9001"]).port == 9001  # the command line wins


def test_the_reference_table_in_the_docs_is_the_generated_one():
    document = (ROOT / "docs" / "reference.md").read_text()
    start, end = document.index("<!-- flags -->\n") + len("<!-- flags -->\n"), document.index("<!-- /flags -->")
    assert document[start:end] == reference_table(), "regenerate it: python -m server.flags"


def test_an_empty_variable_leaves_an_optional_setting_unset_and_a_computed_one_computed(clean_environment, monkeypatch):
    monkeypatch.setenv(env_name("--agent-token"), "")
    monkeypatch.setenv(env_name("--state-dir"), "")
    monkeypatch.setenv(env_name("--public-url"), "https://gw.example.com/")
    settings = settings_from_args([])
    assert settings.agent_token is None and settings.state_dir == Settings().state_dir
    assert settings.public_url == "https://gw.example.com"  # a given value is finished


def test_defaults_are_shown_as_a_user_would_write_them():
    shown = {flag.name: flag.shown for flag in FLAGS}
    assert shown["--retention"] == "7d" and shown["--event-log-retention"] == "10m" and shown["--upstream-interrupt-ttl"] == "0"
    assert shown["--redis-durability"] == "async" and shown["--state-dir"] == "unset" and shown["--copilotkit-path"] == "/copilotkit"
    assert shown["--oauth-algorithms"] == "RS256,ES256" and shown["--trusted-proxies"] == "unset"
    choices = {flag.name: flag.choices for flag in FLAGS}
    assert choices["--log-level"] == ("debug", "info", "warning", "error") and choices["--http"] == ("auto", "httptools", "h11")
