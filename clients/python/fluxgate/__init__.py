"""Python client of Fluxgate's gRPC API; the stubs live in fluxgate.v1."""

from fluxgate.client import Client, Event, FluxgateError, WaitResult, f58
from fluxgate.jobspec import jobspec

__all__ = ["Client", "Event", "FluxgateError", "WaitResult", "f58", "jobspec"]
