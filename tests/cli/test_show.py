"""`streamed show BUNDLE` as a user runs it: the pictures in words, as SVG files drawn from the bundle alone, as JSON;
a bundle that cannot be read is one line and exit 2; and no other command loads what drawing needs."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from streamed.cli import main

from repo import EXAMPLES

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("show") / "qwen.bundle"
    assert main(["lower", str(EXAMPLES / "qwen3.8.lgm"), "--mode", "decode", "--ctx", "4096", "-o", str(out)]) == 0
    return out


def _texts(path) -> str:
    return " ".join(t.text or "" for t in ET.parse(path).getroot().iter() if t.tag in (f"{SVG}text", f"{SVG}tspan"))


def test_show_svg_writes_the_chip_of_each_program_the_memory_and_the_roofline(bundle, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "pictures"
    assert main(["show", str(bundle), "--svg", str(out)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == ["chip-attention.svg", "chip-embed.svg", "chip-gated-deltanet.svg", "chip-head.svg",
                       "memory.svg", "roofline.svg"]
    assert capsys.readouterr().out.split() == [str(out / name) for name in
                                              ("chip-embed.svg", "chip-gated-deltanet.svg", "chip-attention.svg",
                                               "chip-head.svg", "memory.svg", "roofline.svg")]
    memory = _texts(out / "memory.svg")
    # SRAM: the states it holds (347 MB) and the working set reserved for the largest program's own buffers, what its
    # ops hold while they run included (3.62 MB), whose rotation tables live in HBM (a decode step stages a row):
    # 2 tables × 4096 positions × 32 columns × 2 bytes = 524 KB.
    manifest = json.loads((bundle / "manifest.json").read_text())
    residency = manifest["residency"]
    assert residency["states"]["sram"] + residency["reserved_sram_bytes"] == 350_505_824
    for label in ("SRAM · 351 MB of 432 MB", "HBM · 29.8 GB of 64 GB", "DDR · 0 B of 2.05 TB", "states: attention",
                  "working set: activations and inputs", "weights: gated deltanet"):
        assert label in memory, label
    roofline = _texts(out / "roofline.svg")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert f"{manifest['estimate']['tokens_per_second']:.3g} tokens/s · memory-bound" in roofline
    assert "tokens/s by batch" in roofline and "tokens/s by ctx" in roofline
    chip = ET.parse(out / "chip-attention.svg").getroot()
    assert chip.get("aria-label").startswith("attention — 23 ops")
    assert any("Let a3 be attention of qr3" in (t.text or "") for t in chip.iter(f"{SVG}title"))


def test_show_in_words_says_each_picture(bundle, capsys):
    capsys.readouterr()
    assert main(["show", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "chip      attention — 23 ops in 23 phases" in out
    assert "memory    SRAM 351 MB of 432 MB: working set: activations and inputs 3.62 MB" in out  # states 347 MB
    assert "tables: rotations 524 KB" in out
    assert "nothing spills" in out
    assert "tokens/s by batch: 1: 66.09" in out


def test_show_json_is_the_svg_and_the_vega_lite_specifications(bundle, capsys):
    capsys.readouterr()
    assert main(["show", str(bundle / "manifest.json"), "--json"]) == 0
    drawn = json.loads(capsys.readouterr().out)
    assert [c["program"] for c in drawn["chip"]] == ["embed", "gated deltanet", "attention", "head"]
    assert drawn["memory"]["spec"]["$schema"].endswith("vega-lite/v6.json")
    assert drawn["roofline"]["point"]["tokens_per_second"] == json.loads((bundle / "manifest.json").read_text())[
        "estimate"]["tokens_per_second"]


@pytest.mark.parametrize("make,says", [
    (lambda tmp: tmp / "missing.bundle", "missing.bundle: no such bundle"),
    (lambda tmp: (tmp / "notes.txt").write_text("x") and tmp / "notes.txt", "not a bundle folder"),
    (lambda tmp: (tmp / "empty.bundle").mkdir() or tmp / "empty.bundle", "manifest.json: no such file"),
    (lambda tmp: ((tmp / "bad.bundle").mkdir(), (tmp / "bad.bundle" / "manifest.json").write_text("{"))
     and tmp / "bad.bundle", "manifest.json"),
])
def test_a_bundle_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys, make, says):
    path = make(tmp_path)
    assert main(["show", str(path), "--svg", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamed: ") and says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_svg_folder_that_cannot_be_written_is_one_line_and_exit_2(bundle, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["show", str(bundle), "--svg", str(blocker / "pictures")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamed: ") and "cannot be written" in err and err.count("\n") == 1


def test_no_other_command_loads_the_pictures_or_vl_convert():
    probe = ("import sys; from streamed.cli import build_parser; build_parser(); "
             "print(sorted(m for m in sys.modules if m.startswith(('vl_convert', 'streamed.spatial'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "vl_convert" not in loaded and "pictures" not in loaded and "floorplan" not in loaded, loaded


def test_a_bundle_whose_programs_record_no_placement_is_drawn_saying_so(bundle, tmp_path, capsys):
    import shutil

    old = tmp_path / "old.bundle"
    shutil.copytree(bundle, old)
    for f in (old / "programs").iterdir():
        data = json.loads(f.read_text())
        del data["placement"]
        f.write_text(json.dumps(data))
    manifest = json.loads((old / "manifest.json").read_text())  # as written before programs recorded their digests
    del manifest["digests"], manifest["statements"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["show", str(old)]) == 0
    out = capsys.readouterr().out
    assert "chip      attention — 0 ops in 0 phases: 0 of 2,080 PCUs" in out
    assert "this program records no placement (lower the document again to see it)" in out


def test_a_program_whose_placement_names_an_op_it_does_not_have_is_one_line_and_exit_2(bundle, tmp_path, capsys):
    import shutil

    bad = tmp_path / "bad.bundle"
    shutil.copytree(bundle, bad)
    f = bad / "programs" / "head.json"
    data = json.loads(f.read_text())
    data["placement"]["pcus"][0][1] = 99
    f.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamed: ") and "head.json" in err and "op 99" in err and err.count("\n") == 1
