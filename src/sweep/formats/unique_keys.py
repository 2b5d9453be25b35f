"""Objects whose keys are unique: a JSON object or YAML mapping that repeats a key is an error, never last-one-wins.

`{"relevant": {"d1": 2, "d1": 0}}` would otherwise silently keep the last grade, as Python's
`json` and PyYAML do; TREC qrels that judge a document twice are an error too.

Ids in YAML are kept as written (`ids_as_written`): YAML 1.1, which PyYAML reads, takes a plain
`002` for the integer 2, `010` for 8 (octal), `0x1A` for 26, `1_000` for 1000, `yes` for true and
`2024-05-01` for a date, so `relevant: {010: 2}` would label a document `8`. Where an id belongs
(a question's `id`, the document ids `relevant` and `evidence` name), a plain scalar is read as
the text it is; everywhere else (grades, filters' values) YAML's types stand.
"""

from __future__ import annotations

from typing import Any

import yaml


class RepeatedKey(ValueError):
    """A JSON object that holds the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears twice in one object")


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s `object_pairs_hook`: the object as a dict, or `RepeatedKey`."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RepeatedKey(key)
        seen[key] = value
    return seen


_STRING = "tag:yaml.org,2002:str"
_TYPED = {
    f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "timestamp")
}  # what YAML 1.1 resolves a plain scalar to


def ids_as_written(question: yaml.Node) -> None:
    """Before a question's node is constructed: its id and the document ids its `relevant` and
    `evidence` name, where YAML would read them as a number, a boolean or a date, made text, as
    written (`null` stays null: a missing id is named as one)."""
    if not isinstance(question, yaml.MappingNode):
        return
    for key, value in question.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name == "id":
            _as_text(value)
        elif name in ("relevant", "evidence") and isinstance(value, yaml.MappingNode):
            for doc, _ in value.value:
                _as_text(doc)
        elif name == "relevant" and isinstance(value, yaml.SequenceNode):
            for doc in value.value:
                _as_text(doc)


def _as_text(node: yaml.Node) -> None:
    if isinstance(node, yaml.ScalarNode) and node.style is None and node.tag in _TYPED:
        node.tag = _STRING  # its value is the text as written


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with a repeated key in a mapping raised as a `ConstructorError` at
    the key's line (keys a `<<` merge brings in may still be overridden, as YAML says)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)
