"""localhosts/progress.py: a silent command gets a heartbeat naming what runs and what the logs
last said; a talkative one gets none; its status and output pass through."""

from __future__ import annotations

import subprocess
import sys

from components.cache import build_once
from localhosts.engine import REPO


def progress(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localhosts.progress", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_silent_command_gets_a_heartbeat_with_the_last_line_of_each_log(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("building kubernetes\n[ 42%] compiling kubelet\n\n")
    done = progress("--every", "0.5", "--log", f"kubernetes build={log}", "--",
                    "sh", "-c", "sleep 1.8; echo finished; exit 3")
    assert done.returncode == 3
    assert done.stdout == "finished\n"
    beats = [line for line in done.stderr.splitlines() if line.startswith("progress:")]
    assert len(beats) >= 2, done.stderr
    assert beats[0].startswith("progress: sh still running after 0.0 min;")
    assert beats[0].endswith("; kubernetes build: [ 42%] compiling kubelet")


def test_a_command_that_keeps_talking_gets_no_heartbeat():
    done = progress("--every", "0.6", "--", "sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 0.2; done")
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n2\n3\n4\n5\n", "")


def test_a_log_named_without_its_file_is_refused_naming_the_form():
    done = progress("--log", "kubernetes", "--", "true")
    assert done.returncode == 2 and "--log 'kubernetes': allowed is NAME=FILE" in done.stderr


def test_a_cached_build_says_it_was_and_a_first_build_says_what_it_makes(tmp_path, capsys):
    done = tmp_path / "thing.complete"
    build_once(done, done.touch, "the thing")
    build_once(done, done.touch, "the thing")
    assert capsys.readouterr().err.splitlines() == [
        "spear-fleet: the thing: building (first time only)",
        "spear-fleet: the thing: built in 0 s",
        "spear-fleet: the thing: cached"]
    build_once(done, done.touch, None)  # inside the Pulumi program: silent
    assert capsys.readouterr().err == ""
