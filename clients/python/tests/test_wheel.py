"""The client builds into a typed wheel offline, its stubs generated at build time."""

import pathlib
import subprocess
import sys
import zipfile

HERE = pathlib.Path(__file__).resolve().parents[1]


def test_the_wheel_is_typed(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
         "--no-build-isolation", "--no-deps", "-w", str(tmp_path), str(HERE)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("fluxgate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "fluxgate/py.typed" in names
    for module in ("jobmanager", "resource", "exec"):
        assert f"fluxgate/v1/{module}_pb2.py" in names
        assert f"fluxgate/v1/{module}_pb2.pyi" in names
        assert f"fluxgate/v1/{module}_pb2_grpc.py" in names
        assert f"fluxgate/v1/{module}_pb2_grpc.pyi" in names
