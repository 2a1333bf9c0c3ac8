"""Leader following against in-process gRPC servers that play a leader and a
standby: redirects, retried submits with one idempotency key, resumed
eventlogs, and the failover deadline."""

import json
import socket
import threading
import time
from concurrent import futures

import grpc
import pytest

import fluxgate
from fluxgate.v1 import jobmanager_pb2 as pb
from fluxgate.v1 import jobmanager_pb2_grpc as pb_grpc

_HEALTH = "/grpc.health.v1.Health/Check"


def _line(i):
    return json.dumps({"timestamp": float(i), "name": f"e{i}", "context": {}}) + "\n"


class FakeJobManager(pb_grpc.JobManagerServicer):
    """A job manager that leads or stands by, and can fail a call once."""

    def __init__(self, leads=True, leader=None):
        self.leads = leads
        self.leader = leader
        self.fail_submits = 0
        self.break_watch_after = None
        self.submits = []
        self.watches = []
        self.lock = threading.Lock()

    def _refuse(self, context):
        if self.leader:
            context.set_trailing_metadata((("fluxgate-leader", self.leader),))
        context.abort(grpc.StatusCode.UNAVAILABLE, "standing by")

    def Submit(self, request, context):
        with self.lock:
            self.submits.append(request.idempotency_key)
            failing = self.fail_submits > 0
            self.fail_submits -= 1
        if not self.leads or failing:
            self._refuse(context)
        return pb.SubmitResponse(id=42)

    def WatchEventlog(self, request, context):
        self.watches.append(request.from_line)
        if not self.leads:
            self._refuse(context)
        for i in range(request.from_line, 5):
            if self.break_watch_after is not None and i == self.break_watch_after:
                self._refuse(context)
            yield pb.EventlogLine(line=_line(i))

    def health(self, request, context):
        # HealthCheckResponse { status = 1 (SERVING) or 2 (NOT_SERVING) }
        return b"\x08\x01" if self.leads else b"\x08\x02"


def _serve(servicer):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_JobManagerServicer_to_server(servicer, server)
    health = grpc.unary_unary_rpc_method_handler(
        servicer.health, request_deserializer=lambda b: b, response_serializer=lambda b: b
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": health}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture()
def pair():
    a, b = FakeJobManager(), FakeJobManager()
    sa, ua = _serve(a)
    sb, ub = _serve(b)
    yield a, ua, b, ub
    sa.stop(0)
    sb.stop(0)


def test_a_standby_named_first_redirects_to_the_leader(pair):
    a, ua, b, ub = pair
    a.leads, a.leader = False, ub
    with fluxgate.Client(f"{ua},{ub}") as client:
        assert client.submit({"version": 1}) == 42
    assert len(b.submits) == 1 and b.submits[0]


def test_a_retried_submit_keeps_its_idempotency_key(pair):
    a, ua, b, ub = pair
    # The leader refuses the first try while it steps down, naming b.
    a.fail_submits, a.leader = 1, ub
    with fluxgate.Client(f"{ua},{ub}") as client:
        assert client.submit({"version": 1}) == 42
        assert client.submit({"version": 1}) == 42
    tried = a.submits + b.submits
    assert len(tried) == 3
    assert a.submits[0] == b.submits[0]
    assert len(set(tried)) == 2


def test_a_followed_eventlog_resumes_after_its_last_line(pair):
    a, ua, b, ub = pair
    a.break_watch_after, a.leader = 2, ub
    with fluxgate.Client(f"{ua},{ub}") as client:
        names = [e.name for e in client.eventlog(1, follow=True)]
    assert names == [f"e{i}" for i in range(5)]
    assert a.watches == [0] and b.watches == [2]


def test_with_no_leader_the_client_gives_up_at_its_deadline(pair):
    a, ua, b, ub = pair
    a.leads = b.leads = False
    start = time.monotonic()
    with pytest.raises(fluxgate.FluxgateError) as err:
        fluxgate.Client(f"{ua},{ub}", failover_timeout=0.5)
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert time.monotonic() - start < 5


def test_a_uri_list_is_read_from_the_environment(pair, monkeypatch):
    a, ua, b, ub = pair
    a.leads = False
    monkeypatch.setenv("FLUXGATE_URI", f"{ua}, {ub}")
    with fluxgate.Client() as client:
        assert client.submit({"version": 1}) == 42
    assert len(b.submits) == 1


def test_a_job_manager_that_is_down_is_passed_over(pair):
    a, ua, b, ub = pair
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    with fluxgate.Client(f"{down},{ua}", failover_timeout=5) as client:
        assert client.submit({"version": 1}) == 42
    assert len(a.submits) == 1
