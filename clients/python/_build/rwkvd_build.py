"""A minimal PEP 517 backend: packs rwkvd/*.py into a pure-Python wheel. Needs nothing beyond
the standard library, so pip can build it with no network."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, VERSION = "rwkvd", "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: Client of the rwkvd RWKV-7 inference worker
Requires-Python: >=3.9
Requires-Dist: pyzmq
Requires-Dist: numpy
Requires-Dist: msgpack
"""
# The console script: the client commands of `python -m rwkvd` (named apart from the C++
# binary `rwkvd`, which it must not shadow on PATH).
ENTRY_POINTS = "[console_scripts]\nrwkvd-client = rwkvd.cli:main\n"
WHEEL = "Wheel-Version: 1.0\nGenerator: rwkvd_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _sources():
    pkg = os.path.join(ROOT, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":  # py.typed: the package is typed
            yield f"{NAME}/{name}", os.path.join(pkg, name)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    wheel_name = f"{NAME}-{VERSION}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as zf:
        for arc, data in files:
            zf.writestr(arc, data)
            records.append(_record_line(arc, data))
        for arc, text in ((f"{DIST_INFO}/METADATA", METADATA), (f"{DIST_INFO}/WHEEL", WHEEL),
                          (f"{DIST_INFO}/entry_points.txt", ENTRY_POINTS)):
            zf.writestr(arc, text)
            records.append(_record_line(arc, text.encode()))
        records.append(f"{DIST_INFO}/RECORD,,")
        zf.writestr(f"{DIST_INFO}/RECORD", "\n".join(records) + "\n")
    return wheel_name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for arc, path in _sources():
        with open(path, "rb") as f:
            files.append((arc, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file pointing at the source tree.
    return _write_wheel(wheel_directory, [(f"{NAME}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "_build/rwkvd_build.py"] + [a for a, _ in _sources()]:
            tf.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return name
