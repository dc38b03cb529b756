"""The compose stack brought up the way deploy/README.md says: its `stack-up` commands run as written (the
secrets generated into .env, then `docker-compose up -d --build`, with the docker-compose 1.29 Debian ships) in a
copy of the project, under a project name of its own and with nginx published on a free loopback port. The
containers are then found by compose's labels; `down` removes them, the network and the volumes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from typing import Any

import docker
import yaml
from docker.models.containers import Container
from testcontainers.core.config import testcontainers_config

from tests.support import ROOT, free_port

# The Ryuk reaper image cannot be pulled here: containers are removed by the fixtures instead.
testcontainers_config.ryuk_disabled = True
testcontainers_config.tc_host_override = "127.0.0.1"

GUIDE = os.path.join(ROOT, "deploy", "README.md")
SUBNET_OWNERS = "agui-stack-"


def guide_commands(name: str) -> str:
    """The shell commands of deploy/README.md between `<!-- name -->` and `<!-- /name -->`, fences dropped."""
    with open(GUIDE) as handle:
        text = handle.read()
    block = text.split(f"<!-- {name} -->", 1)[1].split(f"<!-- /{name} -->", 1)[0]
    return "\n".join(line for line in block.strip().splitlines() if not line.startswith("```"))


def copy_project(target: str) -> None:
    """The files git would commit (tracked and new, never ignored ones such as .env or node_modules)."""
    listed = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        source = os.path.join(ROOT, relative)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, relative)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, relative))


def engine() -> docker.DockerClient | None:
    """The local Docker engine, or None when none answers."""
    try:
        client = docker.from_env(timeout=300)
        client.ping()
        return client
    except Exception:
        return None


def ensure_base_images() -> None:
    """The public images the stack names; where no registry answers, the Debian stand-ins scripts/standin-images.sh
    builds (each only when its tag is absent)."""
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "standin-images.sh")], check=True)


class Stack:
    """Redis, the gateway replicas and nginx, as docker-compose.yml defines them and the guide starts them."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self.project = SUBNET_OWNERS + uuid.uuid4().hex[:6]
        self.directory = tempfile.mkdtemp(prefix=self.project + "-")
        copy_project(self.directory)
        with open(os.path.join(self.directory, "docker-compose.yml")) as handle:
            self.compose = yaml.safe_load(handle)
        self.port = free_port()
        # The shell's variables win over .env for compose: the project's name and its port, the secrets the guide's
        # commands generate into .env.
        self.env = {
            **{key: value for key, value in os.environ.items() if not key.startswith(("AGUI_", "COMPOSE_"))},
            "COMPOSE_PROJECT_NAME": self.project,
            "AGUI_PUBLISH": f"127.0.0.1:{self.port}",
        }
        self.token = ""
        self.containers: dict[str, list[Container]] = {}
        self.network: Any = None

    # ---- reading the compose file

    def service(self, name: str) -> dict[str, Any]:
        return self.compose["services"][name]

    def image_of(self, name: str) -> str:
        return self.service(name)["image"]

    def dotenv(self) -> dict[str, str]:
        with open(os.path.join(self.directory, ".env")) as handle:
            return dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)

    # ---- bringing it up and down

    def shell(self, commands: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", commands], cwd=self.directory, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def up(self) -> Stack:
        self._remove_leftovers()
        started = self.shell(guide_commands("stack-up"))
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        self.token = self.dotenv()["AGUI_GATEWAY_AUTH_TOKEN"]
        project = {"label": f"com.docker.compose.project={self.project}"}
        for name in self.compose["services"]:
            found = self.client.containers.list(filters={"label": [project["label"], f"com.docker.compose.service={name}"]})
            self.containers[name] = sorted(found, key=lambda c: int(c.labels.get("com.docker.compose.container-number", "1")))
            for container in self.containers[name]:
                self.wait_healthy(container)
        self.network = self.client.networks.list(filters=project)[0]
        return self

    def _remove_leftovers(self) -> None:
        """What an interrupted earlier run left: its containers, and its network (which holds the fixed subnet)."""
        for container in self.client.containers.list(all=True, filters={"name": SUBNET_OWNERS}):
            container.remove(force=True)
        subnet = self.compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
        for network in self.client.networks.list():
            configs = (network.attrs.get("IPAM") or {}).get("Config") or []
            if any(config.get("Subnet") == subnet for config in configs):
                network.reload()
                for attached in network.containers:
                    attached.remove(force=True)
                network.remove()

    def down(self) -> None:
        self.shell("docker-compose down -v --remove-orphans -t 5", timeout=300)
        shutil.rmtree(self.directory, ignore_errors=True)

    def wait_healthy(self, container: Any, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(container)
            health = state.get("Health", {}).get("Status")
            if health == "healthy" or (health is None and state.get("Running")):
                return
            assert time.monotonic() < deadline, f"{self.raw(container).name} not healthy: {state}\n{self.logs(container)[-3000:]}"
            time.sleep(0.5)

    # ---- looking at containers

    def raw(self, container: Any) -> Container:
        """The container as Docker sees it now (a compose replica, or a testcontainers container)."""
        identity = container.get_container_id() if hasattr(container, "get_container_id") else container.id
        return self.client.containers.get(identity)

    def state(self, container: Any) -> dict[str, Any]:
        return self.raw(container).attrs["State"]

    def logs(self, container: Any) -> str:
        return self.raw(container).logs().decode(errors="replace")

    def address(self, container: Any) -> str:
        return self.raw(container).attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateways(self) -> list[Container]:
        return self.containers["gateway"]

    def served_by(self, request_id: str) -> list[Container]:
        """The gateway replicas whose access log names this request id (forwarded by nginx as X-Request-ID)."""
        return [gateway for gateway in self.gateways if f'"requestId": "{request_id}"' in self.logs(gateway)]
