"""The house's one-way dependencies, read from the source: transports -> engine -> (agents, store); the composition
root imports everything and nothing imports it; protocol types may be used by all."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def imports_of(package: str) -> dict[str, set[str]]:
    """Module path -> every module it imports (absolute names, including lazy imports inside functions)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


RULES = [
    ("gateway/agents", "gateway.engine", "agents never import the engine"),
    ("gateway/agents", "transports", "agents never import a transport"),
    ("gateway/agents", "gateway.protocol", "agents see neutral options, never AG-UI wire types"),
    ("gateway/engine", "transports", "the engine knows no transport"),
    ("gateway/engine", "litestar", "the engine knows no web framework"),
    ("gateway/engine", "gateway.server", "nothing imports the composition root"),
    ("store", "gateway", "the store knows records only"),
    ("store", "litestar", "the store knows no web framework"),
    ("transports", "store", "transports never touch the store"),
    ("transports", "gateway.server", "nothing imports the composition root"),
    ("gateway/auth", "gateway.server", "nothing imports the composition root"),
]


@pytest.mark.parametrize(("package", "forbidden", "why"), RULES, ids=[f"{p}-{f}" for p, f, _ in RULES])
def test_dependencies_point_one_way(package, forbidden, why):
    offenders = {
        module: sorted(n for n in names if n == forbidden or n.startswith(forbidden + ".")) for module, names in imports_of(package).items()
    }
    assert not {m: n for m, n in offenders.items() if n}, why
