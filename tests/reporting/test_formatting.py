"""One place for writing numbers (reporting/formatting.py)."""

from __future__ import annotations

import math

from sweep.reporting.formatting import cost, cost_in_column, is_missing, number, share, significant, size


def test_numbers_and_what_is_missing():
    assert number(0.12345) == "0.1235" and number(2, 0) == "2" and number(-0.1, signed=True) == "-0.1000"
    assert number(0.0, signed=True) == "+0.0000"
    assert number(float("nan")) == "-" and number(None, missing="–") == "–" and number("x") == "-"
    assert all(is_missing(v) for v in (None, math.nan, math.inf, "text")) and not is_missing(0)
    assert significant(1234.5) == "1.23e+03" and significant(0.01234) == "0.0123"


def test_costs_by_their_declared_unit():
    assert size(800) == "800 B" and size(5_400_000) == "5.1 MiB" and size(math.nan) == "-"
    assert cost("index/bytes", 1024) == "1.0 KiB" and cost("latency/search_ms_p50", 12.5) == "12.50"
    assert cost_in_column("index/bytes", 2**21) == "2" and cost_in_column("time/embed_s", 1.2345) == "1.23"
    assert cost_in_column("latency/search_ms_p95", math.nan) == "-"


def test_a_share_is_a_whole_percentage_in_the_console_and_the_report_alike():
    assert share(0.5339) == "53%" and share(0.824) == "82%" and share(1.0) == "100%" and share(0.0) == "0%"
    assert share(0.004) == "<1%" and share(0.0099) == "<1%" and share(0.01) == "1%" and share(0.995) == "100%"
    assert share(math.nan) == "-" and share(None, missing="") == ""
    for value, shown in ((0.5339, "53%"), (0.004, "<1%"), (math.nan, "-")):
        assert cost("corpus/truncated_share", value) == cost_in_column("corpus/truncated_share", value) == shown
