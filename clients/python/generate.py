"""Generate the gRPC stubs of fluxgate.v1 from proto/ with grpcio-tools.

Run as `python generate.py` (setup.py runs it on every build and install); the
output, fluxgate/v1/*_pb2*.py, is never edited by hand nor committed.
"""

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
OUT = HERE


def proto_files():
    """The .proto files of the API, relative to the proto root."""
    return sorted(
        str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "fluxgate" / "v1").glob("*.proto")
    )


def generate():
    """Write fluxgate/v1/*_pb2.py, *_pb2.pyi, *_pb2_grpc.py and *_pb2_grpc.pyi; exit on failure."""
    # Imported here so that reading this module needs no grpcio-tools.
    from grpc_tools import protoc
    import grpc_tools

    files = proto_files()
    if not files:
        sys.exit(f"no .proto files under {PROTO_ROOT / 'fluxgate' / 'v1'}")
    # The well-known types ship inside grpc_tools; protoc needs their path.
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    import tempfile

    descriptors = pathlib.Path(tempfile.mkdtemp()) / "fluxgate.binpb"
    args = [
        "grpc_tools.protoc",
        f"--descriptor_set_out={descriptors}",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={OUT}",
        f"--pyi_out={OUT}",
        f"--grpc_python_out={OUT}",
        *files,
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed: " + " ".join(args))
    # protoc types the messages (--pyi_out) but not the service modules.
    sys.path.insert(0, str(HERE))
    import grpc_stubs

    grpc_stubs.write(descriptors, OUT)
    descriptors.unlink()
    descriptors.parent.rmdir()
    # protoc writes modules only; the package marker makes fluxgate.v1 a
    # regular package so that setuptools and type checkers find it.
    (OUT / "fluxgate" / "v1" / "__init__.py").write_text(
        '"""Generated from proto/fluxgate/v1 by clients/python/generate.py."""\n'
    )


if __name__ == "__main__":
    generate()
