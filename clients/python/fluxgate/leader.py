"""Finding the job manager that leads among several sharing one store.

`FLUXGATE_URI` (or `Client(uri)`) may list several job managers, comma
separated: one leads, the others stand by. A standby answers the gRPC
health check of `fluxgate.v1.JobManager` with NOT_SERVING and refuses job
calls with UNAVAILABLE, naming the leader in the `fluxgate-leader`
metadata. The health check is encoded here by hand (two protobuf fields),
so that no extra package is needed.
"""

import time

import grpc

LEADER_KEY = "fluxgate-leader"
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVICE = b"fluxgate.v1.JobManager"
_SERVING = 1


def split_uris(uri):
    """The job managers a URI list names, in order."""
    return [u.strip() for u in uri.split(",") if u.strip()]


def _health_request(service):
    # HealthCheckRequest { string service = 1; }
    return b"\x0a" + bytes([len(service)]) + service


def _health_status(data):
    # HealthCheckResponse { ServingStatus status = 1; } (a varint < 128)
    if len(data) >= 2 and data[0] == 0x08:
        return data[1]
    return 0


def is_leader(channel, timeout=1.0):
    """Whether the job manager behind `channel` leads (SERVING)."""
    check = channel.unary_unary(
        _HEALTH_CHECK,
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        return _health_status(check(_health_request(_SERVICE), timeout=timeout)) == _SERVING
    except grpc.RpcError:
        return False


def leader_named(err):
    """The leader a standby's refusal names, if any."""
    try:
        for key, value in err.trailing_metadata() or ():
            if key == LEADER_KEY:
                return value
    except Exception:  # noqa: BLE001 - an error without metadata names none
        return None
    return None


def is_failover(err):
    """Whether an error is one a failover explains (retry on the new leader)."""
    return isinstance(err, grpc.RpcError) and err.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    )


def find_leader(uris, open_channel, deadline, prefer=None):
    """Open channels to `uris` (and `prefer` first) until one leads; that
    channel and its URI. Raises TimeoutError at `deadline` (time.monotonic)."""
    while True:
        for uri in ([prefer] if prefer else []) + list(uris):
            channel = open_channel(uri)
            if is_leader(channel):
                return channel, uri
            channel.close()
        prefer = None
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no job manager of {','.join(uris)} leads")
        time.sleep(0.1)
