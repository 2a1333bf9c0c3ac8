"""Jobs as `concurrent.futures` futures, as flux's `FluxExecutor` offers them.

Each submitted job is carried by one worker: it submits the jobspec, then
follows the job's main eventlog (one WatchEventlog stream with follow) and
feeds every event to the future until the log is final. Nothing polls.

A future completes when the log ends (after `clean`), so by then every event
callback has run and the job holds no resources:
- a fatal exception of type `cancel` makes it cancelled (`CancelledError`);
- any other fatal exception makes it fail with `JobException`;
- otherwise its result is the exit code of `finish` (128 + signal number when
  the tasks were killed by a signal, as a shell reports it).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from typing import Any, Callable, List, Optional, Set, Tuple

from fluxgate.client import Client, Event, FluxgateError

_log = logging.getLogger(__name__)

# Workers follow one job each; jobs past this many wait in the pool's queue
# before they are submitted.
DEFAULT_MAX_WORKERS = 256


class JobException(Exception):
    """A fatal job exception (RFC 21): its type, severity and note."""

    def __init__(self, type_: str, severity: int, note: str):
        super().__init__(f"job exception: type={type_} severity={severity}" + (f": {note}" if note else ""))
        self.type = type_
        self.severity = severity
        self.note = note


def exit_code(status: int) -> int:
    """The exit code of a wait status (RFC 21 `finish`), 128 + signal if killed."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class JobFuture(concurrent.futures.Future):
    """The future of one job: its exit code, or why it did not run."""

    def __init__(self, client: Client):
        super().__init__()
        self._client = client
        self._lock = threading.Lock()
        self._jobid: Optional[int] = None
        self._assigned = threading.Event()
        self._submitting = False
        self._submit_error: Optional[BaseException] = None
        self._events: List[Event] = []
        self._callbacks: List[Tuple[str, Callable[["JobFuture", Event], Any]]] = []

    def jobid(self, timeout: Optional[float] = None) -> int:
        """The job's id, once the instance assigned it (blocks until then).

        Raises `CancelledError` if the future was cancelled before submission,
        the submit error if it failed, `TimeoutError` after `timeout` seconds.
        """
        if not self._assigned.wait(timeout):
            raise concurrent.futures.TimeoutError("job id not yet assigned")
        if self._submit_error is not None:
            raise self._submit_error
        if self._jobid is None:
            raise concurrent.futures.CancelledError()
        return self._jobid

    def running(self) -> bool:
        """Whether the job has been handed to the instance and has not ended."""
        # The base state stays PENDING until the end, so that a job's cancel
        # exception can still mark the future cancelled.
        return self._submitting and not self.done()

    def cancel(self) -> bool:
        """Cancel the job: before submission, it is never submitted; after, the
        instance cancels it and the future becomes cancelled when the job's
        `cancel` exception arrives (unless the job ended first)."""
        with self._lock:
            if not self._submitting:
                cancelled = super().cancel()
                # jobid() must not wait for a submission that will not come.
                self._assigned.set()
                return cancelled
        if self.done():
            return self.cancelled()
        try:
            jobid = self.jobid()
        except Exception:
            return self.cancelled()
        try:
            self._client.cancel(jobid)
        except FluxgateError:
            # Refused: most often the job ended before the request arrived.
            return False
        return True

    def add_event_callback(self, event_name: str, fn: Callable[["JobFuture", Event], Any]) -> "JobFuture":
        """Call `fn(future, event)` for each `event_name` event of the job's eventlog.

        Events already seen are given at once; returns the future, for chaining.
        """
        with self._lock:
            self._callbacks.append((event_name, fn))
            past = [e for e in self._events if e.name == event_name]
        for event in past:
            self._call(fn, event)
        return self

    # The executor's and the worker's side.

    def _cancel_unsubmitted(self) -> None:
        with self._lock:
            if not self._submitting and super().cancel():
                self._assigned.set()

    def _start_submit(self) -> bool:
        with self._lock:
            if self.cancelled():
                self._assigned.set()
                return False
            self._submitting = True
            return True

    def _set_jobid(self, jobid):
        self._jobid = jobid
        self._assigned.set()

    def _fail_submit(self, err):
        self._submit_error = err
        self._assigned.set()
        self.set_exception(err)

    def _on_event(self, event: Event):
        with self._lock:
            self._events.append(event)
            callbacks = [fn for name, fn in self._callbacks if name == event.name]
        for fn in callbacks:
            self._call(fn, event)

    def _call(self, fn: Callable[["JobFuture", Event], Any], event: Event) -> None:
        # A failing callback is the caller's bug; it must not stop the
        # future from seeing the rest of the job.
        try:
            fn(self, event)
        except Exception:
            _log.exception("event callback for %s failed", event.name)

    def _finish(self):
        fatal = next(
            (e for e in self._events if e.name == "exception" and e.context.get("severity", 0) == 0),
            None,
        )
        if fatal is not None and fatal.context.get("type") == "cancel":
            super().cancel()
            return
        if fatal is not None:
            ctx = fatal.context
            self.set_exception(JobException(ctx.get("type", ""), ctx.get("severity", 0), ctx.get("note", "")))
            return
        finish = next((e for e in self._events if e.name == "finish"), None)
        if finish is None:
            self.set_exception(RuntimeError("the job's eventlog ended without finish"))
        else:
            self.set_result(exit_code(int(finish.context.get("status", 0))))


