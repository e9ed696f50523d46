"""Test sessions share the one local cluster (tests/support/kube.py) when two pytests run side by
side on one machine. Here each session is a forked process and the cluster a fake whose starts
and stops go to a log: the last session out stops the cluster a session started,
never the local stack's, and a test that stops it waits to have it alone."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import kube

FORK = multiprocessing.get_context("fork")


@pytest.fixture()
def cluster(tmp_path, monkeypatch):
    """The fake: a file holds the running cluster's process group; the log, what happened."""
    running, log = tmp_path / "running", tmp_path / "log"

    def note(line: str) -> None:
        with open(log, "a") as out:
            out.write(line + "\n")

    def status(name):
        return SimpleNamespace(pgid=int(running.read_text())) if running.exists() else None

    def start(name, images=()):
        if not running.exists():
            pgid = len(log.read_text().splitlines()) + 100 if log.exists() else 100
            running.write_text(str(pgid))
            note("start")
        return status(name)

    def stop(name):
        running.unlink(missing_ok=True)
        note("stop")

    monkeypatch.setattr(kube, "state_dir", lambda name: tmp_path / "state")
    monkeypatch.setattr(kube, "cluster_status", status)
    monkeypatch.setattr(kube, "start_cluster", start)
    monkeypatch.setattr(kube, "stop_cluster", stop)
    monkeypatch.setattr(kube, "ensure_image", lambda: SimpleNamespace(archive=Path("serving.tar")))
    return SimpleNamespace(note=note, log=lambda: log.read_text().splitlines(), start=start)


def run(*targets) -> None:
    processes = [FORK.Process(target=target) for target in targets]
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)
        assert process.exitcode == 0


def test_the_last_session_out_stops_the_cluster_a_session_started(cluster):
    first_in, second_in, first_out = FORK.Event(), FORK.Event(), FORK.Event()

    def first():
        with kube.session_cluster():
            first_in.set()
            second_in.wait(10)
        cluster.note("first left")
        first_out.set()

    def second():
        first_in.wait(10)
        with kube.session_cluster():
            second_in.set()
            first_out.wait(10)
        cluster.note("second left")

    run(first, second)
    assert cluster.log() == ["start", "first left", "stop", "second left"]


def test_a_cluster_the_local_stack_started_is_left_running(cluster):
    cluster.start("local")  # the local stack's, before any session

    def session():
        with kube.session_cluster():
            pass

    run(session, session)
    assert cluster.log() == ["start"]


def test_a_test_that_stops_the_cluster_waits_to_have_it_alone_and_leaves_it_running(cluster):
    other_in, stopping_in = FORK.Event(), FORK.Event()

    def other():
        with kube.session_cluster():
            other_in.set()
            stopping_in.wait(10)
            time.sleep(1)  # long enough that a stopping test that did not wait would come first
            cluster.note("other leaving")  # its last step in the session: the lock is released next

    def stopping():
        other_in.wait(10)
        with kube.session_cluster():
            stopping_in.set()
            with kube.sole_use():
                cluster.note("alone")
                kube.stop_cluster("local")
            assert kube.cluster_status("local") is not None  # running again for later tests
        cluster.note("stopping left")

    run(other, stopping)
    log = cluster.log()
    assert log.index("other leaving") < log.index("alone")
    # Stopped by the test, started again, and stopped by the last session out.
    assert log[log.index("alone"):] == ["alone", "stop", "start", "stop", "stopping left"]
