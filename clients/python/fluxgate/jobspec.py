"""Build RFC 25 (jobspec V1) documents, as `fluxgate run` and `flux run` do."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence


def jobspec(
    command: Sequence[str],
    *,
    nnodes: Optional[int] = None,
    ntasks: Optional[int] = None,
    cores_per_task: int = 1,
    duration: float = 0,
    cwd: Optional[str] = None,
    environment: Optional[Mapping[str, str]] = None,
    name: Optional[str] = None,
) -> Dict[str, Any]:
    """A jobspec V1 dict for `command` (a list of strings).

    `nnodes` without `ntasks` runs one task per node on exclusive nodes, the
    rule of flux's `-N`; `cwd` and `environment` default to this process's, as
    the command line's do.
    """
    if not command or not all(isinstance(a, str) for a in command):
        raise ValueError("command must be a non-empty list of strings")
    for what, value in (("nnodes", nnodes), ("ntasks", ntasks), ("cores_per_task", cores_per_task)):
        if value is not None and value < 1:
            raise ValueError(f"{what} must be at least 1")
    slot_with = [{"type": "core", "count": cores_per_task}]
    if nnodes is None:
        resource = _slot(ntasks or 1, slot_with)
        count = {"per_slot": 1}
    else:
        tasks = ntasks or nnodes
        if nnodes > tasks:
            raise ValueError("nnodes cannot exceed ntasks")
        resource = {
            "type": "node",
            "count": nnodes,
            "with": [_slot(-(-tasks // nnodes), slot_with)],
        }
        if ntasks is None:
            resource["exclusive"] = True
        # An uneven spread leaves some slots empty, as in flux-core.
        count = {"per_slot": 1} if tasks % nnodes == 0 else {"total": tasks}
    system = {
        "duration": duration,
        "cwd": cwd if cwd is not None else os.getcwd(),
        "environment": dict(os.environ) if environment is None else dict(environment),
    }
    if name is not None:
        system["job"] = {"name": name}
    return {
        "resources": [resource],
        "tasks": [{"command": list(command), "slot": "task", "count": count}],
        "attributes": {"system": system},
        "version": 1,
    }


def _slot(count, with_):
    return {"type": "slot", "count": count, "label": "task", "with": with_}


class JobspecV1:
    """An RFC 14/25 jobspec V1, built as flux's `JobspecV1` builds it.

    Make one with `from_command`, adjust it with the setters, then pass it
    (or its `jobspec` dict) to `Client.submit` or `Executor.submit`.
    """

    def __init__(self, resources: List[dict], tasks: List[dict], attributes: Optional[dict] = None):
        self.jobspec: Dict[str, Any] = {
            "resources": resources,
            "tasks": tasks,
            "attributes": attributes or {"system": {"duration": 0}},
            "version": 1,
        }

    @classmethod
    def from_command(
        cls,
        command: Sequence[str],
        num_tasks: int = 1,
        cores_per_task: int = 1,
        gpus_per_task: Optional[int] = None,
        num_nodes: Optional[int] = None,
        exclusive: bool = False,
    ) -> "JobspecV1":
        """A jobspec running `command` (a list of strings) as `num_tasks` tasks.

        With `num_nodes` the slots are spread over that many nodes (an uneven
        spread counts tasks in total, as flux does); `exclusive` asks for whole
        nodes and needs `num_nodes`.
        """
        if not command or not all(isinstance(a, str) for a in command):
            raise ValueError("command must be a non-empty list of strings")
        for what, value in (
            ("num_tasks", num_tasks),
            ("cores_per_task", cores_per_task),
            ("gpus_per_task", gpus_per_task),
            ("num_nodes", num_nodes),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{what} must be an integer of at least 1")
        if exclusive and num_nodes is None:
            raise ValueError("exclusive requires num_nodes")
        children = [{"type": "core", "count": cores_per_task}]
        if gpus_per_task is not None:
            children.append({"type": "gpu", "count": gpus_per_task})
        count = {"per_slot": 1}
        if num_nodes is None:
            resources = [_slot(num_tasks, children)]
        else:
            if num_nodes > num_tasks:
                raise ValueError("num_nodes cannot exceed num_tasks")
            node = {
                "type": "node",
                "count": num_nodes,
                "with": [_slot(-(-num_tasks // num_nodes), children)],
            }
            if exclusive:
                node["exclusive"] = True
            resources = [node]
            if num_tasks % num_nodes:
                count = {"total": num_tasks}
        tasks = [{"command": list(command), "slot": "task", "count": count}]
        spec = cls(resources, tasks)
        # As the command line does: the job runs where and as this process is.
        spec.cwd = os.getcwd()
        spec.environment = dict(os.environ)
        return spec

    def setattr(self, key: str, value: Any) -> None:
        """Set an attribute by dotted path; a bare key goes under `system.`."""
        if not key.startswith(("system.", "user.")):
            key = "system." + key
        node: Dict[str, Any] = self.jobspec["attributes"]
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    def getattr(self, key: str) -> Any:
        """An attribute by dotted path (bare keys under `system.`); KeyError if unset."""
        if not key.startswith(("system.", "user.")):
            key = "system." + key
        node: Any = self.jobspec["attributes"]
        for part in key.split("."):
            node = node[part]
        return node

    def _get(self, key, default=None):
        try:
            return self.getattr(key)
        except KeyError:
            return default

    @property
    def duration(self):
        """Time limit in seconds (0 is unlimited)."""
        return self._get("duration", 0)

    @duration.setter
    def duration(self, seconds):
        if not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError("duration must be a non-negative number of seconds")
        self.setattr("duration", seconds)

    @property
    def cwd(self):
        """Working directory of the tasks."""
        return self._get("cwd")

    @cwd.setter
    def cwd(self, path):
        self.setattr("cwd", os.fspath(path))

    @property
    def environment(self):
        """Environment of the tasks (a dict)."""
        return self._get("environment")

    @environment.setter
    def environment(self, env):
        self.setattr("environment", dict(env))

    @property
    def queue(self):
        """The queue the job is submitted to."""
        return self._get("queue")

    @queue.setter
    def queue(self, name):
        self.setattr("queue", name)

    def _io(self, kind, stream):
        return self._get(f"shell.options.{kind}.{stream}.path")

    def _set_io(self, kind, stream, path):
        # The RFC 25 shell options: a file the stream is redirected to or from.
        self.setattr(f"shell.options.{kind}.{stream}", {"type": "file", "path": os.fspath(path)})

    @property
    def stdout(self):
        """File the tasks' standard output goes to."""
        return self._io("output", "stdout")

    @stdout.setter
    def stdout(self, path):
        self._set_io("output", "stdout", path)

    @property
    def stderr(self):
        """File the tasks' standard error goes to."""
        return self._io("output", "stderr")

    @stderr.setter
    def stderr(self, path):
        self._set_io("output", "stderr", path)

    @property
    def stdin(self):
        """File the tasks read as standard input."""
        return self._io("input", "stdin")

    @stdin.setter
    def stdin(self, path):
        self._set_io("input", "stdin", path)

    def dumps(self, **kwargs: Any) -> str:
        """The jobspec as JSON text."""
        return json.dumps(self.jobspec, **kwargs)
