"""A shared state backend on real parts: Pulumi's S3 backend against S3Proxy's S3 API
(localhosts/servers/s3_server.py) on this machine, as a team would point every operator and CI at one
bucket. The stack's secrets are encrypted with a passphrase taken from the environment; the
bucket never holds one in plain text. Two `pulumi up` on one stack: the second is refused, naming
the lock the first holds, and the first completes whole. A killed `up` leaves its lock, which
`pulumi cancel` clears.

The tests form one scenario on one stack and run in file order.
"""

from __future__ import annotations

import time

import pytest

from components.hostops.waiting import wait_until
from localhosts.servers import s3_server
from localhosts.engine import Project, engine_env
from tests.support import faults

STACK = "team"
PASSPHRASE = "shared-state-it-passphrase"
TOKEN = "sk-shared-state-it-9f3a71"
LOCKS = ".pulumi/locks/"
# The file the slow step's provider writes, holding its round, when the engine has called it.
MARKER = "step-started"
# One step that takes `seconds`, so that an update is in flight long enough to race it.
PROGRAM = '''
import pathlib
import time

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider, UpdateResult


class SlowProvider(ResourceProvider):
    def run(self, props):
        # The engine calls a provider once its save of the step as in flight has returned.
        pathlib.Path(props["marker"]).write_text(props["round"])
        time.sleep(float(props["seconds"]))

    def create(self, props):
        self.run(props)
        return CreateResult("slow", dict(props))

    def update(self, _id, olds, news):
        self.run(news)
        return UpdateResult(dict(news))


class Slow(Resource):
    round: pulumi.Output[str]

    def __init__(self, name, props):
        super().__init__(SlowProvider(), name, props)


config = pulumi.Config()
step = Slow("slow-step", {"seconds": config.require("seconds"), "round": config.require("round"),
                         "marker": config.require("marker")})
pulumi.export("round", step.round)
pulumi.export("token", config.require_secret("token"))
'''


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server.running(tmp_path_factory.mktemp("s3proxy")) as server:
        yield server


@pytest.fixture(scope="module")
def project(s3, tmp_path_factory):
    proj = Project(tmp_path_factory.mktemp("shared-state"), engine_env(), program=PROGRAM)
    proj.env.update({**s3.env(), "PULUMI_BACKEND_URL": s3.backend_url,
                     "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE})
    proj.pulumi("stack", "init", STACK)
    for key, value in (("seconds", "0"), ("round", "1"), ("marker", str(proj.dir / MARKER))):
        proj.pulumi("config", "set", "--stack", STACK, key, value)
    proj.pulumi("config", "set", "--stack", STACK, "--secret", "token", TOKEN)
    return proj


def set_round(project: Project, round_: int, seconds: int) -> None:
    project.pulumi("config", "set", "--stack", STACK, "round", str(round_))
    project.pulumi("config", "set", "--stack", STACK, "seconds", str(seconds))


def wait_for_lock(s3, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not (locks := list(s3.objects(LOCKS))):
        assert time.monotonic() < deadline, "no lock appeared in the bucket"
        time.sleep(0.2)
    return locks[0]


def test_the_stack_lives_in_the_bucket_with_its_secrets_encrypted(project, s3):
    update = project.up(STACK)
    assert update.ok, update.output[-4000:]
    stored = s3.objects(".pulumi/stacks/")
    assert f".pulumi/stacks/spear-fleet/{STACK}.json" in stored, sorted(stored)
    assert not [key for key, data in s3.objects().items() if TOKEN.encode() in data]
    assert project.outputs(STACK)["token"] == TOKEN  # the passphrase from the environment reads it
    config = (project.dir / "stacks" / f"Pulumi.{STACK}.yaml").read_text()
    assert "encryptionsalt" in config and TOKEN not in config and PASSPHRASE not in config
    assert list(s3.objects(LOCKS)) == []  # released


def test_a_second_up_beside_a_running_one_is_refused_naming_the_lock_and_nothing_is_half_written(
        project, s3):
    set_round(project, 2, 15)
    first = project.start_up(STACK)
    lock = wait_for_lock(s3)
    assert lock.startswith(f"{LOCKS}organization/spear-fleet/{STACK}/")
    second = project.pulumi("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    refused = second.stdout + second.stderr
    assert second.returncode != 0
    assert "the stack is currently locked by 1 lock(s)" in refused, refused[-3000:]
    assert lock.rsplit("/", 1)[1] in refused  # the lock named, as `pulumi cancel` would remove it
    output, _ = first.communicate(timeout=300)
    assert first.returncode == 0, output[-4000:]
    assert project.outputs(STACK)["round"] == "2"
    assert project.pending_operations(STACK) == [] and list(s3.objects(LOCKS)) == []


def test_an_up_killed_mid_update_leaves_its_lock_which_pulumi_cancel_clears(project, s3):
    # A step that cannot finish before the kill, however slow the machine is to see it start.
    set_round(project, 3, 3600)
    update = project.start_up(STACK)
    wait_for_lock(s3)
    # The kill waits for the provider to have started, not for a read of the state to show the
    # step: twice, in loaded runs, a read showed it in flight before the kill and the state
    # left after it did not. The engine calls the provider only once its save has returned.
    marker = project.dir / MARKER
    assert wait_until(lambda: marker.exists() and marker.read_text() == "3", 120, interval=0.2), \
        "the update never started its step"
    faults.kill_engine(update)
    left = project.pending_operations(STACK)
    assert [op["type"] for op in left] == ["updating"], \
        (left, {key: len(data) for key, data in s3.objects(".pulumi/").items()})
    locked = project.pulumi("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert locked.returncode != 0 and "currently locked" in locked.stdout + locked.stderr
    project.pulumi("cancel", "--stack", STACK, "--yes")
    set_round(project, 3, 0)
    update = project.up(STACK, "--refresh")
    assert update.ok, update.output[-4000:]
    assert project.outputs(STACK)["round"] == "3"
    assert project.pending_operations(STACK) == [] and list(s3.objects(LOCKS)) == []
