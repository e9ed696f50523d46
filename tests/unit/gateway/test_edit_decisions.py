"""The gateway's receiver of harness metrics (spear_gateway/edits.py), on the exports Claude Code
2.1.328 sent in one real turn each (data/: recorded from the harness writing a file through a
stand-in API, with and without `--permission-mode acceptEdits`): the edit decisions are read
out, everything else is ignored, a cumulative or malformed export is refused, and the counter
is labelled with the key's owner."""

import copy
import hashlib
import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from spear.rules import HARNESS_METRICS_PATH
from spear_gateway import edits

DATA = Path(__file__).parent / "data"


def export(kind: str) -> dict:
    return json.loads((DATA / f"claude-code-2.1.328-edit-{kind}.json").read_text())


def test_an_accepted_write_is_one_accept_from_config_and_the_rest_of_the_export_is_ignored():
    assert edits.edit_decisions(export("accept")) == [
        edits.Decision("claude-code", "Write", "accept", "config", 1.0)]


def test_a_write_refused_in_print_mode_is_one_reject():
    assert edits.edit_decisions(export("reject")) == [
        edits.Decision("claude-code", "Write", "reject", "config", 1.0)]


def test_an_export_without_edits_counts_nothing():
    assert edits.edit_decisions({"resourceMetrics": []}) == []


def edit_metric(body: dict) -> dict:
    [metric] = [m for r in body["resourceMetrics"] for s in r["scopeMetrics"]
                for m in s["metrics"] if m["name"] == edits.EDIT_DECISION]
    return metric


def test_a_cumulative_export_is_refused_naming_the_setting_since_it_repeats_earlier_counts():
    body = export("accept")
    edit_metric(body)["sum"]["aggregationTemporality"] = 2  # CUMULATIVE
    with pytest.raises(edits.BadExport,
                       match="OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta"):
        edits.edit_decisions(body)


def test_the_enum_by_name_and_an_integer_written_as_a_string_are_read_as_otlp_json_allows():
    body = export("accept")
    metric = edit_metric(body)
    metric["sum"]["aggregationTemporality"] = "AGGREGATION_TEMPORALITY_DELTA"
    point = metric["sum"]["dataPoints"][0]
    del point["asDouble"]
    point["asInt"] = "3"
    assert [d.count for d in edits.edit_decisions(body)] == [3.0]


@pytest.mark.parametrize("broken", [
    "not an object", {"resourceMetrics": "no list"},
])
def test_what_is_not_an_otlp_export_is_refused(broken):
    with pytest.raises(edits.BadExport, match="not an OTLP metrics export"):
        edits.edit_decisions(broken)


def test_a_point_without_a_number_or_with_a_negative_one_is_refused():
    for value in ({}, {"asDouble": -1}):
        body = copy.deepcopy(export("accept"))
        point = edit_metric(body)["sum"]["dataPoints"][0]
        del point["asDouble"]
        point.update(value)
        with pytest.raises(edits.BadExport):
            edits.edit_decisions(body)


def sample(**labels: str) -> float:
    return REGISTRY.get_sample_value("spear_edit_decisions_total", labels) or 0.0


def test_decisions_are_counted_against_the_keys_owner_by_harness_tool_decision_and_source():
    labels = {"developer": "ana", "team": "platform", "harness": "claude-code", "tool": "Write"}
    accepted, rejected = sample(**labels, decision="accept", source="config"), \
        sample(**labels, decision="reject", source="config")
    edits.count(("ana", "platform"), edits.edit_decisions(export("accept")) * 2
                + edits.edit_decisions(export("reject")))
    assert sample(**labels, decision="accept", source="config") == accepted + 2
    assert sample(**labels, decision="reject", source="config") == rejected + 1


def test_the_key_is_looked_up_as_litellm_stores_it_and_only_from_a_bearer_header():
    assert edits.key_hash("Bearer sk-abc") == hashlib.sha256(b"sk-abc").hexdigest()
    assert edits.key_hash("bearer  sk-abc ") == hashlib.sha256(b"sk-abc").hexdigest()
    assert [edits.key_hash(h) for h in (None, "", "Basic sk-abc", "Bearer ")] == [None] * 4


def test_the_receivers_path_is_one_litellm_lets_a_developers_key_reach():
    # LiteLLM's PrometheusAuthMiddleware answers 401 to any key but the master key on a path
    # holding "/metrics" (measured on 1.91.1: the harness's reports were refused there).
    assert "/metrics" not in HARNESS_METRICS_PATH
