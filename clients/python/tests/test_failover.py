"""The client over two job managers sharing a PostgreSQL store: it finds the
leader, and after the leader is killed its submit and its followed eventlog
carry on with the standby, with no job made twice and no line given twice."""

import os
import signal
import subprocess

import pytest

import fluxgate
import pg
from instance import _first_line, binary

pytestmark = pytest.mark.skipif(not pg.available(), reason="PostgreSQL's server is not installed")


@pytest.fixture()
def pair(tmp_path):
    server = pg.PgServer()
    procs = []
    env = dict(os.environ, FLUXGATE_LOG="warn", FLUXGATE_STORE_URL=server.url)

    def spawn(*argv):
        proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, env=env, text=True)
        procs.append(proc)
        return proc

    uris = []
    for name in ("a", "b"):
        jm = spawn(
            binary("fluxgate-job-manager"),
            "--listen", "127.0.0.1:0",
            "--statedir", tmp_path / name,
            "--size", "1",
            "--set", "ha.poll_interval=0.05",
        )
        uris.append(_first_line(jm, 30))
    ex = spawn(binary("fluxgate-exec"), "--job-manager", ",".join(uris), "--hostname", "node0", "--cores-count", "2")
    _first_line(ex, 30)
    yield procs[:2], uris
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    server.stop()


def test_the_client_follows_the_leader_across_a_kill(pair):
    jms, uris = pair
    with fluxgate.Client(",".join(reversed(uris))) as client:
        first = client.submit(fluxgate.jobspec(["true"]), waitable=True)
        assert client.wait(first, timeout=60).success
        long = client.submit(fluxgate.jobspec(["sh", "-c", "echo one; sleep 2; echo two"]))
        lines = client.eventlog(long, "eventlog", follow=True)
        seen = [next(lines).name]  # submit
        jms[0].send_signal(signal.SIGKILL)
        # The rest comes from the standby, after the line already given.
        seen += [e.name for e in lines]
        assert seen[0] == "submit"
        assert seen.count("submit") == 1
        assert seen[-1] == "clean"
        after = client.submit(fluxgate.jobspec(["true"]), waitable=True)
        assert client.wait(after, timeout=60).success
    with fluxgate.Client(uris[1]) as standby_now_leader:
        jobs = [j.id for j in standby_now_leader.jobs.List(fluxgate.client.pb.ListRequest(states=127)).jobs]
    assert sorted(jobs) == sorted([first, long, after]), "one job per submit"
