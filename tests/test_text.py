"""One place for shortening long text (sweep/text.py)."""

from __future__ import annotations

from sweep.text import listed, shortened, single_line


def test_text_on_one_line_and_shortened():
    assert single_line("a\n  b\tc ") == "a b c"
    assert shortened("abc", 3) == "abc"
    assert shortened("abcdef", 3) == "abc… (6 characters)" and shortened("abcdef", 3, count=False) == "abc…"
    assert shortened("x" * 2000, 10).endswith("(2,000 characters)")


def test_a_list_names_the_first_items_and_says_there_are_more():
    assert listed(["a", "b"], 2) == "a, b" and listed(["a", "b", "c"], 2) == "a, b …" and listed([], 3) == ""
