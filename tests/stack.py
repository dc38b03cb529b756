"""The compose stack started with testcontainers from docker-compose.yml itself (compose v2 cannot be installed
here): services, image or build, command, environment, volumes, tmpfs, read-only root, restart policy, health
checks, replicas, published ports, the network and its aliases are read from the file, so it stays the one
source of truth. Ports are published on 127.0.0.1 only; containers talk on the stack's own network."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
import uuid
from typing import Any

import docker
import yaml
from docker.types import IPAMConfig, IPAMPool
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from tests.support import ROOT, free_port

# The Ryuk reaper image cannot be pulled here: containers are removed by the fixture instead.
testcontainers_config.ryuk_disabled = True
testcontainers_config.tc_host_override = "127.0.0.1"

COMPOSE_FILE = os.path.join(ROOT, "docker-compose.yml")
DOCKERFILE = "deploy/Dockerfile"
_VARIABLE = re.compile(r"\$\{(\w+)(?:(:?[?-])([^}]*))?\}")


def engine() -> docker.DockerClient | None:
    """The local Docker engine, or None when none answers."""
    try:
        client = docker.from_env(timeout=300)
        client.ping()
        return client
    except Exception:
        return None


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` (an unset required variable is an error)."""
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, operator, argument = match.groups()
        if env.get(name):
            return env[name]
        if operator and operator.endswith("?"):
            raise ValueError(f"{name}: {argument}")
        return argument if operator and operator.endswith("-") else ""

    return _VARIABLE.sub(one, value)


def duration_ns(text: str) -> int:
    match = re.fullmatch(r"(\d+)(ms|s|m)", text)
    assert match, text
    return int(match.group(1)) * {"ms": 10**6, "s": 10**9, "m": 60 * 10**9}[match.group(2)]


def build_image(client: docker.DockerClient, tag: str) -> None:
    """The project's image, built from deploy/Dockerfile (its base, when no registry answers, is the Debian
    stand-in that scripts/standin-images.sh builds)."""
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "standin-images.sh")], check=True)
    client.images.build(path=ROOT, dockerfile=DOCKERFILE, tag=tag, rm=True, forcerm=True)


