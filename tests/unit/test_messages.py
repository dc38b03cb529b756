"""The localized error catalogue: every code has a sentence in every language, a field is named where the sentence
has a place for it, and no sentence ever shows a placeholder, with or without a field."""

from __future__ import annotations

import pytest

from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import LANGUAGES, message_for, negotiate


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda code: code.name)
def test_every_code_reads_whole_in_every_language(code, language):
    plain = message_for(GatewayError(code), language)
    named = message_for(GatewayError(code, field="messages[3].content"), language)
    assert plain and "{" not in plain and "}" not in plain
    assert "{" not in named.replace("messages[3].content", "")
    if named != plain:  # the sentence has a place for the field: it names it there
        assert "messages[3].content" in named and "messages[3].content" not in plain


def test_the_field_goes_where_each_language_puts_it():
    error = GatewayError(ErrorCode.INVALID_INPUT, field="tools[2]")
    assert message_for(error, "en") == "Invalid input in tools[2]."
    assert message_for(error, "zh") == "tools[2] 的输入无效。"
    assert message_for(GatewayError(ErrorCode.INVALID_INPUT), "en") == "Invalid input."
    assert message_for(GatewayError(ErrorCode.EXECUTION_LOST), "ja") == "実行を復元できませんでした。"


def test_the_detail_follows_the_sentence():
    error = GatewayError(ErrorCode.INVALID_INPUT, field="tools", detail="At most 128 tools.")
    assert message_for(error, "en") == "Invalid input in tools. At most 128 tools."


def test_negotiation_prefers_the_request_then_the_header_by_quality():
    assert negotiate("pt-BR", "de") == "pt"
    assert negotiate(None, "xx, fr;q=0.5, ja;q=0.9") == "ja"
    assert negotiate("klingon", None) == "en"
