"""Provenance in golden sets (issue 44): who graded each judgment and when, each question's source and
review status; old files read, save and score as before, new fields round-trip, bad values are one line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from helpers.paths import KB, ROOT
from sweep.errors import InputError
from sweep.formats.golden import Provenance, dumps_golden, load_golden, save_golden

ANA = {"grade": 2, "by": "ana", "at": "2026-12-06T10:00:00Z"}
JUDGE = {"grade": 0, "by": "llm:qwen2.5:7b@3f9a1c", "at": "2026-12-06T10:05:00.123456+01:00"}
WITH_PROVENANCE = [
    {"id": "q1", "question": "How many vacation days?", "relevant": {"d1": ANA, "d2": 1, "d3": JUDGE}},
    {"id": "q2", "question": "Hotel limit?", "type": "factoid", "source": "synthetic", "status": "pending",
     "relevant": {"d2": {"grade": 1, "by": "llm:gpt-4o-2024-08-06@e3b0c442"}}},
    {"id": "q3", "question": "Who approves?", "source": "human", "status": "reviewed", "relevant": {"d3": {"grade": 1}}},
]  # fmt: skip


def write_jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_judgments_with_by_and_at_and_questions_with_source_and_status_round_trip(tmp_path):
    golden = load_golden(write_jsonl(tmp_path / "g.jsonl", WITH_PROVENANCE), warn=False)
    q1, q2, q3 = golden
    assert q1.relevant == {"d1": 2, "d2": 1, "d3": 0}  # what the metrics read is unchanged
    assert q1.provenance == {
        "d1": Provenance("ana", "2026-12-06T10:00:00Z"),
        "d3": Provenance("llm:qwen2.5:7b@3f9a1c", "2026-12-06T10:05:00.123456+01:00"),
    }
    assert (q1.source, q1.status, q2.source, q2.status) == ("human", "reviewed", "synthetic", "pending")
    assert q2.provenance == {"d2": Provenance("llm:gpt-4o-2024-08-06@e3b0c442", None)}
    assert q3.provenance == {} and (q3.source, q3.status) == ("human", "reviewed")

    save_golden(golden, tmp_path / "saved.jsonl")
    assert load_golden(tmp_path / "saved.jsonl", warn=False).questions == golden.questions
    lines = [json.loads(line) for line in (tmp_path / "saved.jsonl").read_text().splitlines()]
    assert lines[0]["relevant"] == {"d1": ANA, "d2": 1, "d3": JUDGE}  # as written, time zone and all
    assert lines[1]["source"] == "synthetic" and lines[1]["status"] == "pending"
    # defaults are left out: a judgment without provenance is a bare grade
    assert lines[2] == {"id": "q3", "question": "Who approves?", "relevant": {"d3": 1}}


def test_a_file_without_the_new_fields_saves_back_byte_for_byte(tmp_path):
    for bundled in (KB / "golden.jsonl", ROOT / "data" / "example" / "golden.jsonl"):
        golden = load_golden(bundled, warn=False)
        assert all((q.source, q.status, dict(q.provenance)) == ("human", "reviewed", {}) for q in golden)
        assert golden.reviewed is golden  # nothing is left out of scoring
        assert dumps_golden(golden) == bundled.read_text(encoding="utf-8")
        save_golden(golden, tmp_path / bundled.name)
        assert (tmp_path / bundled.name).read_bytes() == bundled.read_bytes()


def test_provenance_of_a_grade_that_is_gone_is_not_written(tmp_path):
    golden = load_golden(write_jsonl(tmp_path / "g.jsonl", WITH_PROVENANCE[:1]), warn=False)
    question = replace(golden.questions[0], relevant={"d2": 1})  # d1 and d3 no longer judged
    record = json.loads(dumps_golden(replace(golden, questions=(question,))))
    assert record["relevant"] == {"d2": 1}


def test_yaml_reads_judgment_objects_and_its_own_timestamps(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "- id: q1\n  question: How many vacation days?\n  source: synthetic\n"
        "  relevant: {d1: {grade: 2, by: ana, at: 2026-12-06T10:00:00Z}, d2: {grade: 1, at: '2026-12-06'}}\n",
        encoding="utf-8",
    )
    [question] = load_golden(path, warn=False)
    assert question.relevant == {"d1": 2, "d2": 1} and question.source == "synthetic"
    # YAML reads an unquoted time as a datetime: kept as ISO 8601
    assert question.provenance == {
        "d1": Provenance("ana", "2026-12-06T10:00:00+00:00"),
        "d2": Provenance(None, "2026-12-06"),
    }


@pytest.mark.parametrize(
    ("judgment", "message"),
    [
        ({"grade": 2, "by": ""}, r"g.jsonl:2: question 'q1': judgment of 'd1': 'by' is ''; expected a person's name or llm:<model>@<prompt hash>"),
        ({"grade": 2, "by": 7}, r"g.jsonl:2: question 'q1': judgment of 'd1': 'by' is 7; expected a person's name"),
        ({"grade": 2, "by": "llm:gpt-4o"}, r"g.jsonl:2: question 'q1': judgment of 'd1': 'by' is 'llm:gpt-4o'; a model's grade is by llm:<model>@<prompt hash>"),
        ({"grade": 2, "by": "llm:@3f9a"}, r"g.jsonl:2: .*'by' is 'llm:@3f9a'; a model's grade is by llm:<model>@<prompt hash>"),
        ({"grade": 2, "by": "llm:gpt-4o@"}, r"g.jsonl:2: .*'by' is 'llm:gpt-4o@'; a model's grade"),
        ({"grade": 2, "by": "llm:gpt 4o@3f9a"}, r"g.jsonl:2: .*'by' is 'llm:gpt 4o@3f9a'; a model's grade"),
        ({"grade": 2, "at": "yesterday"}, r"g.jsonl:2: question 'q1': judgment of 'd1': 'at' is 'yesterday'; expected an ISO 8601 time such as 2026-12-06T10:00:00Z"),
        ({"grade": 2, "at": "2026-13-06T10:00:00Z"}, r"g.jsonl:2: .*'at' is '2026-13-06T10:00:00Z'; expected an ISO 8601 time"),
        ({"grade": 2, "at": 1765015200}, r"g.jsonl:2: .*'at' is 1765015200; expected an ISO 8601 time"),
        ({"by": "ana"}, r"g.jsonl:2: question 'q1': judgment of 'd1' has no 'grade'"),
        ({"grade": "high", "by": "ana"}, r"g.jsonl:2: question 'q1': grade of 'd1' is 'high'; expected an integer"),
        ({"grade": 2, "who": "ana"}, r"g.jsonl:2: question 'q1': judgment of 'd1' has a key 'who' it does not know \(known: at, by, digest, grade\)"),
    ],
)  # fmt: skip
def test_bad_provenance_is_one_line_naming_file_line_and_value(tmp_path, judgment, message):
    records = [
        {"id": "q0", "question": "first", "relevant": {}},
        {"id": "q1", "question": "?", "relevant": {"d1": judgment}},
    ]
    with pytest.raises(InputError, match=message) as raised:
        load_golden(write_jsonl(tmp_path / "g.jsonl", records), warn=False)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"source": "robot"}, r"g.jsonl:1: question 'q1': 'source' is 'robot'; expected human or synthetic \(or leave the key out\)"),
        ({"status": "draft"}, r"g.jsonl:1: question 'q1': 'status' is 'draft'; expected reviewed or pending \(or leave the key out\)"),
        ({"status": None}, r"g.jsonl:1: question 'q1': 'status' is None; expected reviewed or pending"),
        ({"sources": "human"}, r"g.jsonl:1: question 'q1' has a key 'sources' it does not know \(did you mean 'source'\?"),
    ],
)  # fmt: skip
def test_bad_source_or_status_is_one_line_naming_file_line_and_value(tmp_path, field, message):
    with pytest.raises(InputError, match=message):
        load_golden(
            write_jsonl(tmp_path / "g.jsonl", [{"id": "q1", "question": "?", "relevant": {}, **field}]), warn=False
        )


def test_save_refuses_a_bad_provenance_and_leaves_the_file(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", WITH_PROVENANCE)
    golden = load_golden(path, warn=False)
    before = path.read_bytes()
    bad = replace(golden.questions[0], provenance={"d1": Provenance("llm:no-hash", None)})
    with pytest.raises(InputError, match=r"g.jsonl:1: .*'by' is 'llm:no-hash'"):
        save_golden(replace(golden, questions=(bad, *golden.questions[1:])), path)
    assert path.read_bytes() == before


def test_a_question_says_who_wrote_or_reviewed_it(tmp_path):
    path = tmp_path / "golden.jsonl"
    written = {"id": "g1", "question": "What is the hotel limit?", "source": "synthetic", "status": "pending",
               "by": "llm:qwen2.5:7b@3f2a9c1b", "relevant": {}}  # fmt: skip
    path.write_text(json.dumps(written) + "\n", encoding="utf-8")
    golden = load_golden(path, warn=False)
    assert golden.questions[0].origin == Provenance("llm:qwen2.5:7b@3f2a9c1b", None)
    save_golden(golden, path)
    assert json.loads(path.read_text(encoding="utf-8")) == written  # read back as written
    path.write_text(json.dumps(written | {"by": "llm:no-hash"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"golden.jsonl:1: question 'g1': 'by' is 'llm:no-hash'"):
        load_golden(path, warn=False)


def test_a_judgment_keeps_the_digest_of_the_document_it_graded(tmp_path):
    path = tmp_path / "golden.jsonl"
    judgment = {"grade": 2, "by": "ana", "at": "2026-12-06T10:00:00Z", "digest": "0123456789abcdef"}
    path.write_text(json.dumps({"id": "q1", "question": "Leave?", "relevant": {"d1": judgment}}) + "\n", "utf-8")
    golden = load_golden(path, warn=False)
    assert golden.questions[0].provenance["d1"] == Provenance("ana", "2026-12-06T10:00:00Z", "0123456789abcdef")
    assert json.loads(dumps_golden(golden))["relevant"]["d1"] == judgment
    path.write_text(json.dumps({"id": "q1", "question": "Leave?", "relevant": {"d1": judgment | {"digest": "x"}}}))
    with pytest.raises(InputError, match="'digest' is 'x'; expected the graded document's 16 hex digits"):
        load_golden(path, warn=False)
