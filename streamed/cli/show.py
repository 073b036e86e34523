"""``streamed show BUNDLE [--svg DIR] [--json]``: a bundle's pictures — the chip, the memory, the roofline
(``streamed.spatial.pictures``) — in words on stdout, as SVG files in ``DIR``, or as JSON (the chip's SVG and the
Vega-Lite specifications of the memory and the roofline, for a notebook).

``--svg DIR`` writes ``chip-<program>.svg`` for each program (``embed``, each kind's, ``head``), ``memory.svg`` and
``roofline.svg``, each file whole or not at all (written beside it, then renamed), and names them. The memory and the
roofline are drawn by vl-convert (Vega-Lite to SVG, offline; ``pip install 'streamed-lgm[pictures]'``), imported only
here, so no other command pays for it. Exit status 0; 2 for a bundle that cannot be read (one line naming it and
what is wrong), an output path that cannot be written, or vl-convert missing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .common import UserError

#: The Vega-Lite version vl-convert draws with: the one the editor's webview bundles (vega-lite 6.4).
VL_VERSION = "6.4"


def _read(bundle: str):
    from ..spatial.bundle import BundleError, read_bundle

    p = Path(bundle)
    if not p.exists():
        raise UserError(f"{bundle}: no such bundle")
    if p.is_file() and p.name == "manifest.json":
        p = p.parent
    if not p.is_dir():
        raise UserError(f"{bundle}: not a bundle folder (a bundle is the folder `streamed lower -o` writes)")
    try:
        return read_bundle(p)
    except BundleError as e:
        raise UserError(str(e)) from None


def _file_name(program: str) -> str:
    return "chip-" + (re.sub(r"[^A-Za-z0-9]+", "-", program).strip("-").lower() or "program") + ".svg"


def _write(out: Path, files: dict[str, str]) -> None:
    """Each file whole or not at all: written beside its name, then renamed over it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out}: cannot be written ({e.strerror})") from None
    for name, text in files.items():
        tmp = out / f".{name}.{os.getpid()}.tmp"
        try:
            tmp.write_text(text, "utf-8")
            os.replace(tmp, out / name)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise UserError(f"{out / name}: cannot be written ({e.strerror})") from None


def cmd_show(args) -> int:
    from ..spatial.pictures import describe, pictures

    if args.svg is not None and not args.svg.strip():
        # ★ ``Path("")`` is the current folder: ``--svg ''`` wrote five pictures where the user stood.
        raise UserError(f"--svg {args.svg!r}: names no folder; give the folder to write the pictures into "
                        f"(--svg . for this one)")
    model = _read(args.bundle)
    drawn = pictures(model)
    if args.json:
        import json  # only for --json: not imported by every command's start

        print(json.dumps(drawn, indent=1))
        return 0
    if args.svg is None:
        print(f"{args.bundle}: {model.deployment.mode} bundle of {len(model.layers)} layers for "
              f"{model.target.name.upper()}")
        print("\n".join(describe(model)))
        return 0
    try:
        import vl_convert
    except ImportError:
        raise UserError("drawing the memory and the roofline as SVG needs vl-convert: pip install "
                        "'streamed-lgm[pictures]' (or vl-convert-python)") from None
    files = {_file_name(c["program"]): c["svg"] + "\n" for c in drawn["chip"]}
    for name in ("memory", "roofline"):
        files[f"{name}.svg"] = vl_convert.vegalite_to_svg(drawn[name]["spec"], vl_version=VL_VERSION)
    _write(Path(args.svg), files)
    for name in files:
        print(Path(args.svg) / name)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="a bundle's pictures: the chip, the memory and the roofline (words, SVG or JSON)")
    p.add_argument("bundle", metavar="BUNDLE", help="a bundle folder (or its manifest.json)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--svg", metavar="DIR", help="write chip-*.svg, memory.svg and roofline.svg into DIR")
    how.add_argument("--json", action="store_true",
                     help="print the pictures as JSON (SVG and Vega-Lite specifications)")
    p.set_defaults(run=cmd_show)
