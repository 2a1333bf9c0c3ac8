"""The README's Python examples run as written against a real instance."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from instance import Instance

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    # Two nodes: the first example asks for nnodes=2.
    inst = Instance(tmp_path_factory.mktemp("state"), size=2)
    yield inst
    assert inst.stop() == [0, 0, 0]


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_a_readme_example_runs(instance, index, tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", EXAMPLES[index]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, FLUXGATE_URI=instance.uri),
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    if "Executor" in EXAMPLES[index]:
        assert out[0].startswith("started ƒ")
        assert out[1:] == ["3", "cancelled"]
    else:
        assert out[-1].startswith("WaitResult(") and "success=True" in out[-1]
