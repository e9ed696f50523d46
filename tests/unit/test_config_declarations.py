"""Each key is declared once (config/options.py): the declaration reads the value into its normal
form or a Problem naming the key, what was given and what is allowed; the key lists come from
it; `parse` reads no file (config/load.py reads what the declarations name) and judges what the
sections typed with the rules across them."""

from __future__ import annotations

import builtins
import dataclasses
import pathlib

import pytest

from config.checker import MISSING, Checker, ConfigError
from config.load import read_files
from config.options import (PORT, REQUIRED, Choice, Int, Named, Obj, Opt, ProjectFile, Tagged,
                            Text, Typed, declared, opt, paths)
from config.schema import OBJECT_KEYS, STACK, TOP_KEYS, parse
from config.schema.across import RULES
from tests.support.config_cases import fleet_raw
from tests.support.gate_records import RECORDS, TASKS, TRACE, gate_config, project

SERVER = Obj({"port": Opt(PORT, "its port", default=8080),
              "ctxSize": Opt(Int(1), "its window", why="no default: state it in the stack"),
              "mode": Opt(Choice(("a", "b")), "how", default=None)})


def _problems(check: Checker) -> list[str]:
    return [str(problem) for problem in check.problems]


def test_an_object_is_read_with_its_defaults_and_a_number_the_cli_wrote_as_text():
    check = Checker()
    assert SERVER.read(check, "server", {"ctxSize": "4096"}) == {
        "port": 8080, "ctxSize": 4096, "mode": None}
    assert check.problems == []


def test_every_problem_of_an_object_is_named_at_its_key_with_what_is_allowed():
    check = Checker()
    SERVER.read(check, "server", {"port": 0, "mode": "c", "ctxSzie": 1})
    assert _problems(check) == [
        "spear-fleet:server.ctxSzie: got an unknown key; allowed: one of port, ctxSize, mode",
        "spear-fleet:server.port: got 0; allowed: an integer 1-65535",
        "spear-fleet:server.ctxSize: got nothing; allowed: an integer >= 1 (no default: state it"
        " in the stack)",
        "spear-fleet:server.mode: got 'c'; allowed: one of a, b"]


def test_a_map_by_name_refuses_a_bad_name_and_reads_the_others():
    check = Checker()
    assert Named(SERVER, "a server").read(check, "servers", {"Bad": {}, "ok": {"ctxSize": 1}}) \
        == {"ok": {"port": 8080, "ctxSize": 1, "mode": None}}
    assert [problem.key for problem in check.problems] == ["spear-fleet:servers.Bad"]


def test_a_tagged_object_takes_the_keys_of_its_tag():
    kind = Tagged("mode", {"a": Obj({"mode": Opt(Choice(("a", "b")), "")}),
                           "b": Obj({"mode": Opt(Choice(("a", "b")), ""),
                                     "port": Opt(PORT, "", default=1)})})
    check = Checker()
    assert kind.read(check, "x", {"mode": "b"}) == ("b", {"mode": "b", "port": 1})
    kind.read(check, "x", {"mode": "a", "port": 2})
    assert [problem.key for problem in check.problems] == ["spear-fleet:x.port"]


def test_the_key_lists_are_the_declarations():
    assert TOP_KEYS == tuple(STACK.fields)
    assert {"inferenceHosts", "sshPrivateKeys", "gateway", "vllmFleet"} <= set(OBJECT_KEYS)
    # Secrets are read as text, never as JSON objects.
    assert not {"gatewayMasterKey", "kubeconfig", "vllmApiKey"} & set(OBJECT_KEYS)
    assert ("vllmFleet", "rolloutGate", "policy", "tasks") in set(paths(STACK))
    assert all(opt.doc for opt in STACK.fields.values())


def test_a_required_key_says_so_only_when_it_is_missing():
    check = Checker()
    opt = Opt(Int(1), "", why="required: the file size")
    assert opt.default is REQUIRED
    opt.read(check, "a", MISSING)
    opt.read(check, "b", "x")
    assert _problems(check) == [
        "spear-fleet:a: got nothing; allowed: an integer >= 1 (required: the file size)",
        "spear-fleet:b: got 'x'; allowed: an integer >= 1"]


def test_read_files_reads_each_file_and_folder_the_declarations_name(tmp_path, monkeypatch):
    monkeypatch.chdir(project(tmp_path))
    (tmp_path / RECORDS).mkdir(parents=True)
    (tmp_path / RECORDS / "a.json").write_text("{}")
    (tmp_path / RECORDS / "a.evidence.jsonl").write_text("")
    raw = fleet_raw(rolloutGate=gate_config())
    assert read_files(raw) == {TASKS: pathlib.Path(TASKS).read_bytes(),
                               TRACE: pathlib.Path(TRACE).read_bytes(),
                               f"{RECORDS}/a.evidence.jsonl": b"", f"{RECORDS}/a.json": b"{}"}
    raw["vllmFleet"]["rolloutGate"]["policy"]["tasks"] = "gate/tasks/none.jsonl"
    assert read_files(raw)["gate/tasks/none.jsonl"] == "No such file or directory"


def test_parse_reads_no_file_and_names_one_it_was_not_given(monkeypatch):
    raw = fleet_raw(rolloutGate=gate_config())
    files = read_files(raw)

    def no_reading(*args, **kwargs):
        raise AssertionError("parse read a file")

    for reader in ("read_bytes", "read_text", "iterdir", "glob"):
        monkeypatch.setattr(pathlib.Path, reader, no_reading)
    monkeypatch.setattr(builtins, "open", no_reading)
    assert parse(raw, files=files).vllm_fleet.gate.tasks == files[TASKS]
    with pytest.raises(ConfigError) as error:
        parse(raw, files={name: data for name, data in files.items() if name != TASKS})
    assert [str(problem) for problem in error.value.problems] == [
        f"spear-fleet:vllmFleet.rolloutGate.policy.tasks: got {TASKS!r}; allowed: the paired"
        " eval's task set (JSON lines, spear/rollout_gate.py): a readable file (not read)"]


def test_a_project_file_outside_the_project_is_refused_before_it_is_read():
    check = Checker()
    kind = ProjectFile("a task set")
    assert list(kind.files("../etc/passwd")) == []
    kind.read(check, "tasks", "../etc/passwd")
    assert _problems(check) == [
        "spear-fleet:tasks: got '../etc/passwd'; allowed: a task set: a path inside the project"]


def test_each_rule_across_sections_is_a_named_function_with_its_why():
    assert len({rule.__name__ for rule in RULES}) == len(RULES)
    assert all(rule.__doc__ for rule in RULES)


def test_a_key_declared_on_its_typed_value_is_read_typed_listed_and_in_the_schema():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Probe:
        path: str = opt(Text(lambda v: v if v.startswith("/") else None, "an absolute path"),
                        "what it asks")
        interval_seconds: int = opt(Int(1), "how often it asks", default=10)

    check = Checker()
    assert Typed(Probe).read(check, "probe", {"path": "/health", "intervalSeconds": "30"}) \
        == Probe(path="/health", interval_seconds=30)
    assert Typed(Probe).read(check, "probe", {"path": "health"}) is None
    assert _problems(check) == ["spear-fleet:probe.path: got 'health'; allowed: an absolute path"]
    assert list(paths(declared(Probe))) == [("path",), ("intervalSeconds",)]
    assert declared(Probe).schema()["properties"]["intervalSeconds"] == {
        "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": "^-?[0-9]+$"}],
        "description": "how often it asks", "default": 10}
    assert declared(Probe).schema()["required"] == ["path"]
