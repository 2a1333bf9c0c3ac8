"""A private PostgreSQL server for a test (Debian's package): initdb into a
temporary directory as the postgres user when run as root, pg_ctl on a free
loopback port, stopped by stop()."""

import glob
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile


def _bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return pathlib.Path(found[-1]).parent if found else None


def available():
    """Whether the server's programs are installed."""
    return _bindir() is not None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """A running server with one database, `url`."""

    def __init__(self):
        self.bin = _bindir()
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="fluxgate-pg-"))
        self.port = _free_port()
        self.data = self.dir / "data"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.dir}"
        )
        self._run("pg_ctl", "-D", self.data, "-o", opts, "-l", self.dir / "log", "-w", "start")
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program, *args):
        argv = [str(self.bin / program), *[str(a) for a in args]]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True)

    def stop(self):
        """Stop the server and remove its files."""
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
