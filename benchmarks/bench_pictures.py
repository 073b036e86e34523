"""What the pictures cost a user: their dependency, the commands that draw, the sweep behind the roofline, and that no
other command pays for any of it.

    .venv/bin/python benchmarks/bench_pictures.py [--runs N] [--write]

Whole processes, CPU time (wall time beside it), medians of N runs alternating in one run:

- vl-convert-python (the ``pictures`` extra): its size installed, and a fresh process importing it and drawing a
  first specification (its JavaScript engine starts on the first draw, not on import);
- ``streamed --help`` (every subcommand's parser loaded — ``show`` among them — but no drawing), beside the floor: a
  process that starts Python and imports nothing of ours;
- ``streamed show BUNDLE`` (the pictures in words) and ``streamed show BUNDLE --svg DIR`` (every SVG written) of the
  Qwen3.8 decode bundle;
- ``streamed lower`` of each shipped real-shaped example with and without ``--no-sweep``: what the roofline's
  neighbours (one lowering at each other batch and context, ``spatial/sweep.py``) add to a lowering;
- the extension's page script (``dist/webview.js``: vega-embed with Vega, Vega-Lite and the expression interpreter),
  as built for the ``.vsix``, when it has been built.

``--write`` records the section in docs/performance.md under ``## Pictures``.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import load_average, load_line, machine, median, publish, run_process  # noqa: E402

EXAMPLES = ("qwen3.8", "llama-3.1-8b", "gemma-3-27b", "qwen3-next-80b-a3b")
DRAW = ("import vl_convert; vl_convert.vegalite_to_svg({'data': {'values': [{'a': 1}]}, 'mark': 'bar', "
        "'encoding': {'x': {'field': 'a', 'type': 'quantitative'}}}, vl_version='6.4')")


def installed_bytes(package: str) -> int:
    import importlib.util

    spec = importlib.util.find_spec(package)
    folder = Path(spec.origin).parent
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure(runs: int, out: Path) -> dict:
    py = sys.executable
    bundle = out / "qwen.bundle"
    code = run_process([py, "-m", "streamed", "lower", str(ROOT / "examples" / "qwen3.8.lgm"), "--mode", "decode",
                        "--ctx", "4096", "-o", str(bundle)])[2]
    if code != 0:
        raise SystemExit("streamed lower examples/qwen3.8.lgm failed")
    commands = {
        "floor": [py, "-c", "pass"],
        "import vl_convert": [py, "-c", "import vl_convert"],
        "import vl_convert, draw one": [py, "-c", DRAW],
        "streamed --help": [py, "-m", "streamed", "--help"],
        "streamed show BUNDLE": [py, "-m", "streamed", "show", str(bundle)],
        "streamed show BUNDLE --svg DIR": [py, "-m", "streamed", "show", str(bundle), "--svg", str(out / "svg")],
    }
    for name in EXAMPLES:
        doc = str(ROOT / "examples" / f"{name}.lgm")
        base = [py, "-m", "streamed", "lower", doc, "--mode", "decode", "--ctx", "4096", "-o", str(out / f"{name}.b")]
        commands[f"lower {name}"] = base
        commands[f"lower {name} --no-sweep"] = [*base, "--no-sweep"]
    samples: dict[str, list] = {}
    for _ in range(runs):
        for what, cmd in commands.items():
            cpu, wall, status = run_process(cmd)
            if status != 0:
                raise SystemExit(f"{' '.join(cmd)} exited {status}")
            samples.setdefault(what, []).append((cpu, wall))
    webview = ROOT / "vscode-extension" / "dist" / "webview.js"
    return {
        "times": {k: (median(c for c, _ in v), median(w for _, w in v)) for k, v in samples.items()},
        "vl_convert": installed_bytes("vl_convert"),
        "webview": (webview.stat().st_size, len(gzip.compress(webview.read_bytes()))) if webview.exists() else None,
    }


def report(m: dict, runs: int, load: tuple[str, str]) -> str:
    t = m["times"]
    ms = lambda what: f"{t[what][0] * 1e3:.0f} (wall {t[what][1] * 1e3:.0f})"  # noqa: E731
    floor = t["floor"][0]
    out = [
        "## Pictures",
        "",
        f"`benchmarks/bench_pictures.py`, {datetime.date.today().isoformat()}, {machine()}; {load_line(*load)} "
        f"(the machine is shared). Whole processes, CPU ms (wall ms beside it), medians of {runs} runs alternating "
        f"in one run.",
        "",
        f"**The dependency**: vl-convert-python (the `pictures` extra, for `streamed show --svg`) is "
        f"{m['vl_convert'] / 1e6:.0f} MB installed. A process that imports it costs {ms('import vl_convert')} against "
        f"{ms('floor')} for Python alone; its JavaScript engine starts with the first drawing: importing it and "
        f"drawing one bar chart, {ms('import vl_convert, draw one')}. Only `streamed show --svg` imports it.",
        "",
        "| command | CPU ms (wall) | past the floor |",
        "|---|---:|---:|",
    ]
    for what in ("floor", "streamed --help", "streamed show BUNDLE", "streamed show BUNDLE --svg DIR"):
        out.append(f"| `{what}` | {ms(what)} | {(t[what][0] - floor) * 1e3:+.0f} |")
    out += [
        "",
        "`streamed --help` loads every subcommand's parser, `show`'s among them, and none of what drawing needs "
        "(`tests/cli/test_show.py` holds that no other command imports the pictures or vl-convert). The bundle: "
        "`streamed lower examples/qwen3.8.lgm --mode decode --ctx 4096` (64 layers, 2 kinds; six SVG files).",
        "",
        "**The sweep** behind the roofline — the document lowered again at each other batch size (1 to 64) and "
        "context (an eighth to eight times) — is what `streamed lower` adds unless `--no-sweep` (decode, ctx 4096):",
        "",
        "| example | `streamed lower` | `--no-sweep` | the sweep |",
        "|---|---:|---:|---:|",
    ]
    for name in EXAMPLES:
        a, b = t[f"lower {name}"], t[f"lower {name} --no-sweep"]
        out.append(f"| {name} | {ms(f'lower {name}')} | {ms(f'lower {name} --no-sweep')} | "
                   f"{(a[0] - b[0]) * 1e3:+.0f} |")
    if m["webview"]:
        size, packed = m["webview"]
        out += ["", f"**The editor**: the manifest view's page script (`dist/webview.js`, vega-embed with Vega, "
                    f"Vega-Lite and the CSP-safe expression interpreter, minified) is {size / 1e3:.0f} KB, "
                    f"{packed / 1e3:.0f} KB compressed; it loads only in the manifest view."]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    start = load_average()
    out = Path(tempfile.mkdtemp(prefix="bench-pictures-"))
    try:
        m = measure(args.runs, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    publish(report(m, args.runs, (start, load_average())), args.write)


if __name__ == "__main__":
    main()
