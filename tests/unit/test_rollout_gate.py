"""The rollout gate (spear/rollout_gate.py): the verdict is no significant regression plus the
stack's floors and SLOs; percentiles and the trace replay's timing; and a record is believed only
as far as its evidence, re-judged, bears it out: the config check refuses, naming the field, a
record edited by hand, evidence altered or missing, a record of another pair or policy."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from config.checker import ConfigError
from config.load import StackConfigError
from config.load import parse_stack
from gate import run as gate_run
from spear import rollout_gate, trace
from spear.fleet import STABLE
from spear.probes import ToolSpec
from tests.support import gate_records as records
from tests.support.config_cases import (CANARY_PAIR, MASTER_KEY, STABLE_PAIR, changed, fleet_raw, gateway_raw, problem_line,
                                        promoted_raw, run_program)
from tests.support.stack_files import engine_config


@pytest.fixture(autouse=True)
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(records.project(tmp_path))
    return tmp_path


def found(**run) -> rollout_gate.Results:
    policy = records.policy()
    evidence = records.evidence(CANARY_PAIR, policy, **run)
    result, problems = rollout_gate.results(rollout_gate.evidence_lines(evidence), records.tasks())
    assert problems == []
    return result


def test_a_neutral_bump_with_every_floor_met_passes():
    result = found()
    assert (result.paired_eval["b"], result.paired_eval["c"], result.paired_eval["p"]) == (0, 0, 1.0)
    assert rollout_gate.failures(result, records.policy()) == []


def test_a_significant_regression_fails_with_b_c_and_p_shown():
    result = found(candidate_fails=8)  # 6 of 14 passed: over a floor of 0.4, so only b, c, p
    [regression] = rollout_gate.failures(result, records.policy(candidatePassRateMin=0.4))
    assert regression == ("the candidate regresses on the paired eval: b=8 tasks stable passes and it"
                          " fails, c=0 the reverse, exact McNemar p=0.007812 < alpha 0.05")


def test_a_difference_that_is_not_significant_is_no_regression_but_the_floor_still_holds():
    result = found(candidate_fails=2)
    assert result.paired_eval["p"] == 0.5
    [reason] = rollout_gate.failures(result, records.policy())
    assert reason == "the candidate passed 12 of 14 tasks, below the floor 0.9"
    assert rollout_gate.failures(result, records.policy(candidatePassRateMin=0.8)) == []


def test_a_candidate_better_than_stable_passes():
    assert rollout_gate.failures(found(stable_fails=5), records.policy()) == []


def test_tool_calls_answered_as_text_fail_with_the_count_per_reason():
    result = found(markup_calls=3)
    assert result.tool_calls == {"total": 100, "passed": 97, "reason:ok": 97,
                                 "reason:parser-not-configured": 3}
    [reason] = rollout_gate.failures(result, records.policy())
    assert reason == ("the tool-call validator admitted 97 of 100 live samples, below the floor 1"
                      " (refused: parser-not-configured 3)")


def test_fewer_samples_than_the_policy_asks_fail():
    [reason] = rollout_gate.failures(found(samples=60), records.policy())
    assert reason == "the tool-call validator ran on 60 live samples, fewer than the policy's 100"


def test_latency_over_the_slos_fails_on_the_95th_percentile():
    result = found(ttft=1.6, itl=0.07)
    assert (result.latency["ttftP95"], result.latency["itlP95"]) == (1.6, pytest.approx(0.07))
    reasons = rollout_gate.failures(result, records.policy())
    assert reasons == ["TTFT p95 1.6s under replayed load exceeds the SLO 1.5s",
                       "inter-token latency p95 0.07s under replayed load exceeds the SLO 0.06s"]


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert [rollout_gate.percentile(values, q) for q in (50, 95, 99, 100)] == [50, 95, 99, 100]
    assert rollout_gate.percentile([0.3], 95) == 0.3 and rollout_gate.percentile([], 95) == 0.0


def test_the_replay_sends_each_arrival_at_its_offset_and_never_more_than_the_concurrency():
    arrivals = trace.parse({"requests": [{"offset": o, "promptWords": 1, "maxTokens": 1}
                                         for o in (0.0, 0.0, 0.0, 0.3)]})
    in_flight, peak, lock = [0], [0], threading.Lock()

    def send(_):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.1)
        with lock:
            in_flight[0] -= 1
        return {}

    sent = [r["sent"] for r in gate_run.replay(arrivals, 2, send)]
    assert peak[0] == 2
    # The third waited for a slot (a send takes 0.1 s), the fourth for its offset; the upper
    # bounds are loose, for a loaded machine (a CI run's unit tests share it with builds).
    # Which of the three at offset 0 waits is the threads' race (a CI run saw the third go first):
    # whichever was sent last of them went a send's time after the first.
    first, second, third = sorted(sent[:3])
    assert second < 2.0 and third >= first + 0.1 and third < 3.0
    assert 0.3 <= sent[3] < 3.5


def test_a_trace_out_of_order_is_refused():
    with pytest.raises(ValueError, match=r"requests\[1\]: offsets >= 0 and sorted"):
        trace.parse({"requests": [{"offset": 1, "promptWords": 1, "maxTokens": 1},
                                  {"offset": 0.5, "promptWords": 1, "maxTokens": 1}]})


def test_a_bad_task_line_is_named():
    tasks, problems = rollout_gate.parse_tasks(b'{"id": "a", "messages": [], "check": {}}\n')
    assert (tasks, problems) == ((), ["line 1: messages: a list of {role: system|user|assistant,"
                                      " content: text}"])


# --- the config check ------------------------------------------------------------------------

def promote(**run):
    records.write_record("canary-1", CANARY_PAIR, **run)
    return promoted_raw(records.gate_config())


def config_error(raw) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    return error.value


def refused(raw) -> str:
    return str(config_error(raw))


def test_a_promotion_with_a_record_the_gate_wrote_is_accepted():
    fleet = parse_stack(promote()).vllm_fleet
    [record] = fleet.gate_records
    assert (record.name, record.pin.pair, record.passed) == (
        "canary-1", ("v0.25.0", CANARY_PAIR["model"], CANARY_PAIR["revision"]), True)


def test_a_promotion_whose_run_failed_is_refused_with_its_reasons():
    with pytest.raises(ConfigError) as error:
        parse_stack(promote(candidate_fails=8))
    line = problem_line(error.value, "vllmFleet.stable")
    assert "record canary-1: the candidate regresses on the paired eval: b=8" in line
    assert "p=0.007812 < alpha 0.05" in line


def test_a_number_edited_by_hand_is_refused_naming_the_field():
    path = records.write_record("canary-1", CANARY_PAIR, candidate_fails=8)
    record = json.loads(path.read_text())
    record["results"]["pairedEval"]["b"] = 0
    record["results"]["pairedEval"]["p"] = 1.0
    record["failures"] = []
    path.write_text(json.dumps(record))
    message = problem_line(config_error(promoted_raw(records.gate_config())), "vllmFleet.stable")
    assert "record canary-1 does not stand (results.pairedEval.b: 0 where the evidence gives 8" in message


def test_evidence_altered_after_the_run_is_refused():
    path = records.write_record("canary-1", CANARY_PAIR)
    evidence = path.with_name("canary-1.evidence.jsonl")
    evidence.write_bytes(evidence.read_bytes().replace(b'"status": 200', b'"status": 201', 1))
    assert "record canary-1 does not stand (evidence.sha256: " in refused(promoted_raw(records.gate_config()))


def test_missing_evidence_is_refused():
    records.write_record("canary-1", CANARY_PAIR).with_name("canary-1.evidence.jsonl").unlink()
    assert "its file 'canary-1.evidence.jsonl' is missing" in refused(promoted_raw(records.gate_config()))


def test_a_record_made_under_another_policy_is_refused():
    records.write_record("canary-1", CANARY_PAIR)
    message = refused(promoted_raw(records.gate_config(ttftP95Seconds=5)))
    assert "the policy changed after the run, so run it again" in message


def test_a_record_of_another_pair_does_not_promote():
    records.write_record("canary-1", {**CANARY_PAIR, "tag": "v0.25.1"})
    message = refused(promoted_raw(records.gate_config()))
    assert "no gate record pins exactly v0.25.0" in message
    assert "(records pin v0.25.1 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567)" in message


def test_a_record_whose_pin_was_edited_is_refused():
    path = records.write_record("canary-1", {**CANARY_PAIR, "tag": "v0.25.1"})
    record = json.loads(path.read_text())
    record["pin"]["engineVersion"] = "v0.25.0"
    path.write_text(json.dumps(record))
    assert "the evidence was measured on another pin" in refused(promoted_raw(records.gate_config()))


# --- the rest of the tuple: what the promoted pair is served with ------------------------------

def test_a_promotion_under_another_litellm_than_its_record_measured_is_refused_naming_the_member():
    raw = changed(promote(), ("gateway", "litellm", "version"), "1.108.7")
    assert ("record canary-1 measured the pair under another tuple (pin.gatewayVersion: LiteLLM"
            " 1.91.1, where the stack's gateway runs 1.108.7): run scripts/gate again") \
        in problem_line(config_error(raw), "vllmFleet.stable")


def test_a_promotion_beside_a_harness_bump_its_record_did_not_measure_is_refused_naming_the_harness():
    raw = changed(promote(), ("harnesses",), {"codex": "0.170.0"})
    assert "(pin.harnessVersions.codex: 0.169.0, where the stack pins 0.170.0)" \
        in problem_line(config_error(raw), "vllmFleet.stable")


def test_a_record_that_measured_the_pair_with_the_bumped_harness_promotes_beside_the_bump():
    records.write_record("canary-1", CANARY_PAIR, harnesses={"codex": "0.170.0"})
    raw = changed(promoted_raw(records.gate_config()), ("harnesses",), {"codex": "0.170.0"})
    [record] = parse_stack(raw).vllm_fleet.gate_records
    assert dict(record.pin.harness_versions)["codex"] == "0.170.0"
    assert "pin.harnessVersions" in refused(promoted_raw(records.gate_config()))  # not without it


def test_a_promotion_after_a_new_tool_joined_the_registry_is_refused_until_the_gate_runs_again(
        monkeypatch):
    raw = promote()
    monkeypatch.setitem(rollout_gate.TOOL_REGISTRY, "list_dir", ToolSpec(required={"path": str}))
    line = problem_line(config_error(raw), "vllmFleet.stable")
    assert "(pin.toolRegistry: " in line
    assert "where the validator's registry (spear/probes.py TOOL_REGISTRY: list_dir, read_file," \
        " run_tests) is" in line
    records.write_record("canary-2", CANARY_PAIR)  # the gate run again, under the new registry
    assert [r.name for r in parse_stack(raw).vllm_fleet.gate_records] == ["canary-1", "canary-2"]


def test_a_rollback_needs_no_record_whatever_else_the_stack_moves():
    raw = fleet_raw(stable=STABLE_PAIR, previous=STABLE_PAIR, rolloutGate=records.gate_config())
    parse_stack(changed(changed(raw, ("gateway", "litellm", "version"), "1.108.7"),
                        ("harnesses",), {"codex": "0.170.0"}))


# --- receipts: only answers the stack's gateway gave ------------------------------------------

RECEIPTS = "vllmFleet.stable"  # a record that does not stand refuses its promotion, nothing else


def rewrite(lines: list[dict]) -> bytes:
    """The evidence as a record's author would rewrite it, with a record that matches it (the
    pin its run line gives, the sha256 and every number recomputed, as scripts/gate writes
    them); the evidence."""
    evidence = rollout_gate.evidence_bytes(lines)
    gate_run.write(Path(records.RECORDS), "canary-1", rollout_gate.pin_from_json(lines[0]["pin"]),
                   records.policy(), evidence, records.tasks())
    return evidence


def written_lines(**run) -> list[dict]:
    path = records.write_record("canary-1", CANARY_PAIR, **run)
    return rollout_gate.evidence_lines(path.with_name("canary-1.evidence.jsonl").read_bytes())


def test_answers_written_by_hand_are_refused_though_the_sha256_and_every_number_match():
    lines = written_lines(candidate_fails=8)
    right = {task.id: records.right_answer(task) for task in records.tasks()}
    for line in lines:
        if line["kind"] == rollout_gate.TASK and line["track"] == rollout_gate.CANDIDATE_TRACK:
            line["answer"] = right[line["task"]]
    rewrite(lines)
    message = problem_line(config_error(promoted_raw(records.gate_config())), RECEIPTS)
    assert "8 receipts do not sign their line's request and answer (lines 103, 105, 107" in message


def test_evidence_without_receipts_is_refused_naming_the_lines():
    records.write_record("canary-1", CANARY_PAIR, master_key=None)
    message = problem_line(config_error(promoted_raw(records.gate_config())), RECEIPTS)
    assert "176 served answers carry no receipt from the gateway (lines 2, 3, 4, 5, 6, ...)" in message


def test_answers_another_gateway_signed_are_refused():
    records.write_record("canary-1", CANARY_PAIR, master_key="sk-another-gateway")
    message = problem_line(config_error(promoted_raw(records.gate_config())), RECEIPTS)
    assert "or another gateway (another master key) signed them" in message


def test_stables_answers_copied_to_the_candidate_are_refused():
    lines = written_lines(candidate_fails=8)
    stable = {line["task"]: line for line in lines
              if line["kind"] == rollout_gate.TASK and line["track"] == rollout_gate.STABLE_TRACK}
    for line in lines:
        if line["kind"] == rollout_gate.TASK and line["track"] == rollout_gate.CANDIDATE_TRACK:
            line.update(answer=stable[line["task"]]["answer"], receipt=stable[line["task"]]["receipt"])
    rewrite(lines)
    message = refused(promoted_raw(records.gate_config()))
    assert "receipts sign a call another line already used" in message
    assert "14 of the candidate's answers were served by 'stable' fleet track, not 'canary'" in message
    assert ("the candidate track's answers come from more than one key, route or deployment:"
            " gate/coder/vllm-stable/stable, gate-pilot/coder/vllm-canary/canary") in message


def test_a_candidate_the_stable_track_answered_is_refused_though_every_receipt_is_genuine():
    # The pilot's key asked, but the gateway served every candidate request from the stable
    # track's deployment (a canary left undeclared, a ring rule broken): the gateway said so.
    lines = written_lines()
    forged = [records.signed({k: v for k, v in line.items() if k not in ("receipt", "closing")},
                             rollout_gate.CANDIDATE_TRACK, line["receipt"]["call_id"], MASTER_KEY,
                             identity=("gate-pilot", "vllm-stable-twin", STABLE))
              if line["kind"] != rollout_gate.RUN and not (line["kind"] == rollout_gate.TASK and
                                                           line["track"] == rollout_gate.STABLE_TRACK)
              else line for line in lines]
    rewrite(forged)
    message = refused(promoted_raw(records.gate_config()))
    assert "receipts do not sign" not in message
    candidate = sum(new is not old for new, old in zip(forged, lines))
    assert candidate == 100 + 14 + len(records.trace.parse(json.loads(Path(records.TRACE).read_text())))
    assert (f"{candidate} of the candidate's answers were served by 'stable' fleet track, not"
            " 'canary'") in message


def test_a_record_moved_to_another_gateway_version_is_refused_by_what_the_gateway_signed():
    # Record and evidence both say LiteLLM 1.108.7, their hashes recomputed; the gateway that
    # answered signed 1.91.1.
    lines = written_lines()
    lines[0]["pin"]["gatewayVersion"] = "1.108.7"
    evidence = rewrite(lines)
    assert rollout_gate.check_record(json.loads(Path(records.RECORDS, "canary-1.json").read_text()),
                                     evidence, records.tasks(), records.policy())[1] == []
    message = refused(promoted_raw(records.gate_config()))
    assert ("pin.gatewayVersion: the record pins LiteLLM 1.108.7, but LiteLLM 1.91.1 answered 176"
            " requests (lines 2, 3, 4, 5, 6, ...)") in message


def test_a_record_moved_to_another_pair_is_refused_by_what_the_answering_pods_ran():
    # Record and evidence both edited to pin v0.25.1, their hashes recomputed: the gateway
    # signed that pods running v0.25.0 answered.
    lines = written_lines()
    lines[0]["pin"]["engineVersion"] = "v0.25.1"
    rewrite(lines)
    message = refused(fleet_raw(stable={**CANARY_PAIR, "tag": "v0.25.1"}, previous=STABLE_PAIR,
                                rolloutGate=records.gate_config()))
    candidate = sum(line["kind"] != rollout_gate.RUN and line.get("track") != rollout_gate.STABLE_TRACK
                    for line in lines)
    assert (f"pin: the record pins v0.25.1 @ {CANARY_PAIR['model']} revision"
            f" {CANARY_PAIR['revision'][:7]}, but the gateway signed that a pod running v0.25.0 @"
            f" {CANARY_PAIR['model']} revision {CANARY_PAIR['revision'][:7]} answered {candidate} of"
            " the candidate's requests") in message


def test_stream_timings_faster_than_the_gateway_sent_them_are_refused():
    lines = written_lines(ttft=2.0)  # over the SLO: a record's author would like it lower
    for line in lines:
        if line["kind"] == rollout_gate.STREAM:
            line["chunks"] = [round(c - 1.9, 6) for c in line["chunks"]]
    rewrite(lines)
    record = json.loads(Path(records.RECORDS, "canary-1.json").read_text())
    assert record["failures"] == [] and record["results"]["latency"]["gatewayTtftP95"] > 1.9
    message = refused(promoted_raw(records.gate_config()))
    streams = sum(line["kind"] == rollout_gate.STREAM for line in lines)
    assert f"{streams} streams' text or chunk times are not the ones the gateway signed, or say" \
           " a chunk arrived before the gateway sent it" in message


def test_a_stream_without_its_closing_receipt_or_with_its_text_edited_is_refused():
    lines = written_lines()
    streams = [line for line in lines if line["kind"] == rollout_gate.STREAM]
    streams[0].pop("closing")
    streams[1]["text"] = "something the gateway never sent"
    rewrite(lines)
    message = refused(promoted_raw(records.gate_config()))
    assert "1 streams carry no closing receipt of their text and timings from the gateway" in message
    assert "1 streams' text or chunk times are not the ones the gateway signed" in message


def test_a_receipt_for_another_request_does_not_answer_a_task():
    lines = written_lines()
    tasks = [line for line in lines if line["kind"] == rollout_gate.TASK]
    tasks[0]["task"], tasks[2]["task"] = tasks[2]["task"], tasks[0]["task"]
    rewrite(lines)
    assert "2 task answers are to other requests than their task's" in refused(
        promoted_raw(records.gate_config()))


def test_records_in_a_stack_without_its_gateways_master_key_are_refused():
    records.write_record("canary-1", CANARY_PAIR)
    raw = promoted_raw(records.gate_config())
    for key in ("gateway", "developers", "gatewayMasterKey", "frontierApiKey"):
        raw.pop(key, None)
    message = problem_line(config_error(raw), "vllmFleet.stable")
    assert ("record canary-1 does not stand (evidence: its receipts cannot be checked: the stack"
            " declares no gatewayMasterKey") in message


def test_a_record_that_does_not_stand_blocks_only_its_promotion_saying_how_to_recover():
    path = records.write_record("canary-1", CANARY_PAIR, master_key="sk-another-gateway")
    gate = records.gate_config()
    # An up that promotes nothing, and a rollback, go on; the record is set aside, not believed.
    fleet = parse_stack(fleet_raw(rolloutGate=gate)).vllm_fleet
    assert (fleet.gate_records, [r.name for r in fleet.gate.refused]) == ((), ["canary-1"])
    assert parse_stack(fleet_raw(stable=STABLE_PAIR, previous=STABLE_PAIR, rolloutGate=gate)).vllm_fleet
    # The promotion to its pair is refused, with why and how to recover.
    message = problem_line(config_error(promoted_raw(gate)), "vllmFleet.stable")
    assert "record canary-1 does not stand (evidence: 176 receipts do not sign" in message
    assert ("run scripts/gate again, or delete canary-1.json and its evidence from the records"
            " folder") in message
    # A file in the records folder that is no record at all does not block an unrelated up.
    path.write_text("{not json")
    assert parse_stack(fleet_raw(rolloutGate=gate)).vllm_fleet.gate.refused[0].pair is None


def test_the_gate_prints_pass_only_for_a_record_the_stack_would_accept():
    passing = json.loads(records.write_record("canary-1", CANARY_PAIR).read_text())
    assert "verdict: PASS" in records.table(passing, records.policy())
    # Every number passes, but another gateway signed the answers: the stack refuses it, and so
    # does the gate's own verdict.
    forged = json.loads(records.write_record("canary-2", CANARY_PAIR,
                                             master_key="sk-another-gateway").read_text())
    assert forged["failures"] == []
    table = records.table(forged, records.policy())
    assert "verdict: PASS" not in table
    assert "verdict: REFUSED (the stack would not promote on this record)" in table
    assert "or another gateway (another master key) signed them" in table


def test_a_failing_record_does_not_hide_a_passing_one():
    records.write_record("canary-1", CANARY_PAIR, candidate_fails=8)
    records.write_record("canary-2", CANARY_PAIR)
    assert parse_stack(promoted_raw(records.gate_config())).vllm_fleet.stable.tag == "v0.25.0"


def test_a_policy_setting_out_of_range_is_refused_before_anything_is_read():
    message = refused(fleet_raw(rolloutGate=records.gate_config(toolCallSamples=20, alpha=0.7)))
    assert "vllmFleet.rolloutGate.policy.toolCallSamples: got 20; allowed: an integer >= 100" in message
    assert "vllmFleet.rolloutGate.policy.alpha: got 0.7; allowed: a number > 0 and <= 0.5" in message


def test_a_task_set_outside_the_project_is_refused():
    message = refused(fleet_raw(rolloutGate=records.gate_config(tasks="/etc/passwd")))
    assert "vllmFleet.rolloutGate.policy.tasks" in message and "a path inside the project" in message


def test_a_rollback_needs_no_record():
    raw = fleet_raw(stable=STABLE_PAIR, previous=STABLE_PAIR, rolloutGate=records.gate_config())
    assert parse_stack(raw).vllm_fleet.gate_records == ()


# --- against what is deployed ----------------------------------------------------------------

def key(pair):
    return (pair["tag"], pair["model"], pair["revision"])


DEPLOYED = (key(STABLE_PAIR), None)  # the stack's last update: stable v0.24.0, no previous


def test_deleting_previous_while_changing_stable_is_refused_against_the_deployed_pair():
    raw = fleet_raw(stable=CANARY_PAIR, rolloutGate=records.gate_config())  # no previous at all
    with pytest.raises(ConfigError) as error:
        parse_stack(raw, DEPLOYED)
    line = problem_line(error.value, "vllmFleet.stable")
    assert "stable moves off the deployed pair v0.24.0 @ Qwen/Qwen3-Coder-Next-FP8 revision" \
           " da6e2ed, so previous must be that pair (declared: none)" in line
    assert "no gate record pins exactly v0.25.0" in line


def test_declaring_the_new_pair_as_previous_does_not_make_it_a_rollback():
    raw = fleet_raw(stable=CANARY_PAIR, previous=CANARY_PAIR, rolloutGate=records.gate_config())
    assert "so previous must be that pair (declared: v0.25.0" in refused_with(raw, DEPLOYED)


def refused_with(raw, deployed) -> str:
    with pytest.raises(ConfigError) as error:
        parse_stack(raw, deployed)
    return str(error.value)


def test_a_promotion_from_the_deployed_pair_with_a_passing_record_is_accepted():
    records.write_record("canary-1", CANARY_PAIR)
    assert parse_stack(promoted_raw(records.gate_config()), DEPLOYED).vllm_fleet.stable.tag == "v0.25.0"


def test_going_back_to_the_deployed_previous_pair_needs_no_record():
    deployed = (key(CANARY_PAIR), key(STABLE_PAIR))  # promoted last time
    raw = fleet_raw(stable=STABLE_PAIR, previous=STABLE_PAIR)
    assert parse_stack(raw, deployed).vllm_fleet.stable.tag == "v0.24.0"
    # while a "rollback" to a pair that was never deployed is a promotion
    other = {**STABLE_PAIR, "tag": "v0.23.0"}
    assert "no gate record pins exactly v0.23.0" in refused_with(
        fleet_raw(stable=other, previous=other), deployed)


def test_the_program_reads_the_deployed_pairs_from_its_own_stack(mocks):
    mocks.stack_outputs = {"vllm_fleet": {"rollout": {"stable": STABLE_PAIR, "previous": None}}}
    raw = fleet_raw(stable=CANARY_PAIR, rolloutGate=records.gate_config())
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(raw), ["spear-fleet:sshPrivateKeys", "spear-fleet:vllmApiKey"])
    assert "stable moves off the deployed pair v0.24.0" in str(error.value)
    assert mocks.registered == []


def with_gate_keys(keys):
    raw = {**gateway_raw(), **{k: v for k, v in fleet_raw().items() if k in ("vllmFleet", "vllmApiKey")}}
    raw["vllmFleet"]["rolloutGate"] = {**records.gate_config(), "keys": keys}
    return raw


def test_the_gates_keys_are_developers_in_the_rings_of_their_tracks():
    people = with_gate_keys({})["developers"]
    pilot = next(name for name, d in people.items() if d.get("ring") == "pilot")
    general = next(name for name, d in people.items() if d.get("ring", "general") == "general")
    raw = with_gate_keys({"stable": general, "canary": pilot})
    raw["developers"][general]["ring"] = "stable"
    raw["gateway"]["coder"]["upstreams"].append("vllmFleet")
    raw["vllmFleet"]["serviceIPs"] = {"stable": "10.96.100.10"}
    assert parse_stack(raw).vllm_fleet.gate.keys == {"stable": general, "canary": pilot}
    message = refused(with_gate_keys({"stable": general, "canary": "nobody"}))
    assert f"vllmFleet.rolloutGate.keys.stable: got '{general}'; allowed: a developer in the stable ring" \
        in message
    assert "vllmFleet.rolloutGate.keys.canary: got 'nobody'; allowed: a developer of the stack" in message


def test_without_the_stacks_master_key_the_gate_says_refused_as_the_config_check_would():
    written = json.loads(records.write_record("canary-1", CANARY_PAIR).read_text())
    evidence = Path(records.RECORDS, written["evidence"]["file"]).read_bytes()
    verdict = rollout_gate.judge("canary-1", written, evidence, records.tasks(), records.policy(), None)
    assert isinstance(verdict, rollout_gate.Refused)
    assert "the stack declares no gatewayMasterKey" in gate_run.table(written, records.policy(), verdict)
