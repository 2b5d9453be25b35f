"""Objects whose keys are unique: a JSON object or YAML mapping that repeats a key is an error, never last-one-wins.

`{"relevant": {"d1": 2, "d1": 0}}` would otherwise silently keep the last grade, as Python's
`json` and PyYAML do; TREC qrels that judge a document twice are an error too.
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
