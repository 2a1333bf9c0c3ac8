"""JobspecV1 lays out RFC 14/25 jobspecs as flux's JobspecV1 does."""

import pytest

import fluxgate

CORE = {"type": "core", "count": 1}


def test_tasks_without_nodes_are_slots():
    spec = fluxgate.JobspecV1.from_command(["hostname"], num_tasks=4, cores_per_task=2)
    assert spec.jobspec["version"] == 1
    assert spec.jobspec["resources"] == [
        {"type": "slot", "count": 4, "label": "task", "with": [{"type": "core", "count": 2}]}
    ]
    assert spec.jobspec["tasks"] == [{"command": ["hostname"], "slot": "task", "count": {"per_slot": 1}}]
    assert spec.duration == 0


def test_nodes_gpus_and_exclusive():
    spec = fluxgate.JobspecV1.from_command(["a"], num_tasks=4, gpus_per_task=1, num_nodes=2, exclusive=True)
    assert spec.jobspec["resources"] == [
        {
            "type": "node",
            "count": 2,
            "exclusive": True,
            "with": [{"type": "slot", "count": 2, "label": "task", "with": [CORE, {"type": "gpu", "count": 1}]}],
        }
    ]
    uneven = fluxgate.JobspecV1.from_command(["a"], num_tasks=3, num_nodes=2)
    assert uneven.jobspec["tasks"][0]["count"] == {"total": 3}


@pytest.mark.parametrize(
    "kwargs",
    [{"num_tasks": 0}, {"num_nodes": 3, "num_tasks": 2}, {"exclusive": True}, {"gpus_per_task": 0}],
)
def test_bad_shapes_are_refused(kwargs):
    with pytest.raises(ValueError):
        fluxgate.JobspecV1.from_command(["a"], **kwargs)


def test_setters_write_the_system_attributes():
    spec = fluxgate.JobspecV1.from_command(["a"])
    spec.duration = 90
    spec.cwd = "/tmp"
    spec.environment = {"A": "1"}
    spec.queue = "batch"
    spec.stdout = "/tmp/out"
    spec.stderr = "/tmp/err"
    spec.stdin = "/tmp/in"
    spec.setattr("job.name", "x")
    spec.setattr("user.tag", 7)
    system = spec.jobspec["attributes"]["system"]
    assert system["duration"] == 90 and system["cwd"] == "/tmp" and system["environment"] == {"A": "1"}
    assert system["queue"] == "batch" and system["job"] == {"name": "x"}
    assert system["shell"]["options"]["output"] == {
        "stdout": {"type": "file", "path": "/tmp/out"},
        "stderr": {"type": "file", "path": "/tmp/err"},
    }
    assert system["shell"]["options"]["input"] == {"stdin": {"type": "file", "path": "/tmp/in"}}
    assert spec.jobspec["attributes"]["user"] == {"tag": 7}
    assert (spec.stdout, spec.stdin, spec.queue) == ("/tmp/out", "/tmp/in", "batch")
    with pytest.raises(ValueError):
        spec.duration = -1
