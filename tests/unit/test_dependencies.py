"""The house's one-way dependencies, read from the source: server (the composition root, on top) -> transports ->
engine -> (agents, store); nothing imports the composition root; protocol types may be used by all; and no module
imports, even lazily or for type checking only, a module that imports it back."""

from __future__ import annotations

import ast
import functools
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("server", "gateway", "transports", "store")  # every first-party package the project ships


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


@functools.cache  # every rule reads the same files: parse each once
def imported_names(path: pathlib.Path) -> frozenset[str]:
    """Every module a file imports: absolute names, including lazy imports inside functions and type-only ones.
    `from package import module` names the module, not the package's face."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            names.update(submodules)
            if len(submodules) < len(node.names):
                names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return frozenset(names)


def imports_of(package: str) -> dict[str, frozenset[str]]:
    """Module path -> every module it imports."""
    return {str(path.relative_to(ROOT)): imported_names(path) for path in (ROOT / package).rglob("*.py")}


RULES = [
    ("gateway/agents", "gateway.engine", "agents never import the engine"),
    ("gateway/agents", "transports", "agents never import a transport"),
    ("gateway/agents", "gateway.protocol", "agents see neutral options, never AG-UI wire types"),
    ("gateway/engine", "transports", "the engine knows no transport"),
    ("gateway/engine", "litestar", "the engine knows no web framework"),
    ("gateway/engine", "uvicorn", "the engine knows no server"),
    ("store", "gateway", "the store knows records only"),
    ("store", "litestar", "the store knows no web framework"),
    ("transports", "store", "transports never touch the store"),
    ("transports", "uvicorn", "transports are plain ASGI: the uvicorn wiring is the composition root's"),
    ("gateway", "transports", "the engine's house knows no transport"),
    ("gateway", "server", "nothing imports the composition root"),
    ("transports", "server", "nothing imports the composition root"),
    ("store", "server", "nothing imports the composition root"),
]


@pytest.mark.parametrize(("package", "forbidden", "why"), RULES, ids=[f"{p}-{f}" for p, f, _ in RULES])
def test_dependencies_point_one_way(package, forbidden, why):
    offenders = {
        module: sorted(n for n in names if n == forbidden or n.startswith(forbidden + ".")) for module, names in imports_of(package).items()
    }
    assert not {m: n for m, n in offenders.items() if n}, why


def test_every_shipped_module_is_read():
    """The scan covers each package the project installs, entry points (`server/__main__.py`) included."""
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert {name.split(".")[0] for name in shipped} == set(PACKAGES)
    assert all(name in MODULES for name in shipped)
    assert "server.__main__" in MODULES and not (ROOT / "gateway" / "__main__.py").exists()


def test_no_import_circle():
    graph = {name: imported_names(path) & MODULES.keys() - {name} for name, path in MODULES.items()}
    circles = []
    for start in graph:
        seen, frontier = set(), [(start, (start,))]
        while frontier:
            node, trail = frontier.pop()
            for target in graph[node]:
                if target == start:
                    circles.append(" -> ".join((*trail, start)))
                elif target not in seen:
                    seen.add(target)
                    frontier.append((target, (*trail, target)))
    assert not circles, circles[:5]


def test_the_unit_layer_loads_nothing_of_the_end_to_end_layer():
    """tests/unit and the conftest it shares import no end-to-end helper at load time (those need ag_ui, Node,
    real servers); the shared conftest imports them inside its fixtures only."""
    unit = {str(path.relative_to(ROOT)): imported_names(path) for path in (ROOT / "tests" / "unit").rglob("*.py")}
    offenders = {
        module: sorted(n for n in names if n.startswith("tests.") and not n.startswith("tests.unit")) for module, names in unit.items()
    }
    assert not {module: names for module, names in offenders.items() if names}
    shared = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    loaded = [node for node in shared.body if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests")]
    assert not loaded, "tests/conftest.py imports an end-to-end helper at load time"
