"""The wheel a plain `pip install .` builds (the README's first command) holds every package of the service."""

from __future__ import annotations

import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_python_package_is_listed_for_the_wheel():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        listed = set(tomllib.load(handle)["tool"]["setuptools"]["packages"])
    found = {
        os.path.relpath(directory, ROOT).replace(os.sep, ".")
        for top in ("server", "gateway", "transports", "store")
        for directory, _, files in os.walk(os.path.join(ROOT, top))
        if "__init__.py" in files
    }
    assert found <= listed, sorted(found - listed)
