"""`diff_golden`: two versions of the bundled golden set with planted changes, and the diff lists exactly those."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.paths import KB
from sweep.formats.golden import load_golden
from sweep.formats.golden_diff import diff_golden


def bundled() -> dict[str, dict]:
    """The bundled golden set's records by id, in file order."""
    records = [json.loads(line) for line in (KB / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r for r in records}


def write(path: Path, records: dict[str, dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records.values()), encoding="utf-8")
    return path


def planted_versions(folder: Path) -> tuple[Path, Path, dict]:
    """OLD (the bundled set, a few judgments and evidence written with their provenance or as
    spans) and NEW (OLD with planted changes), and the diff's JSON that those changes make."""
    old = bundled()
    old["a006"]["evidence"] = {"hr-employee-assistance-programme": [{"start": 100, "end": 145, "text": "Portugal"}]}
    old["a007"]["evidence"] = {"fac-health-safety-first-aid": [{"start": 10, "end": 60}]}
    old["a010"]["relevant"]["hr-performance-review-cycle"] = {"grade": 1, "by": "bob"}
    new = json.loads(json.dumps(old))
    removed = new.pop("a020")
    new["n001"] = {"id": "n001", "question": "Is there a bike-to-work scheme?", "type": "yesno", "relevant": {}}
    new["a002"]["question"] = "how long does a vpn session last?"
    new["a010"]["relevant"]["hr-performance-review-cycle"] = {"grade": 2, "by": "ana", "at": "2026-12-06T10:00:00Z"}
    new["a003"]["relevant"]["fac-office-locations-reference"] = {"grade": 0, "by": "ana"}
    del new["a011"]["relevant"]["fac-lisbon-office-move-announcement"]
    gone = new["a011"]["evidence"].pop("fac-lisbon-office-move-announcement")
    new["a004"]["evidence"]["hr-parental-leave-policy"].append("these are entirely voluntary")
    dropped = new["a012"].pop("evidence")
    new["a006"]["evidence"]["hr-employee-assistance-programme"] = [{"start": 300, "end": 345, "text": "Portugal"}]
    new["a007"]["evidence"]["fac-health-safety-first-aid"] = [{"start": 12, "end": 70}]
    new["a005"]["type"] = "procedural"
    new["a001"]["filters"] = {"status": "archived"}
    new["a002"]["filters"] = {}
    new["a008"]["source"] = "synthetic"
    new["a009"]["status"] = "pending"
    # not changes of the set: a grade given again by someone (the same grade), and the order of lines
    new["a013"]["relevant"] = {doc: {"grade": grade, "by": "ana"} for doc, grade in new["a013"]["relevant"].items()}
    new = {"a014": new.pop("a014"), **new}
    field = {"id": None, "field": None, "old": None, "new": None}
    grade = {
        "question": None,
        "document": None,
        "change": None,
        "old": None,
        "new": None,
        "old_by": None,
        "new_by": None,
    }
    expected = {
        "questions": {
            "added": [{"id": "n001", "question": "Is there a bike-to-work scheme?", "type": "yesno"}],
            "removed": [{"id": "a020", "question": removed["question"], "type": removed["type"]}],
            "reworded": [{"id": "a002", "old": old["a002"]["question"], "new": "how long does a vpn session last?"}],
        },
        "grades": [
            grade
            | {
                "question": "a003",
                "document": "fac-office-locations-reference",
                "change": "added",
                "new": 0,
                "new_by": "ana",
            },
            grade
            | {
                "question": "a010",
                "document": "hr-performance-review-cycle",
                "change": "changed",
                "old": 1,
                "new": 2,
                "old_by": "bob",
                "new_by": "ana",
            },
            grade
            | {"question": "a011", "document": "fac-lisbon-office-move-announcement", "change": "removed", "old": 1},
        ],
        "evidence": [
            {
                "question": "a004",
                "document": "hr-parental-leave-policy",
                "change": "added",
                "old": [],
                "new": ["these are entirely voluntary"],
            },
            {
                "question": "a006",
                "document": "hr-employee-assistance-programme",
                "change": "moved",
                "old": [{"start": 100, "end": 145, "text": "Portugal"}],
                "new": [{"start": 300, "end": 345, "text": "Portugal"}],
            },
            {
                "question": "a007",
                "document": "fac-health-safety-first-aid",
                "change": "moved",
                "old": [{"start": 10, "end": 60}],
                "new": [{"start": 12, "end": 70}],
            },
            {
                "question": "a011",
                "document": "fac-lisbon-office-move-announcement",
                "change": "removed",
                "old": gone,
                "new": [],
            },
            *(
                {"question": "a012", "document": doc, "change": "removed", "old": items, "new": []}
                for doc, items in dropped.items()
            ),
        ],
        "fields": [
            field | {"id": "a001", "field": "filters", "old": {"status": "current"}, "new": {"status": "archived"}},
            field | {"id": "a002", "field": "filters", "old": {"department": "IT"}, "new": {}},
            field | {"id": "a005", "field": "type", "old": "factoid", "new": "procedural"},
            field | {"id": "a008", "field": "source", "old": "human", "new": "synthetic"},
            field | {"id": "a009", "field": "status", "old": "reviewed", "new": "pending"},
        ],
    }
    return write(folder / "old.jsonl", old), write(folder / "new.jsonl", new), expected


def test_the_diff_lists_exactly_the_planted_changes(tmp_path):
    old, new, expected = planted_versions(tmp_path)
    found = diff_golden(load_golden(old, warn=False), load_golden(new, warn=False)).record()
    in_new_order = ["a014", *[q for q in bundled() if q not in ("a014", "a020")], "n001"]

    def ordered(changes: list[dict], key: str) -> list[dict]:
        return sorted(changes, key=lambda c: in_new_order.index(c[key]))

    assert found["questions"] == expected["questions"]
    assert found["grades"] == ordered(expected["grades"], "question")
    assert found["evidence"] == ordered(expected["evidence"], "question")
    assert found["fields"] == ordered(expected["fields"], "id")
    assert found["summary"] == {
        "old_questions": 152, "new_questions": 152, "questions_added": 1, "questions_removed": 1,
        "questions_reworded": 1, "grades_changed": 1, "grades_added": 1, "grades_removed": 1, "evidence_added": 1,
        "evidence_removed": 2, "evidence_moved": 2, "type_changed": 1, "filters_changed": 2, "source_changed": 1,
        "status_changed": 1, "tags_changed": 0, "metadata_changed": 0,
    }  # fmt: skip
    assert (found["old"], found["new"]) == (str(old), str(new))


def test_a_set_against_itself_or_its_lines_reordered_has_no_changes(tmp_path):
    records = bundled()
    shuffled = write(tmp_path / "shuffled.jsonl", dict(reversed(records.items())))
    diff = diff_golden(load_golden(KB / "golden.jsonl", warn=False), load_golden(shuffled, warn=False))
    assert diff.changes == 0 and diff.lines()[-1] == "no changes"
    assert not diff.grades and not diff.evidence and not diff.fields and not diff.added


def test_the_text_opens_with_the_counts_then_a_line_per_change(tmp_path):
    old, new, _ = planted_versions(tmp_path)
    lines = diff_golden(load_golden(old, warn=False), load_golden(new, warn=False)).lines()
    assert lines[0] == f"{old} (152 questions) -> {new} (152 questions)"
    assert lines[1] == (
        "questions: 1 added, 1 removed, 1 reworded; grades: 1 changed, 1 added, 1 removed; evidence: 1 added, "
        "2 removed, 2 moved; type 1, filters 2, source 1, status 1, tags 0, metadata 0 changed"
    )
    assert "+ question n001 (yesno): 'Is there a bike-to-work scheme?'" in lines
    assert "~ grade a010 / hr-performance-review-cycle: 1 (by bob) -> 2 (by ana)" in lines
    assert "~ grade a003 / fac-office-locations-reference: none -> 0 (by ana)" in lines
    assert "~ evidence moved a007 / fac-health-safety-first-aid: 10-60 -> 12-70" in lines
    assert "~ type of a005: 'factoid' -> 'procedural'" in lines
    assert len(lines) == 2 + 1 + 1 + 1 + 3 + 5 + 5
