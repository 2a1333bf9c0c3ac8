"""Build RFC 25 (jobspec V1) documents, as `fluxgate run` and `flux run` do."""

import os


def jobspec(
    command,
    *,
    nnodes=None,
    ntasks=None,
    cores_per_task=1,
    duration=0,
    cwd=None,
    environment=None,
    name=None,
):
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
