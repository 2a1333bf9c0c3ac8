"""A real instance for the tests: the built job manager and exec binaries on
ephemeral loopback ports, stopped with SIGTERM (and checked to exit 0)."""

import os
import pathlib
import queue
import signal
import subprocess
import threading

REPO = pathlib.Path(__file__).resolve().parents[3]


def bin_dir():
    """Where the fluxgate binaries are: $FLUXGATE_BIN_DIR or the debug build."""
    if os.environ.get("FLUXGATE_BIN_DIR"):
        return pathlib.Path(os.environ["FLUXGATE_BIN_DIR"])
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug"


def binary(name):
    """The path of one binary; fails with how to build it when it is missing."""
    path = bin_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `cargo build --workspace` first")
    return path


def _first_line(proc, timeout):
    """The first line `proc` prints, without waiting longer than `timeout`."""
    lines = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError(f"{proc.args[0]} printed no address in {timeout}s") from None
    if not line:
        raise RuntimeError(f"{proc.args[0]} exited with {proc.wait()} before serving")
    return line.strip()


class Instance:
    """A job manager and `size` exec services named node0..node(size-1)."""

    def __init__(self, statedir, size=1, auth=False):
        self.procs = []
        self.statedir = pathlib.Path(statedir)
        jm_auth = ["--set", "auth.enabled=true"] if auth else []
        self.jm = self._spawn(
            binary("fluxgate-job-manager"),
            "--listen", "127.0.0.1:0",
            "--statedir", str(statedir),
            "--size", str(size),
            *jm_auth,
        )
        # The job manager prints its URI once it listens (after it wrote
        # the owner's token and the node credential, when auth is on).
        self.uri = _first_line(self.jm, 30)
        self.owner_token = None
        exec_auth = []
        if auth:
            self.owner_token = (self.statedir / "owner.token").read_text().strip()
            exec_auth = ["--node-token-file", str(self.statedir / "node.token")]
            if os.geteuid() == 0:
                exec_auth.append("--allow-root-jobs")
        for i in range(size):
            ex = self._spawn(
                binary("fluxgate-exec"),
                "--job-manager", self.uri,
                "--hostname", f"node{i}",
                "--cores-count", "2",
                *exec_auth,
            )
            _first_line(ex, 30)

    def _spawn(self, *argv):
        env = dict(os.environ, FLUXGATE_LOG="warn", RUST_LOG="warn")
        proc = subprocess.Popen(
            [str(a) for a in argv],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def stop(self):
        """SIGTERM every process, exec services first; their exit codes."""
        codes = []
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                codes.append(proc.wait(timeout=30))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
            proc.stdout.close()
        return codes
