"""Python client of Fluxgate's gRPC API; the stubs live in fluxgate.v1."""

from fluxgate.client import Client, Event, FluxgateError, JournalEntry, NodeUsage, Usage, WaitResult, f58
from fluxgate.executor import Executor, JobException, JobFuture
from fluxgate.jobspec import JobspecV1, jobspec

__all__ = [
    "Client",
    "Event",
    "Executor",
    "FluxgateError",
    "JobException",
    "JobFuture",
    "JobspecV1",
    "JournalEntry",
    "NodeUsage",
    "Usage",
    "WaitResult",
    "f58",
    "jobspec",
]
