"""The metric rows' formatting shared by simulate, bench and replay."""

from __future__ import annotations

from gpusched.cli.summary import fmt_value, top_cause


def test_top_cause_names_the_largest_share() -> None:
    assert top_cause({"queue-limit": 229.3, "nodes": 51.3, "borrowing": 1.1}) == "queue-limit 81%"
    assert top_cause({"nodes": 2.0}) == "nodes 100%"


def test_no_pending_hours_print_a_dash() -> None:
    assert top_cause({}) == "-"
    assert fmt_value({}, "cause") == "-"
    assert fmt_value(0, "cause") == "-"  # a summary without the key (older JSON)


def test_durations_and_plain_formats() -> None:
    assert fmt_value(90, "dur") == "90 s"
    assert fmt_value(3600, "dur") == "60.0 min"
    assert fmt_value(1234, "{:,}") == "1,234"
