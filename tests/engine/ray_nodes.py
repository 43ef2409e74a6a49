"""A real multi-node Ray cluster on this machine: a head and worker nodes, each its own
``ray start --block`` process (its own raylet, resources and object store), for the tests and
the cluster benchmark.

Each node runs in a process group of its own, so that a node can be lost the way a machine
is lost (:meth:`LocalCluster.kill`: SIGKILL to the raylet, its workers and agents at once) and
so that stopping the cluster stops only what it started: ``ray stop`` would stop every Ray
process of the machine. Every port a node listens on is picked free, so clusters started side
by side do not meet. The nodes import this checkout's rageval (``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout whose rageval the nodes import

# Each node is kept small: the machines these run on are shared.
_OBJECT_STORE = 100 * 1024 * 1024
_UP_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a node (and so every Ray worker it starts), or a driver, runs with."""
    env = dict(os.environ)
    paths = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("RAY_DEDUP_LOGS", "0")
    env.update(extra or {})
    return env


@dataclass
class Node:
    name: str
    cpus: int
    process: subprocess.Popen[bytes]
    log: Path

    def pids(self) -> list[int]:
        """The node's processes: its session (the raylet, its agents, and its workers, each
        of which Ray puts in a process group of its own)."""
        return _session(self.process.pid)

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class LocalCluster:
    """Start with :meth:`start`; always :meth:`stop` (a context manager does)."""

    head_cpus: int = 1
    worker_cpus: tuple[int, ...] = (1, 1)
    system_config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    object_store: int = _OBJECT_STORE
    nodes: list[Node] = field(default_factory=list)
    address: str = ""
    # Token authentication, with a token of the cluster's own (a token found in the home
    # directory is no concern of the cluster's): a driver needs it too (:meth:`environment`).
    token: str = field(default_factory=lambda: secrets.token_hex(32))

    def environment(self) -> dict[str, str]:
        """The environment a driver connecting to the cluster runs with."""
        return node_environment({**self.env, "RAY_AUTH_MODE": "token",
                                 "RAY_AUTH_TOKEN": self.token})

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        self.temp = Path(tempfile.mkdtemp(prefix="rc"))  # short: Ray's socket paths are
        port = _free_port()  # limited to ~100 characters
        self.address = f"127.0.0.1:{port}"
        try:
            head = ["--head", "--port", str(port), "--include-dashboard=false",
                    "--dashboard-port", str(_free_port()),
                    "--ray-client-server-port", str(_free_port())]
            if self.system_config:  # read by the head's GCS; the workers get it from there
                head += ["--system-config", json.dumps(self.system_config)]
            self._start("head", self.head_cpus, head)
            for i, cpus in enumerate(self.worker_cpus):
                # One node at a time: nodes starting together on a loaded machine can miss
                # Ray's own startup deadline.
                self.wait_for(len(self.nodes))
                self._start(f"worker{i + 1}", cpus, ["--address", self.address])
            self.wait_for(len(self.nodes))
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, name: str, cpus: int, role: list[str]) -> None:
        log = self.temp / f"{name}.log"
        command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *role,
                   "--num-cpus", str(cpus), "--node-ip-address", "127.0.0.1",
                   "--object-store-memory", str(self.object_store),
                   "--disable-usage-stats", "--temp-dir", str(self.temp),
                   "--node-manager-port", str(_free_port()),
                   "--object-manager-port", str(_free_port()),
                   "--dashboard-agent-listen-port", str(_free_port()),
                   "--dashboard-agent-grpc-port", str(_free_port()),
                   "--runtime-env-agent-port", str(_free_port()),
                   "--metrics-export-port", str(_free_port())]
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=self.environment(), stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.nodes.append(Node(name, cpus, process, log))

    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.name != "head"]

    def restore(self) -> None:
        """Start a worker node in place of each one lost, so the cluster is whole again."""
        lost = [n for n in self.workers() if not n.alive()]
        for node in lost:
            self.nodes.remove(node)
            self._start(node.name, node.cpus, ["--address", self.address])
            self.wait_for(len(self.nodes))

    def alive_nodes(self) -> int:
        """The nodes the cluster's GCS counts as alive."""
        script = (f"import ray; ray.init(address={self.address!r}, log_to_driver=False);"
                  "print(sum(n['Alive'] for n in ray.nodes()))")
        result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                text=True, env=self.environment(), timeout=60)
        lines = result.stdout.strip().splitlines()
        return int(lines[-1]) if result.returncode == 0 and lines else 0

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + _UP_S
        while self.alive_nodes() != count:
            dead = [n.name for n in self.nodes if not n.alive()]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(n.log.read_text(errors="replace")[-2000:] for n in self.nodes)
                raise RuntimeError(f"the cluster did not come up (exited: {dead}):\n{logs}")
            time.sleep(0.5)

    def connections(self, node: Node, port: int) -> set[int]:
        """The local ports of the node's TCP connections to ``port`` (on this machine)."""
        inodes = set()
        for pid in node.pids():
            with contextlib.suppress(OSError):
                for fd in Path(f"/proc/{pid}/fd").iterdir():
                    with contextlib.suppress(OSError):
                        target = os.readlink(fd)
                        if target.startswith("socket:["):
                            inodes.add(target[8:-1])
        return {local for local, remote, inode in _tcp() if remote == port and inode in inodes}

    def kill(self, node: Node) -> list[int]:
        """Lose ``node`` at once, as a machine is lost: every process of it, SIGKILLed."""
        killed = _signal(node, signal.SIGKILL)
        node.process.wait(timeout=30)
        return killed

    def stop(self) -> None:
        """Stop every node, then remove the cluster's directory. Nothing of the cluster is
        kept, so nothing needs stopping gracefully: each node's processes are SIGKILLed."""
        for node in reversed(self.nodes):
            _signal(node, signal.SIGKILL)
            node.process.wait(timeout=30)
        self.nodes.clear()
        temp = getattr(self, "temp", None)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def _gone() -> contextlib.suppress:
    """Ignore a process that is already gone."""
    return contextlib.suppress(ProcessLookupError, PermissionError)


def _session(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _signal(node: Node, signum: int) -> list[int]:
    """Send ``signum`` to every process of ``node``, twice over (what the first pass missed:
    a worker being started as it ran)."""
    sent: list[int] = []
    for _ in range(2):
        for pid in _session(node.process.pid):
            with _gone():
                os.kill(pid, signum)
                sent.append(pid)
    return sorted(set(sent))


def _tcp() -> list[tuple[int, int, str]]:
    """(local port, remote port, inode) of this machine's TCP sockets, from ``/proc/net``."""
    out = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                out.append((int(local.rsplit(":", 1)[1], 16),
                            int(remote.rsplit(":", 1)[1], 16), inode))
    return out
