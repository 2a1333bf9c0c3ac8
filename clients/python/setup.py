"""Build hook: the gRPC stubs are generated from proto/ before every build."""

import pathlib
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info


def _generate():
    # The build backend does not always put this directory on sys.path.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import generate

    generate.generate()


class BuildPy(build_py):
    """build_py that regenerates fluxgate/v1 from the .proto files first."""

    def run(self):
        _generate()
        super().run()


class EggInfo(egg_info):
    """egg_info that sees the generated modules when listing the package."""

    def run(self):
        _generate()
        super().run()


setup(cmdclass={"build_py": BuildPy, "egg_info": EggInfo})