class Stack:
    """Redis, the gateway replicas and nginx, as docker-compose.yml defines them."""

    def __init__(self, client: docker.DockerClient) -> None:
        with open(COMPOSE_FILE) as handle:
            self.compose = yaml.safe_load(handle)
        self.client = client
        self.prefix = "agui-stack-" + uuid.uuid4().hex[:6]
        self.env = {"AGUI_GATEWAY_AUTH_TOKEN": secrets.token_hex(16), "AGUI_REDIS_PASSWORD": secrets.token_hex(16)}
        self.token = self.env["AGUI_GATEWAY_AUTH_TOKEN"]
        self.containers: dict[str, list[DockerContainer]] = {}
        self.volumes: list[str] = []
        self.host_ports: dict[str, int] = {}  # "service:container port" -> port on 127.0.0.1
        subnet = self.compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
        self.network = Network(docker_network_kw={"ipam": IPAMConfig(pool_configs=[IPAMPool(subnet=subnet)])})

    # ---- reading the compose file

    def service(self, name: str) -> dict[str, Any]:
        return self.compose["services"][name]

    def image_of(self, name: str) -> str:
        return self.service(name)["image"]

    def start_order(self) -> list[str]:
        """Services after those they depend on (compose's depends_on)."""
        order: list[str] = []

        def visit(name: str) -> None:
            for needed in self.service(name).get("depends_on", {}):
                visit(needed)
            if name not in order:
                order.append(name)

        for name in self.compose["services"]:
            visit(name)
        return order

    def container_for(self, name: str, index: int) -> DockerContainer:
        service = self.service(name)
        container = DockerContainer(
            self.image_of(name),
            command=interpolate(service.get("command"), self.env),
            env={key: str(interpolate(value, self.env)) for key, value in service.get("environment", {}).items()},
            name=f"{self.prefix}-{name}-{index}",
            network=self.network,
            network_aliases=[name],
            **self._runtime_options(service),
        )
        for mapping in service.get("volumes", []):
            source, target, *mode = mapping.split(":")
            if source.startswith("."):
                source = os.path.join(ROOT, source)
            else:  # a named volume: one per stack
                source = f"{self.prefix}-{source}"
                if source not in self.volumes:
                    self.volumes.append(source)
            container.with_volume_mapping(source, target, mode[0] if mode else "rw")
        for entry in service.get("tmpfs", []):
            path, _, options = entry.partition(":")
            container.tmpfs[path] = options
        for mapping in service.get("ports", []):  # published on loopback only, on a free port
            target = int(str(mapping).split(":")[-1])
            port = self.host_ports.setdefault(f"{name}:{target}", free_port())
            container.ports[f"{target}/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
        return container

    @staticmethod
    def _runtime_options(service: dict[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {"read_only": bool(service.get("read_only", False))}
        if service.get("restart"):
            options["restart_policy"] = {"Name": service["restart"]}
        check = service.get("healthcheck")
        if check:
            options["healthcheck"] = {
                "test": check["test"],
                "interval": duration_ns(check.get("interval", "30s")),
                "timeout": duration_ns(check.get("timeout", "30s")),
                "retries": check.get("retries", 3),
                "start_period": duration_ns(check.get("start_period", "0s")),
            }
        return options

    # ---- bringing it up and down

    def up(self) -> Stack:
        self._remove_leftovers()
        self.network.create()
        for name in self.start_order():
            replicas = self.service(name).get("deploy", {}).get("replicas", 1)
            started = [self.container_for(name, index + 1).start() for index in range(replicas)]
            self.containers[name] = started
            for container in started:  # depends_on: condition: service_healthy
                self.wait_healthy(container)
        return self

    def _remove_leftovers(self) -> None:
        """What an interrupted earlier run left: its containers, and its network (which holds the fixed subnet)."""
        for container in self.client.containers.list(all=True, filters={"name": "agui-stack-"}):
            container.remove(force=True)
        subnet = self.compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
        for network in self.client.networks.list(filters={"label": "org.testcontainers=true"}):
            configs = (network.attrs.get("IPAM") or {}).get("Config") or []
            if any(config.get("Subnet") == subnet for config in configs):
                network.remove()

    def down(self) -> None:
        for started in self.containers.values():
            for container in started:
                try:
                    container.stop()
                except Exception:
                    pass
        try:
            self.network.remove()
        except Exception:
            pass
        for volume in self.volumes:
            try:
                self.client.volumes.get(volume).remove(force=True)
            except Exception:
                pass

    def wait_healthy(self, container: DockerContainer, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(container)
            health = state.get("Health", {}).get("Status")
            if health == "healthy" or (health is None and state.get("Running")):
                return
            assert time.monotonic() < deadline, f"{container._name} not healthy: {state}\n{self.logs(container)[-3000:]}"
            time.sleep(0.5)

    # ---- looking at containers

    def raw(self, container: DockerContainer) -> Any:
        return self.client.containers.get(container.get_container_id())

    def state(self, container: DockerContainer) -> dict[str, Any]:
        return self.raw(container).attrs["State"]

    def logs(self, container: DockerContainer) -> str:
        return self.raw(container).logs().decode(errors="replace")

    def address(self, container: DockerContainer) -> str:
        return self.raw(container).attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]

    def url(self, name: str = "lb", target: int = 8080) -> str:
        return f"http://127.0.0.1:{self.host_ports[f'{name}:{target}']}"

    @property
    def gateways(self) -> list[DockerContainer]:
        return self.containers["gateway"]

    def served_by(self, request_id: str) -> list[DockerContainer]:
        """The gateway replicas whose access log names this request id (forwarded by nginx as X-Request-ID)."""
        return [gateway for gateway in self.gateways if f'"requestId": "{request_id}"' in self.logs(gateway)]
