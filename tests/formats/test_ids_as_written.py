"""Ids exactly as written (issue 49, item 5), compared in Unicode NFC (item 11).

YAML 1.1 reads a plain `002` as 2, `010` as 8 and `0x1A` as 26: a golden set's ids are kept as
the text they are. A file name in NFD (as macOS writes it) and the same id typed in NFC are one
id, and a message names both forms where only the form differs. Every case asserts the exact
message and the state afterwards."""

from __future__ import annotations

import json
import logging
import unicodedata
from pathlib import Path

import pytest

from sweep.errors import InputError
from sweep.evaluation import score
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.lexical import BM25Retriever
from sweep.retrieval.pipeline import Pipeline

NFC, NFD = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
SHOWN_NFC, SHOWN_NFD = r"'caf\xe9.md' (NFC)", r"'cafe\u0301.md' (NFD)"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def message_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as error:
        call(*args, **kwargs)
    return str(error.value)


# ---------------------------------------------------------------- YAML: ids as written


NUMERIC_IDS = """\
- id: 002
  question: which document is the octal one
  relevant: {010: 2, 0x1A: 1}
  evidence: {010: ten}
  filters: {year: 2024, current: yes}
- id: 003
  question: the other one
  relevant: [0x1A, 1_000, 2024-05-01, yes]
"""


def test_yaml_ids_that_look_like_numbers_keep_the_text_they_are(tmp_path):
    golden = load_golden(write(tmp_path / "golden.yaml", NUMERIC_IDS), warn=False)
    first, second = golden.questions
    assert [first.id, second.id] == ["002", "003"]  # YAML 1.1 would read 2 and 3
    assert first.relevant == {"010": 2, "0x1A": 1}  # not {8: 2, 26: 1}; grades stay integers
    assert dict(first.evidence) == {"010": ("ten",)}
    assert second.relevant == {"0x1A": 1, "1_000": 1, "2024-05-01": 1, "yes": 1}  # not 26, 1000, a date, True
    assert first.filters == {"year": 2024, "current": True}  # a filter's value keeps YAML's type


def test_a_run_on_numeric_looking_yaml_ids_scores_what_it_retrieved(tmp_path):
    golden = load_golden(write(tmp_path / "golden.yaml", NUMERIC_IDS.split("- id: 003")[0]), warn=False)
    run = Run.read(write(tmp_path / "run.trec", "002 Q0 010 1 2.0 t\n002 Q0 0x1A 2 1.0 t\n"))
    assert score(golden, run, ["ndcg_at_10"]).mean["ndcg_at_10"] == 1.0  # was 0.0: labels of 8 and 26


@pytest.mark.parametrize(
    ("relevant", "message"),
    [
        ("{010: 1, 010: 2}", "golden.yaml:3: malformed YAML (key '010' appears twice in one mapping)"),
        ("{010: 1, 0x1A: 1, 0x1A: 0}", "golden.yaml:3: malformed YAML (key '0x1A' appears twice in one mapping)"),
    ],
)
def test_a_repeated_id_written_alike_is_still_refused(tmp_path, relevant, message):
    path = write(tmp_path / "golden.yaml", f"- id: q1\n  question: x\n  relevant: {relevant}\n")
    assert message_of(load_golden, path, warn=False) == f"{tmp_path}/{message}"


def test_ids_written_differently_that_yaml_would_make_one_number_are_two(tmp_path):
    golden = load_golden(
        write(tmp_path / "golden.yaml", "- id: q1\n  question: x\n  relevant: {010: 1, 8: 2}\n"), warn=False
    )
    assert golden.questions[0].relevant == {"010": 1, "8": 2}  # YAML 1.1: both 8, one grade lost


def test_a_yaml_id_left_null_is_still_named_missing(tmp_path):
    path = write(tmp_path / "golden.yaml", "- id: ~\n  question: x\n  relevant: {}\n")
    assert message_of(load_golden, path, warn=False) == f"{path}:1: missing or invalid 'id': None"


# ---------------------------------------------------------------- Unicode NFC


def test_a_run_file_in_nfd_matches_a_golden_set_in_nfc_with_both_forms_named(tmp_path, caplog):
    golden = load_golden(
        write(tmp_path / "golden.jsonl", json.dumps({"id": "q1", "question": "x", "relevant": {NFC: 1}}) + "\n"),
        warn=False,
    )
    path = write(tmp_path / "run.trec", f"q1 Q0 {NFD} 1 2.0 t\nq1 Q0 tea.md 2 1.0 t\n")
    with caplog.at_level(logging.WARNING):
        run = Run.read(path)
    assert score(golden, run, ["ndcg_at_10"]).mean["ndcg_at_10"] == 1.0  # was 0.0
    assert run.rankings()["q1"][0][0] == NFC
    assert caplog.messages == [
        f"{path}: 1 id is not in Unicode NFC: {SHOWN_NFD} is read as {SHOWN_NFC}, the form ids are compared in"
    ]


