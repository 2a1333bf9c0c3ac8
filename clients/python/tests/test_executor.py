"""fluxgate.Executor against a real instance: futures carry each job's end."""

import concurrent.futures
import threading

import pytest

import fluxgate
from instance import Instance
from test_client import LIFECYCLE


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("state"), size=2)
    yield inst
    assert inst.stop() == [0, 0, 0]


def command(*argv):
    return fluxgate.JobspecV1.from_command(list(argv))


def test_a_hundred_jobs_end_as_their_futures_say(instance):
    with fluxgate.Executor(instance.uri) as executor:
        ok = [executor.submit(command("true")) for _ in range(90)]
        failed = [executor.submit(command("false")) for _ in range(8)]
        cancelled = executor.submit(command("sleep", "60"))
        raised = executor.submit(command("sleep", "60"))

        # Both long jobs must be running before the exception is raised, so
        # that it is the job's exception, not a refusal to start.
        running = threading.Event()
        raised.add_event_callback("start", lambda f, e: running.set())
        assert cancelled.jobid(timeout=60) > 0
        assert cancelled.running()
        assert cancelled.cancel()
        jobid = raised.jobid(timeout=60)
        assert running.wait(120)
        executor.client.jobs.RaiseException(
            fluxgate.client.pb.RaiseExceptionRequest(id=jobid, type="test", severity=0, note="from the test")
        )

        assert [f.result(timeout=300) for f in ok] == [0] * 90
        assert [f.result(timeout=300) for f in failed] == [1] * 8
        with pytest.raises(concurrent.futures.CancelledError):
            cancelled.result(timeout=120)
        assert cancelled.cancelled()
        with pytest.raises(fluxgate.JobException) as err:
            raised.result(timeout=120)
        assert (err.value.type, err.value.severity, err.value.note) == ("test", 0, "from the test")
        ids = {f.jobid() for f in ok + failed + [cancelled, raised]}
        assert len(ids) == 100


def test_event_callbacks_see_the_lifecycle_in_order(instance):
    seen = []
    # One worker, held by a first job, so that every callback is in place
    # before the second job's first event.
    with fluxgate.Executor(instance.uri, max_workers=1) as executor:
        executor.submit(command("sleep", "1"))
        future = executor.submit(command("true"))
        for name in LIFECYCLE:
            future.add_event_callback(name, lambda f, e: seen.append(e.name))
        assert future.result(timeout=120) == 0
    assert seen == LIFECYCLE


def test_a_future_cancelled_before_submission_never_makes_a_job(instance):
    executor = fluxgate.Executor(instance.uri, max_workers=1)
    blocker = executor.submit(command("sleep", "1"))
    queued = executor.submit(command("true"))
    assert queued.cancel()
    executor.shutdown(wait=True)
    assert blocker.result() == 0
    assert queued.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        queued.jobid(timeout=5)


def test_submit_after_shutdown_is_refused(instance):
    executor = fluxgate.Executor(instance.uri)
    executor.shutdown()
    with pytest.raises(RuntimeError):
        executor.submit(command("true"))


def test_attach_follows_a_job_submitted_elsewhere(instance):
    with fluxgate.Client(instance.uri) as client:
        jobid = client.submit(fluxgate.jobspec(["sh", "-c", "exit 5"]))
    with fluxgate.Executor(instance.uri) as executor:
        future = executor.attach(jobid)
        assert future.jobid(timeout=10) == jobid
        assert future.result(timeout=120) == 5


def test_shutdown_can_cancel_the_jobs_not_yet_submitted(instance):
    executor = fluxgate.Executor(instance.uri, max_workers=1)
    first = executor.submit(command("sleep", "1"))
    later = [executor.submit(command("true")) for _ in range(3)]
    first.jobid(timeout=30)
    executor.shutdown(wait=True, cancel_futures=True)
    assert first.result() == 0
    assert all(f.cancelled() for f in later)
    with pytest.raises(concurrent.futures.CancelledError):
        later[0].jobid(timeout=5)


def test_a_failing_callback_does_not_break_the_future(instance):
    seen = []

    def bad(future, event):
        raise RuntimeError("a bug in the caller")

    with fluxgate.Executor(instance.uri) as executor:
        future = executor.submit(command("true"))
        future.add_event_callback("submit", bad)
        future.add_event_callback("clean", lambda f, e: seen.append(e.name))
        assert future.result(timeout=120) == 0
        # Cancelling a job that has ended is refused, as for any done future.
        assert not future.cancel()
    assert seen == ["clean"]
