"""A small client of the fluxgate.v1 API: submit, watch eventlogs, wait.

Eventlog entries travel as RFC 18 JSON lines; they are parsed here with the
standard json module into `Event` values, keeping the line as it was stored.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import time
import uuid
from typing import Dict, Iterator, List, Optional, Sequence, Union

import grpc

from fluxgate import leader as _leader

from fluxgate.v1 import jobmanager_pb2 as pb
from fluxgate.v1 import jobmanager_pb2_grpc as pb_grpc
from fluxgate.v1 import resource_pb2_grpc

URI_ENV = "FLUXGATE_URI"
TOKEN_ENV = "FLUXGATE_TOKEN"

# Submit flags, as the `submit` event's `flags` context records them.
FLAG_DEBUG = pb.SUBMIT_FLAG_DEBUG
FLAG_WAITABLE = pb.SUBMIT_FLAG_WAITABLE

_F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class FluxgateError(Exception):
    """A request the instance refused, with its gRPC status code and message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclasses.dataclass(frozen=True)
class Event:
    """One RFC 18 eventlog entry."""

    timestamp: float
    name: str
    context: dict
    line: str

    @classmethod
    def parse(cls, line: str) -> "Event":
        """Parse one eventlog line (with or without its newline)."""
        obj = json.loads(line)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise ValueError(f"not an RFC 18 event: {line!r}")
        return cls(
            timestamp=float(obj.get("timestamp", 0.0)),
            name=obj["name"],
            context=obj.get("context") or {},
            line=line.rstrip("\n"),
        )


@dataclasses.dataclass(frozen=True)
class JournalEntry:
    """One entry of the instance's job journal (`Client.journal`).

    `kind` is "snapshot" (a job active when the journal was opened: `job`
    is its listing row), "sentinel" (the snapshot is complete; live events
    follow), "event" (one main eventlog event of job `id`; `job` is set too
    for `submit` and `alloc`) or "resync" (the reader fell behind and events
    were lost: forget the active jobs, a new snapshot and sentinel follow).
    """

    kind: str
    id: int
    event: Optional[Event]
    job: Optional[object]


_JOURNAL_KINDS = {
    pb.JOB_JOURNAL_KIND_SNAPSHOT: "snapshot",
    pb.JOB_JOURNAL_KIND_SENTINEL: "sentinel",
    pb.JOB_JOURNAL_KIND_EVENT: "event",
    pb.JOB_JOURNAL_KIND_RESYNC: "resync",
}