def test_a_golden_set_in_nfd_is_read_in_nfc_with_one_warning(tmp_path, caplog):
    lines = [{"id": f"q{i}", "question": "x", "relevant": {NFD: 1, f"d{i}": 0}} for i in range(3)]
    path = write(tmp_path / "golden.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    with caplog.at_level(logging.WARNING):
        golden = load_golden(path, warn=False)
    assert all(list(q.relevant) == [NFC, q.id.replace("q", "d")] for q in golden)
    assert caplog.messages == [
        f"{path}:1: relevant document id {SHOWN_NFD} is read as {SHOWN_NFC}: ids are compared in Unicode NFC "
        "(the file's other ids in another form too, unnamed)"
    ]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "golden.jsonl",
            json.dumps({"id": NFC, "question": "x", "relevant": {}})
            + "\n"
            + json.dumps({"id": NFD, "question": "y", "relevant": {}})
            + "\n",
            f"golden.jsonl:2: duplicate question id: {SHOWN_NFC} and {SHOWN_NFD} are one id in Unicode NFC, the form ids are compared in (first on line 1)",
        ),
        (
            "golden.jsonl",
            json.dumps({"id": "q1", "question": "x", "relevant": {NFC: 1, NFD: 0}}) + "\n",
            f"golden.jsonl:1: question 'q1': 'relevant' holds {SHOWN_NFC} and {SHOWN_NFD} are one id in Unicode NFC, the form ids are compared in; say it once",
        ),
        (
            "golden.yaml",
            f"- id: q1\n  question: x\n  relevant: {{{NFC}: 1}}\n  evidence: {{{NFC}: a, {NFD}: b}}\n",
            f"golden.yaml:1: question 'q1': 'evidence' holds {SHOWN_NFC} and {SHOWN_NFD} are one id in Unicode NFC, the form ids are compared in; say it once",
        ),
        (
            "qrels.txt",
            f"q1 0 {NFC} 1\nq1 0 {NFD} 0\n",
            f"qrels.txt:2: document {NFC!r} is judged twice for query 'q1' (first on line 1) ({SHOWN_NFC} and {SHOWN_NFD} are one id in Unicode NFC, the form ids are compared in)",
        ),
    ],
)
def test_two_ids_that_differ_only_in_their_form_are_one_and_the_message_names_both(tmp_path, name, content, message):
    assert message_of(load_golden, write(tmp_path / name, content), warn=False) == f"{tmp_path}/{message}"


def test_a_folder_named_on_macos_meets_a_golden_set_typed_elsewhere(tmp_path, caplog):
    """A file name in NFD, its id typed in NFC in the golden set: they match; the run, its
    run.trec and every lookup use NFC, and one warning names both forms."""
    write(tmp_path / "docs" / NFD, "# Café\n\nThe café opens at eight in the morning.\n")
    write(tmp_path / "docs" / "tea.md", "# Tea\n\nTea is served all day.\n")
    line = {
        "id": "q1",
        "question": "when does the café open",
        "relevant": {NFC: 1},
        "evidence": {NFC: "opens at eight"},
    }
    golden_path = write(tmp_path / "golden.jsonl", json.dumps(line) + "\n")
    corpus = load_corpus(tmp_path / "docs")
    assert {doc.id for doc in corpus} == {NFD, "tea.md"}  # the folder reader names files as the disk does
    with caplog.at_level(logging.WARNING):
        golden = load_golden(
            golden_path, corpus, warn=False
        )  # was: labels document 'café.md', which is not in the corpus
    assert caplog.messages == [
        f"{golden_path}: the corpus {tmp_path / 'docs'} names 1 labelled document in another Unicode form than the "
        f"golden set: {SHOWN_NFD} and {SHOWN_NFC} are one id in Unicode NFC, the form ids are compared in; they "
        "match, and runs name them in NFC"
    ]
    assert corpus.by_id[NFC].id == NFD and golden.questions[0].evidence[NFC][0].start == 17
    retrieval = Pipeline(TokenChunker(0), BM25Retriever()).retrieve(corpus, golden)
    assert retrieval.results.rankings()["q1"][0][0] == NFC and retrieval.chunks[0].doc_id in (NFC, "tea.md")
    assert score(golden, retrieval.results, ["ndcg_at_10"]).mean["ndcg_at_10"] == 1.0
    retrieval.results.to_trec(tmp_path / "run.trec")
    assert NFC in (tmp_path / "run.trec").read_text() and NFD not in (tmp_path / "run.trec").read_text()


def test_a_folder_with_both_forms_of_one_name_is_refused_naming_both(tmp_path):
    write(tmp_path / "docs" / NFD, "one")
    write(tmp_path / "docs" / NFC, "two")
    corpus = load_corpus(tmp_path / "docs")
    message = f"{tmp_path / 'docs'}: documents {SHOWN_NFD} and {SHOWN_NFC} are one id in Unicode NFC, the form ids are compared in; rename one of them"
    golden_path = write(tmp_path / "golden.jsonl", json.dumps({"id": "q1", "question": "x", "relevant": {}}) + "\n")
    assert message_of(load_golden, golden_path, corpus, warn=False) == message
    golden = load_golden(golden_path, warn=False)
    assert message_of(Pipeline(TokenChunker(0), BM25Retriever()).retrieve, corpus, golden) == message