class Executor(concurrent.futures.Executor):
    """Run jobs on an instance and get their results as futures.

    `uri`, `token` and `failover_timeout` are those of `Client`. Use as a
    context manager: leaving it waits for every job, as `shutdown()` does.
    """

    def __init__(
        self,
        uri: Optional[str] = None,
        token: Optional[str] = None,
        *,
        failover_timeout: float = 30.0,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ):
        self._client = Client(uri, token, failover_timeout=failover_timeout)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="fluxgate-job"
        )
        self._lock = threading.Lock()
        self._shutdown = False
        # Futures not yet done, so that shutdown can cancel the unsubmitted.
        self._pending: Set[JobFuture] = set()

    @property
    def client(self) -> Client:
        """The client the jobs go through."""
        return self._client

    def submit(self, jobspec: Any, *args: Any, **kwargs: Any) -> JobFuture:  # type: ignore[override]
        """Submit `jobspec` (a dict, JSON text or `JobspecV1`); its `JobFuture`.

        Keyword arguments (`urgency`, `flags`, ...) go to `Client.submit`.
        """
        if args:
            raise TypeError("submit takes a jobspec and keyword arguments only")
        spec = getattr(jobspec, "jobspec", jobspec)
        return self._start(JobFuture(self._client), spec, kwargs, None)

    def attach(self, jobid: int) -> JobFuture:
        """A `JobFuture` for a job already submitted (by anyone), followed the same way."""
        return self._start(JobFuture(self._client), None, {}, jobid)

    def _start(self, future: JobFuture, spec: Any, kwargs: dict, jobid: Optional[int]) -> JobFuture:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            self._pending.add(future)
            self._pool.submit(self._run, future, spec, kwargs, jobid)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._pending.discard(future)  # type: ignore[arg-type]

    def _run(self, future: JobFuture, spec: Any, kwargs: dict, jobid: Optional[int] = None):
        if not future._start_submit():
            return
        if jobid is None:
            try:
                jobid = self._client.submit(spec, **kwargs)
            except Exception as err:
                future._fail_submit(err)
                return
        future._set_jobid(jobid)
        try:
            for event in self._client.eventlog(jobid, follow=True):
                future._on_event(event)
        except Exception as err:
            future.set_exception(err)
            return
        future._finish()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submissions; with `wait`, return once every job's future is done.

        `cancel_futures` cancels jobs not yet submitted (submitted ones run on).
        """
        with self._lock:
            self._shutdown = True
            pending = list(self._pending)
        if cancel_futures:
            for future in pending:
                future._cancel_unsubmitted()
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait:
            self._client.close()
