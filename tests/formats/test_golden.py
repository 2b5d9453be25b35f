"""Golden sets: every format DESIGN.md names, validation errors with file and line, warnings."""

from __future__ import annotations

import csv
import json
import logging

import pytest

from helpers.data import corpus_of
from helpers.paths import CHUNKING_EVAL
from sweep.errors import InputError
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden

GOOD = [
    {"id": "q1", "question": "How many vacation days?", "type": "factoid", "relevant": {"d1": 2, "d2": 1, "d9": 0}},
    {
        "id": "q2",
        "question": "Hotel limit?",
        "type": "factoid",
        "relevant": ["d3"],
        "filters": {"department": "Finance"},
    },
    {"id": 3, "question": "Stolen laptop?", "type": "howto", "relevant": {"d4": 1}, "tags": ["it"]},
    {"id": "q4", "question": "Chess cup winner 1998?", "type": "unanswerable", "relevant": {}},
]


def write_jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_round_trip_and_stats(tmp_path):
    golden = load_golden(
        write_jsonl(tmp_path / "g.jsonl", GOOD), corpus=corpus_of("d1", "d2", "d3", "d4", "d9"), warn=False
    )
    assert [q.id for q in golden] == ["q1", "q2", "3", "q4"]
    assert golden.by_id["q2"].relevant == {"d3": 1}  # a list means grade 1 each
    assert golden.by_id["q2"].filters == {"department": "Finance"}
    assert golden.by_id["3"].tags == ("it",)
    assert not golden.by_id["q4"].answerable
    stats = golden.stats()
    assert stats["questions"] == 4 and stats["answerable"] == 3 and stats["unanswerable"] == 1
    assert stats["per_type"]["factoid"] == {"questions": 2, "answerable": 2, "unanswerable": 0}
    assert stats["relevant_per_question"] == {"mean": pytest.approx(4 / 3), "min": 1, "max": 2}
    assert stats["with_filters"] == 1 and stats["judgments"] == 5


def test_yaml_reads_the_same_questions(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "questions:\n"
        "  - id: q1\n    question: How many vacation days?\n    type: factoid\n    relevant: {d1: 2, d2: 1}\n"
        "  - id: q2\n    question: Who won the chess cup?\n    relevant: {}\n",
        encoding="utf-8",
    )
    golden = load_golden(path, warn=False)
    assert golden.by_id["q1"].relevant == {"d1": 2, "d2": 1} and golden.by_id["q2"].type == "untyped"


