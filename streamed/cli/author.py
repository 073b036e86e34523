"""``streamed author SRC [-o OUT.lgm]``: write the model program of a Hugging Face ``config.json`` or a GGUF.

A thin adapter: it reads the source, calls the importer and the author, and writes the document atomically (a
temporary file beside the output, renamed over it), so a failure leaves nothing written. Bad input — a config that is
not JSON, a truncated GGUF, an unsupported architecture — is one message and exit status 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ..lang.files import FileProblem, display, problem, read_file, size_of
from ..lang.limits import MAX_CONFIG_BYTES
from .common import UserError, refuse_unwritable, write_atomically

GGUF_MAGIC = b"GGUF"


def model_name(path: Path, config: dict | None = None) -> str:
    """The document's title: the config's ``_name_or_path`` when it has one, else the file's name (its folder's,
    for a file called ``config.json``)."""
    if config and isinstance(config.get("_name_or_path"), str) and config["_name_or_path"]:
        return display(config["_name_or_path"].rstrip("/").split("/")[-1])
    if path.name == "config.json" and path.parent.name not in ("", "."):
        return display(path.parent.name)
    return display(path.stem)  # a file named bad\xff.json: the title bad\xff, not an exception


def spec_of(source: str, name: str | None = None):
    """The ``ModelSpec`` of a ``config.json`` or a ``.gguf``, told apart by the GGUF magic, not the extension."""
    from ..model.hf import read_config
    from ..model.spec import SpecError

    p = Path(source)
    if not p.exists():
        raise UserError(f"{source}: no such file")
    if p.is_dir():
        # A model's folder as it is downloaded: its config.json.
        if not (p / "config.json").is_file():
            raise UserError(f"{source}: a folder without a config.json; give a config.json or a .gguf")
        p = p / "config.json"
        source = str(p)
    try:
        size_of(p, "a config.json or a GGUF file")  # a FIFO or a device is refused before it is opened
        with p.open("rb") as f:
            magic = f.read(4)
    except FileProblem as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(str(problem(source, e))) from None
    if magic == GGUF_MAGIC or p.suffix.lower() == ".gguf":
        from ..model.gguf import CheckpointError, read_gguf  # numpy and gguf only for a checkpoint

        try:
            return read_gguf(source, name=name).spec
        except CheckpointError as e:
            raise UserError(str(e)) from None
    from ..lang.jsontext import JsonError, loads  # here, not at the top: ``streamed kinds`` imports this module

    try:
        cfg = loads(read_file(p, MAX_CONFIG_BYTES, "a config.json"))
    except (FileProblem, JsonError):
        cfg = None  # read_config says what is wrong with it
    try:
        return read_config(source, name=name or model_name(p, cfg if isinstance(cfg, dict) else None))
    except SpecError as e:
        raise UserError(str(e)) from None


def cmd_author(args) -> int:
    from ..model.author import author, one_line, summary
    from ..model.spec import SpecError

    if args.name is not None and display(args.name) != args.name:
        raise UserError(f"--name {display(args.name)}: is not UTF-8 text; a title is one line of UTF-8 text")
    if args.name is not None and one_line(args.name) != args.name.strip():
        raise UserError(f"--name {args.name!r}: a title is one line, without line breaks or control characters")
    spec = spec_of(args.src, args.name)
    spec = replace(spec, source=display(spec.source))  # written into the document: UTF-8 text, whatever the path
    for assumed in spec.assumed:
        print(f"streamed author: warning: {args.src}: {assumed}", file=sys.stderr)
    try:
        text = author(spec)
    except SpecError as e:
        raise UserError(str(e)) from None
    _refuse_unless_it_checks(args.src, text)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    refuse_unwritable(args.output, args.output, "-o model.lgm")
    try:
        write_atomically(args.output, text)
    except OSError as e:
        raise UserError(f"{args.output}: cannot be written ({e.strerror})") from None
    print(f"{args.output}: {summary(spec)}", file=sys.stderr)
    return 0


def _refuse_unless_it_checks(source: str, text: str) -> None:
    """``UserError`` naming the first error ``check`` would find in the document ``text`` written from ``source``:
    ``author`` never writes a document ``check`` rejects. ★ A Granite ``embedding_multiplier`` of 1e308 was written
    as a number past the language's largest (1e30)."""
    from ..analysis.whole import analyze, position
    from ..lang.files import shown

    errors = analyze(text).errors
    if errors:
        line, col = position(errors[0].range)
        raise UserError(f"{display(source)}: the document written from it would not check (line {line}, column "
                        f"{col}: {shown(errors[0].message)}); nothing was written")


def add_parser(sub) -> None:
    a = sub.add_parser("author", help="write the model program of a Hugging Face config.json or a GGUF checkpoint")
    a.add_argument("src", metavar="SRC", help="a config.json (or the folder holding it) or a .gguf")
    a.add_argument("-o", "--output", metavar="OUT.lgm", help="where to write the document (default: standard output)")
    a.add_argument("--name", help="the document's title (default: from the config or the file name)")
    a.set_defaults(run=cmd_author)