@dataclasses.dataclass(frozen=True)
class NodeUsage:
    """What a job used on one node: CPU seconds and peak memory in bytes."""

    ranks: str
    hostname: str
    user: float
    system: float
    max_rss: int

    @property
    def cpu_time(self) -> float:
        """CPU seconds, user and system."""
        return self.user + self.system


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a job used (`Client.usage`): per node in rank order, and the sum
    (`total.max_rss` adds the nodes' peaks)."""

    nodes: List[NodeUsage]
    total: NodeUsage

    @classmethod
    def parse(cls, text: str) -> "Usage":
        """Read the JSON document the job manager stores."""
        obj = json.loads(text)

        def node(n: dict, ranks: str = "", hostname: str = "") -> NodeUsage:
            return NodeUsage(
                ranks=n.get("ranks", ranks),
                hostname=n.get("hostname", hostname),
                user=float(n.get("user", 0.0)),
                system=float(n.get("system", 0.0)),
                max_rss=int(n.get("max_rss", 0)),
            )

        return cls(nodes=[node(n) for n in obj.get("nodes", [])], total=node(obj.get("total", {}), "total"))


@dataclasses.dataclass(frozen=True)
class WaitResult:
    """How a waitable job ended."""

    id: int
    success: bool
    error: str


def f58(jobid: int) -> str:
    """A job id in RFC 19 F58, as the command line prints it."""
    if jobid == 0:
        return "ƒ1"
    digits = []
    while jobid:
        jobid, rem = divmod(jobid, 58)
        digits.append(_F58_ALPHABET[rem])
    return "ƒ" + "".join(reversed(digits))


def _target(uri):
    """A grpc target and whether it needs TLS, from an `http(s)://host:port` URI."""
    for scheme, secure in (("http://", False), ("https://", True)):
        if uri.startswith(scheme):
            return uri[len(scheme):].rstrip("/"), secure
    return uri, False


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer TOKEN` to every call."""

    def __init__(self, token):
        self._header = ("authorization", f"Bearer {token.strip()}")

    def _details(self, details):
        return _CallDetails(
            details.method,
            details.timeout,
            tuple(details.metadata or ()) + (self._header,),
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


def _error(err):
    return FluxgateError(err.code(), err.details())


def _open(uri):
    target, secure = _target(uri)
    if secure:
        return grpc.secure_channel(target, grpc.ssl_channel_credentials())
    return grpc.insecure_channel(target)


class Client:
    """A connection to one instance's job manager.

    `uri` defaults to $FLUXGATE_URI (e.g. http://127.0.0.1:7000) and `token`
    (sent with every call, for instances that require credentials) to
    $FLUXGATE_TOKEN. Use as a context manager or call close().

    `uri` may list several job managers sharing one store, comma separated
    (docs/HA.md): the client talks to the one that leads, and after a
    failover retries on the new leader for up to `failover_timeout`
    seconds; submits carry an idempotency key, so a retried one makes one
    job, and followed eventlogs resume after the last line they gave.
    """

    def __init__(
        self, uri: Optional[str] = None, token: Optional[str] = None, *, failover_timeout: float = 30.0
    ):
        uri = uri or os.environ.get(URI_ENV)
        if not uri:
            raise FluxgateError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{URI_ENV} is not set: pass the instance address",
            )
        self.uri = uri
        self._uris = _leader.split_uris(uri)
        self._token = token or os.environ.get(TOKEN_ENV)
        self.failover_timeout = failover_timeout
        self._channel: Optional[grpc.Channel] = None
        self._connect()

    def _connect(self, prefer=None):
        """Open the channel: to the one job manager, or to the leader."""
        if self._channel is not None:
            self._channel.close()
        if len(self._uris) == 1:
            self._channel = _open(self._uris[0])
        else:
            deadline = time.monotonic() + self.failover_timeout
            try:
                self._channel, _ = _leader.find_leader(self._uris, _open, deadline, prefer)
            except TimeoutError as err:
                raise FluxgateError(grpc.StatusCode.UNAVAILABLE, str(err)) from None
        token = self._token
        calls = grpc.intercept_channel(self._channel, _Bearer(token)) if token else self._channel
        self.jobs = pb_grpc.JobManagerStub(calls)
        self.resource = resource_pb2_grpc.ResourceStub(calls)

    def _retrying(self, call):
        """`call()`, again on the new leader while a failover explains its errors."""
        deadline = time.monotonic() + self.failover_timeout
        while True:
            try:
                return call()
            except grpc.RpcError as err:
                if len(self._uris) < 2 or not _leader.is_failover(err) or time.monotonic() >= deadline:
                    raise _error(err) from None
                time.sleep(0.1)
                self._connect(prefer=_leader.leader_named(err))

    def close(self) -> None:
        """Close the connection."""
        if self._channel is not None:
            self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc):
        self.close()

    def submit(
        self,
        jobspec: Union[dict, str],
        *,
        urgency: Optional[int] = None,
        waitable: bool = False,
        flags: int = 0,
        timeout: Optional[float] = 30,
    ) -> int:
        """Submit a jobspec (a dict, or JSON/YAML text); returns the job id."""
        text = jobspec if isinstance(jobspec, str) else json.dumps(jobspec)
        if waitable:
            flags |= FLAG_WAITABLE
        request = pb.SubmitRequest(jobspec=text, flags=flags)
        if urgency is not None:
            request.urgency = urgency
        # A retry (on a new leader, or after a lost reply) carries the same
        # key, and the instance answers it with the same job.
        request.idempotency_key = str(uuid.uuid4())
        return self._retrying(lambda: self.jobs.Submit(request, timeout=timeout).id)

    def eventlog(
        self,
        jobid: int,
        name: str = "eventlog",
        *,
        follow: bool = False,
        wait_create: bool = False,
        timeout: Optional[float] = None,
    ) -> Iterator[Event]:
        """Yield the events of one of a job's eventlogs.

        `name` is "eventlog", "exec.eventlog" or "output"; with `follow` the
        stream goes on until the log is final (the job is inactive).
        """
        seen = 0
        deadline = None
        while True:
            request = pb.WatchEventlogRequest(
                id=jobid,
                name=name,
                follow=follow,
                wait_create=wait_create or seen > 0,
                from_line=seen,
            )
            try:
                for msg in self.jobs.WatchEventlog(request, timeout=timeout):
                    seen += 1
                    deadline = None
                    yield Event.parse(msg.line)
                return
            except grpc.RpcError as err:
                if len(self._uris) < 2 or not _leader.is_failover(err):
                    raise _error(err) from None
                # Resume on the new leader after the last line given.
                deadline = deadline or time.monotonic() + self.failover_timeout
                if time.monotonic() >= deadline:
                    raise _error(err) from None
                time.sleep(0.1)
                self._connect(prefer=_leader.leader_named(err))

    def journal(self, *, timeout: Optional[float] = None) -> Iterator[JournalEntry]:
        """Follow every job of the instance, as flux's job journal does.

        Yields the active jobs (kind "snapshot"), a "sentinel", then each
        main eventlog event as it is committed (kind "event"), until the
        stream is closed or `timeout` passes. A guest sees other users'
        jobs only as the job listing shows them.
        """
        try:
            for msg in self.jobs.Journal(pb.JobJournalRequest(), timeout=timeout):
                kind = _JOURNAL_KINDS.get(msg.kind)
                if kind is None:
                    continue
                yield JournalEntry(
                    kind=kind,
                    id=msg.id,
                    event=Event.parse(msg.event) if msg.event else None,
                    job=msg.job if msg.HasField("job") else None,
                )
        except grpc.RpcError as err:
            raise _error(err) from None

    def wait(self, jobid: int, *, timeout: Optional[float] = None) -> WaitResult:
        """Wait for a job submitted with waitable=True to end; a WaitResult."""
        r = self._retrying(lambda: self.jobs.Wait(pb.WaitRequest(id=jobid), timeout=timeout))
        return WaitResult(id=r.id, success=r.success, error=r.error)

    def wait_inactive(self, jobid: int, *, timeout: Optional[float] = None) -> List[Event]:
        """Follow a job's eventlog until it is final; all its events, in order.

        Works for any job, waitable or not.
        """
        return list(self.eventlog(jobid, follow=True, timeout=timeout))

    def cancel(self, jobid: int, note: str = "", *, timeout: Optional[float] = 30) -> None:
        """Cancel a job (an exception of type cancel)."""
        try:
            self.jobs.Cancel(pb.CancelRequest(id=jobid, note=note), timeout=timeout)
        except grpc.RpcError as err:
            raise _error(err) from None

    def info(
        self, jobid: int, keys: Sequence[str] = ("jobspec", "R", "eventlog"), *, timeout: Optional[float] = 30
    ) -> Dict[str, str]:
        """A job's stored keys (jobspec, R, eventlog, exec.eventlog, output, usage) as text.

        A long log comes in pages (each reply stays under gRPC's default
        message size); they are read one after another and joined.
        """
        values = {}
        for key in keys:
            parts, offset = [], 0
            while True:
                try:
                    r = self.jobs.Info(
                        pb.InfoRequest(id=jobid, keys=[key], offset=offset),
                        timeout=timeout,
                    )
                except grpc.RpcError as err:
                    raise _error(err) from None
                parts.append(r.values[key])
                nxt = r.next_offset.get(key, 0)
                if not r.more or nxt <= offset:
                    break
                offset = nxt
            values[key] = "".join(parts)
        return values

    def usage(self, jobid: int, *, timeout: Optional[float] = 30) -> Optional[Usage]:
        """What a job used, per node and in total, as its nodes read it from
        its cgroups: stored at its end, or while it runs what it has used so
        far; None when it has none (not started, or its nodes do not contain
        jobs in cgroups)."""
        try:
            r = self.jobs.Info(pb.InfoRequest(id=jobid, keys=["usage"]), timeout=timeout)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise _error(err) from None
        else:
            return Usage.parse(r.values["usage"])
        # Not stored (yet): a running job's usage so far.
        try:
            live = self.jobs.Tasks(pb.TasksRequest(id=jobid), timeout=timeout)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise _error(err) from None
        return Usage.parse(live.usage) if live.usage else None


__all__ = [
    "Client",
    "Event",
    "FluxgateError",
    "NodeUsage",
    "Usage",
    "WaitResult",
    "f58",
]