def test_trec_qrels_keep_negative_grades_as_not_relevant(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("1 0 a 2\n1 0 b -1\n2 0 c 0\n", encoding="utf-8")
    golden = load_golden(path, warn=False)
    assert golden.by_id["1"].relevant == {"a": 2, "b": -1}
    assert golden.by_id["1"].answerable and not golden.by_id["2"].answerable


def test_beir_folder_with_crlf_keeps_only_queries_in_the_split(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": "y"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "1", "text": "first"}\n{"_id": "2", "text": "second"}\n')
    (tmp_path / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\r\n1\td1\t1\r\n1\td2\t0\r\n")
    golden = load_golden(tmp_path, warn=False)
    assert [(q.id, q.question, q.relevant) for q in golden] == [("1", "first", {"d1": 1, "d2": 0})]
    (tmp_path / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\r\n1\td7\t1\r\n")
    with pytest.raises(InputError, match=r"test.tsv: question '1' labels document 'd7', which is not in the corpus"):
        load_golden(tmp_path, warn=False)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([GOOD[0], "{not json"], r"g.jsonl:2: malformed JSON"),
        ([GOOD[0], {"question": "x", "relevant": {}}], r"g.jsonl:2: missing or invalid 'id'"),
        ([GOOD[0], "", GOOD[0]], r"g.jsonl:3: duplicate question id 'q1' \(first on line 1\)"),
        (
            [{**GOOD[0], "relevant": {"d1": -1}}],
            r"g.jsonl:1: question 'q1': grade of 'd1' is -1; grades go from 0 to 100",
        ),
        ([{**GOOD[0], "relevant": {"d1": "high"}}], r"g.jsonl:1: question 'q1': grade of 'd1' is 'high'"),
        ([{"id": "q1", "question": "x"}], r"g.jsonl:1: question 'q1' has no 'relevant'"),
        ([{"id": "q1", "question": "", "relevant": {}}], r"g.jsonl:1: question 'q1' has no 'question' text"),
        (
            [GOOD[1], {**GOOD[0], "relevant": {"nope": 1}}],
            r"g.jsonl:2: question 'q1' labels document 'nope', which is not in the corpus",
        ),
        (["", "  "], r"g.jsonl: empty file"),
    ],
)
def test_validation_errors_name_file_line_and_problem(tmp_path, lines, message):
    with pytest.raises(InputError, match=message):
        load_golden(write_jsonl(tmp_path / "g.jsonl", lines), corpus=corpus_of("d1", "d2", "d3", "d9"), warn=False)


def test_yaml_errors_carry_the_line(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("- id: q1\n  question: ok\n  relevant: {}\n- id: q1\n  question: again\n  relevant: {}\n")
    with pytest.raises(InputError, match=r"g.yaml:4: duplicate question id 'q1'"):
        load_golden(path)
    path.write_text("- id: q1\n  question: [unclosed\n")
    with pytest.raises(InputError, match=r"g.yaml:\d+: malformed YAML"):
        load_golden(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("1 0 a 1\n1 0 b\n", r"qrels.txt:2: expected 4 fields, found 3"),
        ("1 0 a 1\n\n1 0 b x\n", r"qrels.txt:3: grade 'x' is not an integer"),
        ("1 0 a 1\n1 0 a 2\n", r"document 'a' is judged twice for query '1'"),
        ("just three fields\n", r"unknown golden-set format"),
        ("", r"qrels.txt: empty file"),
    ],
)
def test_bad_qrels(tmp_path, content, message):
    path = tmp_path / "qrels.txt"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_golden(path)


def test_size_and_balance_are_warnings_not_errors(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        load_golden(write_jsonl(tmp_path / "g.jsonl", GOOD))
    messages = [r.message for r in caplog.records]
    assert any("4 questions; a golden set works best with 50 to 200" in m for m in messages)
    assert any("25% of questions are unanswerable; 10% to 20% is recommended" in m for m in messages)
    caplog.clear()
    balanced = [{"id": f"q{i}", "question": "?", "relevant": {} if i < 10 else {"d1": 1}} for i in range(60)]
    with caplog.at_level(logging.WARNING):
        load_golden(write_jsonl(tmp_path / "ok.jsonl", balanced))
    assert not caplog.records


# ---------------------------------------------------------------- evidence

CONTENT = "Annual leave\n\nNew hires get 25  days\nof leave. Part-time staff get a share. Part-time staff get a share."


def evidence_golden(tmp_path, evidence, relevant=None):
    record = {"id": "q1", "question": "how much leave?", "relevant": relevant or {"d1": 2}, "evidence": evidence}
    return write_jsonl(tmp_path / "g.jsonl", [{"id": "q0", "question": "first line", "relevant": {}}, record])


def test_excerpts_resolve_to_spans_verbatim_then_whitespace_insensitively(tmp_path):
    corpus = corpus_of("d1", text=CONTENT)
    evidence = {"d1": ["Annual leave", "New hires get 25 days of leave.", {"start": 0, "end": 6, "text": "Annual"}]}
    golden = load_golden(evidence_golden(tmp_path, evidence), corpus=corpus, warn=False)
    spans = golden.by_id["q1"].evidence["d1"]
    # "Annual" lies inside "Annual leave": merged; the second excerpt matched across "  " and "\n"
    assert [(s.start, s.end) for s in spans] == [(0, 12), (14, 46)]
    assert CONTENT[14:46] == "New hires get 25  days\nof leave."
    assert golden.by_id["q1"].evidence_chars == 12 + 32
    assert golden.stats()["with_evidence"] == 1


@pytest.mark.parametrize(
    ("evidence", "relevant", "message"),
    [
        (
            {"d1": ["New hires get 30 days"]},
            None,
            r"g.jsonl:2: question 'q1': evidence for 'd1': excerpt 'New hires get 30 days' is not in the document",
        ),
        (
            {"d1": ["Part-time staff get a share."]},
            None,
            r"g.jsonl:2: .* occurs 2 times in the document \(at characters 47, 76\); lengthen it or give a span",
        ),
        (
            {"d1": [{"start": 0, "end": 500}]},
            None,
            r"g.jsonl:2: .* span 0-500 ends after the document \(104 characters\)",
        ),
        (
            {"d1": [{"start": 0, "end": 6, "text": "Yearly"}]},
            None,
            r"g.jsonl:2: .* span 0-6 is 'Annual' in the document, not 'Yearly'",
        ),
        ({"d1": [{"start": 9, "end": 3}]}, None, r"g.jsonl:2: .* span start 9 is not before end 3"),
        (
            {"d1": [{"start": 0, "stop": 3}]},
            None,
            r"g.jsonl:2: question 'q1': evidence for 'd1' has a key 'stop' it does not know \(known: end, start, text\)",
        ),
        ({"d1": [""]}, None, r"g.jsonl:2: question 'q1': evidence for 'd1' has an empty excerpt"),
        ({"d1": [7]}, None, r"g.jsonl:2: .* 7 is neither an excerpt \(string\) nor a span"),
        (
            {"d2": ["Annual"]},
            {"d1": 2, "d2": 0},
            r"g.jsonl:2: question 'q1' has evidence in 'd2', which its 'relevant' does not mark relevant",
        ),
        (["Annual"], None, r"g.jsonl:2: question 'q1' has 'evidence' that is not a mapping"),
    ],
)
def test_bad_evidence_names_file_line_and_excerpt(tmp_path, evidence, relevant, message):
    corpus = corpus_of("d1", "d2", text=CONTENT)
    with pytest.raises(InputError, match=message):
        load_golden(evidence_golden(tmp_path, evidence, relevant), corpus=corpus, warn=False)


def test_chunking_benchmark_folder(tmp_path):
    (tmp_path / "corpora").mkdir()
    text = "First line.\nThe answer is here.\n"
    (tmp_path / "corpora" / "notes.md").write_text(text, encoding="utf-8")
    references = json.dumps([{"content": "The answer is here.", "start_index": 12, "end_index": 31}])
    multiline = json.dumps([{"content": "First", "start_index": 0, "end_index": 5}])
    rows = [
        ["question", "references", "corpus_id"],
        ["Where?", references, "notes"],
        ["Two\nlines?", multiline, "notes"],
    ]
    with (tmp_path / "questions_df.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    corpus = corpus_of("notes", text=text)
    golden = load_golden(tmp_path, corpus=corpus, warn=False)
    assert [q.id for q in golden] == ["0", "1"]
    assert golden.by_id["0"].type == "notes" and golden.by_id["0"].relevant == {"notes": 1}
    assert [(s.start, s.end) for s in golden.by_id["0"].evidence["notes"]] == [(12, 31)]
    bad = json.dumps([{"content": "The answer", "start_index": 0, "end_index": 10}])
    rows.append(["Bad?", bad, "notes"])
    with (tmp_path / "questions_df.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    # the row after a two-line question starts on line 5
    with pytest.raises(
        InputError,
        match=r"questions_df.csv:5: question '2': evidence for 'notes': span 0-10 is 'First line' in the document, not 'The answer'",
    ):
        load_golden(tmp_path, corpus=corpus, warn=False)


def test_chromas_benchmark_loads_with_every_reference_checked():
    corpus = load_corpus(CHUNKING_EVAL / "corpora", ids="stem")
    golden = load_golden(CHUNKING_EVAL, corpus, warn=False)
    assert len(golden) == 472 and golden.stats()["with_evidence"] == 472
    assert [q.id for q in golden][:3] == ["0", "1", "2"]
    per_type = {t: c["questions"] for t, c in golden.stats()["per_type"].items()}
    assert per_type == {"wikitexts": 144, "pubmed": 99, "finance": 97, "state_of_the_union": 76, "chatlogs": 56}
    # every reference's text was checked against the file's decoded text; merged spans never exceed them
    assert sum(len(spans) for q in golden for spans in q.evidence.values()) <= 790
