"""localhosts/images/seat_image.py: OpenHands' virtualenv moves into the seat image with the Python it
was made with, at paths the image's unprivileged user can reach (the real image runs in
tests/integration/test_gateway_in_cluster.py)."""

from __future__ import annotations

from localhosts.images import seat_image


def fake_install(root):
    """A virtualenv made from a Python 3.12 under /root, as uv makes one from pyenv's."""
    base = root / "root/.pyenv/versions/3.12.1"
    (base / "bin").mkdir(parents=True)
    (base / "bin/python3.12").write_text("#!python")
    stdlib = base / "lib/python3.12"
    for folder in ("encodings", "lib-dynload", "test", "site-packages", "idlelib"):
        (stdlib / folder).mkdir(parents=True)
        (stdlib / folder / "__init__.py").write_text("")
    (stdlib / "os.py").write_text("")
    (base / "lib/libpython3.12.so.1.0").write_text("")
    venv = root / "cache/harnesses/openhands-0123/venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/openhands").write_text("#!/bin/sh\n")
    (venv / "bin/python").symlink_to(base / "bin/python3.12")
    (venv / "pyvenv.cfg").write_text(f"home = {base}/bin\nversion_info = 3.12.1\n")
    (venv / "lib/python3.12/site-packages/openhands_cli").mkdir(parents=True)
    return venv / "bin/openhands"


def test_openhands_runs_from_its_virtualenv_on_its_python_moved_out_of_root(tmp_path):
    entries = {}
    binaries, own = seat_image._add_openhands(fake_install(tmp_path), entries)
    venv, python = "/opt/harnesses/openhands/venv", "/opt/python3.12/bin/python3.12"
    assert entries["/usr/local/bin/openhands"] == ("symlink", f"{venv}/bin/openhands")
    assert f"{venv}/lib/python3.12/site-packages/openhands_cli" in entries
    # The virtualenv's interpreter and its home are the moved Python, not the host's under /root.
    for name in ("python", "python3", "python3.12"):
        assert entries[f"{venv}/bin/{name}"] == ("symlink", python)
    kind, settings, mode = entries[f"{venv}/pyvenv.cfg"]
    assert (kind, mode) == ("data", 0o644)
    assert settings.decode().splitlines()[0] == "home = /opt/python3.12/bin"
    assert entries[python][0] == "file"
    assert "/opt/python3.12/lib/python3.12/os.py" in entries
    assert "/opt/python3.12/lib/python3.12/encodings/__init__.py" in entries
    # Its tests and its own packages stay out; nothing lands under /root (closed to the user).
    assert not any("/python3.12/test" in path or "python3.12/site-packages" in path
                   and not path.startswith(venv) for path in entries)
    assert not any(path.startswith("/root") for path in entries)
    # libpython where the loader looks once the interpreter's RUNPATH (under /root) fails.
    assert entries["/usr/lib/libpython3.12.so.1.0"][0] == "file"
    assert str(tmp_path / "root/.pyenv/versions/3.12.1/bin/python3.12") in binaries
    assert str(tmp_path / "cache/harnesses/openhands-0123/venv") in own
