"""The Python client against a real instance: submit, eventlogs, wait, errors."""

import os
import pathlib
import subprocess
import sys
import time

import grpc
import pytest

import fluxgate
from instance import Instance, binary

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"

# flux-core's order for a job that runs and exits 0 (RFC 21).
LIFECYCLE = [
    "submit",
    "validate",
    "depend",
    "priority",
    "alloc",
    "start",
    "finish",
    "release",
    "free",
    "clean",
]


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("state"), size=1)
    yield inst
    # SIGTERM must end both services cleanly.
    assert inst.stop() == [0, 0]


@pytest.fixture()
def client(instance):
    with fluxgate.Client(instance.uri) as c:
        yield c


def test_a_job_walks_the_rfc21_states_in_order(client):
    jobid = client.submit(fluxgate.jobspec(["echo", "hello from python"]), waitable=True)
    assert jobid > 0
    result = client.wait(jobid, timeout=60)
    assert result.success, result.error
    assert result.id == jobid

    events = list(client.eventlog(jobid))
    assert [e.name for e in events] == LIFECYCLE
    assert events[0].context["userid"] == os.getuid()
    assert events[0].context["flags"] == fluxgate.client.FLAG_WAITABLE
    assert events[LIFECYCLE.index("finish")].context["status"] == 0
    stamps = [e.timestamp for e in events]
    assert stamps == sorted(stamps)

    # RFC 24: data events, then one eof per stream and rank.
    output = [e for e in client.eventlog(jobid, "output") if e.name == "data"]
    assert "".join(e.context.get("data", "") for e in output) == "hello from python\n"
    assert {e.context["stream"] for e in output if "data" in e.context} == {"stdout"}
    assert {e.context["stream"] for e in output if e.context.get("eof")} == {"stdout", "stderr"}

    exec_names = [e.name for e in client.eventlog(jobid, "exec.eventlog")]
    # RFC 50 (flux-core's exec eventlog): init first, done last, complete before it.
    assert exec_names[0] == "init" and exec_names[-2:] == ["complete", "done"], exec_names
    assert "starting" in exec_names, exec_names


def test_following_an_eventlog_ends_when_the_job_is_inactive(client):
    jobid = client.submit(fluxgate.jobspec(["sh", "-c", "exit 3"]))
    events = client.wait_inactive(jobid, timeout=60)
    names = [e.name for e in events]
    assert names[0] == "submit" and names[-1] == "clean", names
    finish = next(e for e in events if e.name == "finish")
    assert finish.context["status"] == 3 << 8
    # The line is the stored RFC 18 text, parseable on its own.
    assert fluxgate.Event.parse(finish.line) == finish


def test_a_bad_jobspec_is_refused_with_a_message(client):
    with pytest.raises(fluxgate.FluxgateError) as err:
        client.submit({"version": 1, "resources": [], "tasks": []})
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.message


def test_an_ended_job_says_what_it_used(client):
    """Contained in cgroups (as root, as CI runs), a job's usage is stored."""
    busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
    jobid = client.submit(fluxgate.jobspec(["sh", "-c", busy]), waitable=True)
    assert client.wait(jobid, timeout=60).success
    used = client.usage(jobid)
    assert used is not None, "no usage: is the exec service running without cgroups?"
    assert len(used.nodes) == 1
    assert used.nodes[0].cpu_time > 0
    assert used.total.cpu_time == pytest.approx(used.nodes[0].cpu_time)
    assert used.total.max_rss > 0


def test_a_running_job_says_what_it_has_used_so_far(client):
    busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 600"
    jobid = client.submit(fluxgate.jobspec(["sh", "-c", busy]), waitable=True)
    deadline = time.monotonic() + 60
    used = None
    while time.monotonic() < deadline:
        used = client.usage(jobid)
        if used is not None and used.total.cpu_time > 0.05:
            break
        time.sleep(0.2)
    assert used is not None and used.total.cpu_time > 0.05, used
    client.cancel(jobid)
    assert not client.wait(jobid, timeout=60).success


def test_an_unknown_job_is_not_found(client):
    with pytest.raises(fluxgate.FluxgateError) as err:
        list(client.eventlog(123456789))
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_f58_matches_the_command_line(client):
    jobid = client.submit(fluxgate.jobspec(["true"]))
    cli = subprocess.run(
        [str(binary("fluxgate")), "job", "id", "--to=f58", str(jobid)],
        capture_output=True,
        text=True,
        env=dict(os.environ, LC_ALL="C.UTF-8"),
        check=True,
    )
    assert cli.stdout.strip() == fluxgate.f58(jobid)
    client.wait_inactive(jobid, timeout=60)


def test_the_example_runs_a_job(instance):
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "submit_and_wait.py"), "echo", "example"],
        capture_output=True,
        text=True,
        env=dict(os.environ, FLUXGATE_URI=instance.uri),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("submitted ƒ")
    assert [line.split()[1] for line in lines[1:-1]] == LIFECYCLE
    assert lines[-1] == "example"


def test_tokens_for_an_instance_that_requires_them(tmp_path):
    inst = Instance(tmp_path, size=1, auth=True)
    try:
        with fluxgate.Client(inst.uri, token="") as anonymous:
            with pytest.raises(fluxgate.FluxgateError) as err:
                anonymous.submit(fluxgate.jobspec(["true"]))
            assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert "FLUXGATE_TOKEN" in err.value.message
        guest = subprocess.run(
            [str(binary("fluxgate")), "token", "create", "--user", "bob", "--uid", "4242",
             "--key", str(inst.statedir / "instance.key")],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
        with fluxgate.Client(inst.uri, token=inst.owner_token) as owner:
            held = owner.submit(fluxgate.jobspec(["true"]), urgency=0)
        with fluxgate.Client(inst.uri, token=guest) as bob:
            mine = bob.submit(fluxgate.jobspec(["true"]), urgency=0)
            submit = next(bob.eventlog(mine))
            assert submit.name == "submit" and submit.context["userid"] == 4242
            with pytest.raises(fluxgate.FluxgateError) as err:
                list(bob.eventlog(held))
            assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    finally:
        inst.stop()


def test_the_journal_gives_the_active_jobs_then_every_event(client):
    held = client.submit(fluxgate.jobspec(["true"]), urgency=0)
    entries = client.journal(timeout=60)
    snapshot = []
    for entry in entries:
        if entry.kind == "sentinel":
            break
        assert entry.kind == "snapshot", entry
        snapshot.append(entry.job.id)
    # The held job is active: its row comes before the sentinel.
    assert held in snapshot
    jobid = client.submit(fluxgate.jobspec(["true"]))
    names = []
    for entry in entries:
        assert entry.kind == "event", entry
        if entry.id != jobid:
            continue
        names.append(entry.event.name)
        if entry.event.name in ("submit", "alloc"):
            assert entry.job is not None and entry.job.id == jobid
        if entry.event.name == "clean":
            break
    assert names == LIFECYCLE
    client.cancel(held)
