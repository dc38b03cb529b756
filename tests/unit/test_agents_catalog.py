"""The agents catalog: which agent a route names, what a thread records, the order agents are listed in, and each
fault of an agents file named with its table."""

from __future__ import annotations

import pytest

from gateway.agents.catalog import Agents, read_agents_file
from gateway.agents.demo import DemoAgent
from gateway.errors import ErrorCode, GatewayError


def catalog() -> Agents:
    return Agents({"zeta": DemoAgent(), "main": DemoAgent(), "alpha": DemoAgent()}, "main", {"alpha": "The first"})


def test_the_default_is_listed_first_then_the_others_by_id():
    assert [agent_id for agent_id, _ in catalog()] == ["main", "alpha", "zeta"]


def test_an_empty_id_is_the_default_and_an_unknown_one_is_agent_not_found():
    agents = catalog()
    assert agents.resolve("") == "main" and agents.resolve("zeta") == "zeta"
    with pytest.raises(GatewayError) as unknown:
        agents.resolve("nobody")
    assert (unknown.value.code, unknown.value.field) == (ErrorCode.AGENT_NOT_FOUND, "agentId")


def test_a_thread_records_the_default_agent_as_empty_so_it_stays_the_defaults():
    agents = catalog()
    assert agents.recorded("main") == "" and agents.recorded("alpha") == "alpha"


def test_a_description_is_the_files_else_the_backends():
    agents = catalog()
    assert agents.description("alpha") == "The first" and agents.description("zeta") == "The gateway's demo agent"


def test_the_only_agent_is_the_default_and_options_are_kept(tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('[agents.solo]\nbackend = "demo"\nresponse_seconds = 5\n')
    specs = read_agents_file(str(path))
    assert list(specs) == ["solo"] and specs["solo"].response_seconds == 5 and not specs["solo"].default


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ('[agents.a]\nbackend = "demo"\n[extra]\nx = 1\n', "'extra' is not an agents table"),
        ("[agents.a]\nbackend = 3\n", "agents.a: Expected `str`, got `int` - at `backend`"),
        ("[agents.a]\n", "agents.a: missing the field `backend`"),
        ('[agents.a]\nbackend = "demo"\nfollow_idle_seconds = 0\n', "agents.a.follow_idle_seconds: between 0 and 86400"),
    ],
)
def test_each_fault_names_the_file_and_the_table(tmp_path, text, fault):
    path = tmp_path / "agents.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        read_agents_file(str(path))
    assert str(refused.value) == f"--agents {path}: {fault}" or str(refused.value).startswith(f"--agents {path}: {fault}")
