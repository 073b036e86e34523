"""``benchmarks/bench_oracle.py --agreement-only`` rewrites its kernel path's table in docs/oracle.md and nothing else:
the prose around the tables (what is left and why, the disagreements the oracle found, the config route) is written
by hand, issue by issue, and a run must not put an older text in its place."""

from __future__ import annotations

import re
import sys

import llamacpp
from repo import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_oracle  # noqa: E402

DOC = ROOT / "docs" / "oracle.md"
SECTION = re.compile(r"<!-- path (\S+) -->.*?<!-- /path -->", re.S)


def outside_sections(text: str) -> list[str]:
    """The text between and around the ``<!-- path NAME -->`` sections, in order."""
    return SECTION.split(text)[::2]


def test_measuring_the_agreement_rewrites_the_host_path_s_table_and_keeps_every_other_line(tmp_path, monkeypatch):
    doc = tmp_path / "oracle.md"
    before = DOC.read_text("utf-8") + "\n## A paragraph another issue added\n\nKept as written.\n"
    doc.write_text(before, "utf-8")
    monkeypatch.setattr(bench_oracle, "ORACLE_DOC", doc)
    monkeypatch.setattr(bench_oracle, "agreement", lambda: [("llama", "Q8_0", 0.2, 0.2, 0.0, 0.0),
                                                            ("llama", "F32", 1e-6, 2e-6, 0.0, None),
                                                            ("cohere2", "F32", 1e-6, 1e-6, 0.0, None)])
    bench_oracle.write_agreement("2026-12-02", "a test host", "0.5")
    after = doc.read_text("utf-8")
    isa = llamacpp.built_path().isa
    assert outside_sections(after) == outside_sections(before)
    sections = {m.group(1): m.group(0) for m in SECTION.finditer(after)}
    kept = {m.group(1): m.group(0) for m in SECTION.finditer(before)}
    assert {k: v for k, v in sections.items() if k != isa} == {k: v for k, v in kept.items() if k != isa}
    assert "| llama | Q8_0 | 0.2 | 0.2 | 0 | 0 |" in sections[isa] and "on a test host" in sections[isa]


def test_a_path_measured_for_the_first_time_joins_the_tables_in_the_order_of_their_names():
    text = "prose\n\n<!-- path avx2 -->\nA\n<!-- /path -->\n\n<!-- path neon -->\nN\n<!-- /path -->\n\nmore prose\n"
    got = bench_oracle.with_path_section(text, "avx512", "<!-- path avx512 -->\nB\n<!-- /path -->")
    assert [m.group(1) for m in SECTION.finditer(got)] == ["avx2", "avx512", "neon"]
    assert outside_sections(got)[0] == "prose\n\n" and outside_sections(got)[-1] == "\n\nmore prose\n"
    last = bench_oracle.with_path_section(text, "sve", "<!-- path sve -->\nS\n<!-- /path -->")
    assert [m.group(1) for m in SECTION.finditer(last)] == ["avx2", "neon", "sve"]
    assert last.endswith("<!-- /path -->\n\nmore prose\n")
