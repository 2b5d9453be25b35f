"""Drift (`sweep.formats.drift`): the bundled set against its corpus with planted edits, each found; and a run's one warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.commands import sweep
from helpers.paths import KB
from sweep.formats.corpus import Document, load_corpus
from sweep.formats.drift import changed_documents, find_drift
from sweep.formats.golden import load_golden

EDITED = "it-vpn-setup"  # a sentence added: a002 graded it before (its digest), its evidence still found
DELETED = "fac-desk-booking"  # judged by a003 and a052
MOVED = "hr-parental-leave-policy"  # a paragraph inserted before a004's evidence, given as a span with its text
REWORDED = "fin-purchase-orders-howto"  # a005's excerpt no longer in it
UNCHANGED = "fin-travel-expenses-policy"  # a001 graded it, with its digest


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def digest_of(record: dict) -> str:
    return Document(record["id"], record["text"], record.get("title", "")).content_digest


def planted(folder: Path) -> tuple[Path, Path]:
    """The bundled golden set with digests (a001's, a002's judgments) and a span (a004's evidence)
    as of the bundled corpus, and that corpus with the planted edits."""
    documents = {d["id"]: d for d in lines(KB / "corpus.jsonl")}
    golden = {q["id"]: q for q in lines(KB / "golden.jsonl")}
    for qid, doc in (("a001", UNCHANGED), ("a002", EDITED)):
        golden[qid]["relevant"][doc] = {
            "grade": golden[qid]["relevant"][doc],
            "by": "ana",
            "digest": digest_of(documents[doc]),
        }
    [excerpt] = golden["a004"]["evidence"][MOVED]
    content = Document(MOVED, documents[MOVED]["text"], documents[MOVED]["title"]).content
    start = content.index(excerpt)
    golden["a004"]["evidence"][MOVED] = [{"start": start, "end": start + len(excerpt), "text": excerpt}]
    documents[EDITED]["text"] += "\n\nSessions on the guest network last 4 hours."
    del documents[DELETED]
    documents[MOVED]["text"] = "Updated in December: see the new FAQ.\n\n" + documents[MOVED]["text"]
    text = documents[REWORDED]["text"]
    documents[REWORDED]["text"] = text.replace(
        "£25,000 to £100,000: department head", "£25,000 to £150,000: department head"
    )
    assert documents[REWORDED]["text"] != text
    return write(folder / "golden.jsonl", list(golden.values())), write(
        folder / "corpus.jsonl", list(documents.values())
    )


def test_each_planted_change_is_found_and_nothing_else(tmp_path):
    golden_path, corpus_path = planted(tmp_path)
    corpus = load_corpus(corpus_path)
    drift = find_drift(load_golden(golden_path, warn=False), corpus)
    assert drift.missing == [
        {"question": "a003", "document": DELETED, "grade": 2},
        {"question": "a052", "document": DELETED, "grade": 1},
    ]
    assert [(e["question"], e["document"]) for e in drift.evidence] == [("a004", MOVED), ("a005", REWORDED)]
    moved, reworded = drift.evidence
    assert moved["evidence"]["text"].startswith("You can work up to 10") and "in the document, not" in moved["problem"]
    assert reworded["evidence"] == "£25,000 to £100,000: department head and CFO"
    assert "is not in the document" in reworded["problem"] and "question 'a005'" in reworded["problem"]
    [changed] = drift.changed
    assert changed["question"] == "a002" and changed["document"] == EDITED and changed["by"] == "ana"
    assert changed["now"] == corpus.by_id[EDITED].content_digest != changed["graded"]
    # 181 judgments: 2 of the deleted document, 2 with a digest, the other 177 cannot be checked
    assert (drift.checked, drift.not_checkable, drift.problems) == (2, 177, 5)
    summary = drift.record()["summary"]
    assert summary == {
        "problems": 5, "missing_documents": 2, "evidence_not_found": 2, "changed_documents": 1,
        "digests_checked": 2, "not_checkable": 177,
    }  # fmt: skip


def test_the_bundled_set_has_no_drift():
    drift = find_drift(load_golden(KB / "golden.jsonl", warn=False), load_corpus(KB / "corpus.jsonl"))
    assert drift.problems == 0 and drift.lines()[-1] == "no drift"


def test_a_set_that_loads_with_its_corpus_can_still_grade_edited_documents(tmp_path):
    """What a run sees: the loader stops at a missing document or evidence, not at an edited one."""
    golden_path, corpus_path = planted(tmp_path)
    corpus = load_corpus(corpus_path)
    golden = {q["id"]: q for q in lines(golden_path)}
    for qid in ("a003", "a052", "a004", "a005"):
        del golden[qid]
    loaded = load_golden(write(tmp_path / "loads.jsonl", list(golden.values())), corpus, warn=False)
    assert [(c["question"], c["document"]) for c in changed_documents(loaded, corpus)] == [("a002", EDITED)]


@pytest.mark.slow
def test_a_run_warns_once_with_the_count(tmp_path, small_kb_files):
    """A real run (BM25) on the small knowledge base, two of whose judgments graded other text."""
    golden = lines(small_kb_files / "golden.jsonl")
    first = {}  # a question for each of two documents: its first judged one
    for q in golden:
        if q["relevant"] and len(first) < 2:
            first.setdefault(next(iter(q["relevant"])), q)
    for doc, q in first.items():
        q["relevant"][doc] = {"grade": q["relevant"][doc], "digest": "0123456789abcdef"}
    data = tmp_path / "data"
    data.mkdir()
    write(data / "golden.jsonl", golden)
    (data / "corpus.jsonl").write_text((small_kb_files / "corpus.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    result = sweep(tmp_path, data, "model=bm25")
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in (result.stdout + result.stderr).splitlines() if "changed since they were graded" in line]
    assert len(said) == 1, said
    assert "2 judgments grade 2 documents whose text changed since they were graded" in said[0]
