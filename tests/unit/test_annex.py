"""The tuning annex (server/annex.py): each part on only for the release series it was written for, off on
purpose with --tuning off; the connection limits refuse a uvicorn they were not written for."""

from __future__ import annotations

import logging
import pathlib
import tomllib

import pytest
from packaging.requirements import Requirement

from server import annex
from server.annex import WRITTEN_FOR, Annex, LibraryChanged, annex_of, check_limits

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_part_is_on_for_the_installed_libraries_and_off_on_purpose():
    assert annex_of("on") == Annex(litestar=True, uvicorn=True, websockets=True, redis=True)
    assert annex_of("off") == Annex()


def test_a_library_of_another_series_leaves_its_part_off_with_one_line(monkeypatch, caplog):
    installed = {"litestar": "2.25.0", "uvicorn": "0.54.0", "websockets": "18.0", "redis": "8.1.0"}
    monkeypatch.setattr(annex, "version", installed.__getitem__)
    with caplog.at_level(logging.WARNING, logger="agui.annex"):
        assert annex_of("on") == Annex(litestar=True, uvicorn=True, websockets=False, redis=True)
    assert [record.getMessage() for record in caplog.records] == [
        "websockets 18.0 is not 17.x, which the corked WebSocket protocol was written for: served on its public path"
    ]


def test_the_connection_limits_refuse_a_uvicorn_they_were_not_written_for(monkeypatch):
    check_limits()
    monkeypatch.setattr(annex, "version", lambda name: "0.55.0")
    with pytest.raises(LibraryChanged, match=r"uvicorn 0\.55\.0 is not 0\.54\.x"):
        check_limits()


def test_the_series_are_the_pins():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {requirement.name: requirement.specifier for requirement in map(Requirement, listed)}
    for name, series in WRITTEN_FOR.items():
        low = next(spec.version for spec in pins[name] if spec.operator == ">=")
        assert low == series or low.startswith(series + "."), (name, pins[name], series)
