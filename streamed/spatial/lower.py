"""Lowering one authored program to a certified ``SpatialProgram``: a pipeline of named passes, one module each in
``streamed.spatial.passes``.

    lift  →  split_tp (tensor parallel only)  →  fold_q8  →  tile  →  place  →  certify

One pass runs over the whole deployment before any program is lowered: the dense tables
(``streamed.spatial.streamed_model.shared_tables``) — the host tables and hidden-state boundaries the programs
share, declared alike everywhere, whose set is part of every program's cache key.

``lower_program`` runs the pipeline for one program and one cut: ``lift``, ``split_tp`` over the chips and
``fold_q8`` (``_unplaced``); then ``tile``, which lowers the program again at fewer rows when it does not fit;
``place`` and ``certify``. A refusal raises ``LoweringError`` with every reject of the program; one that names a
declared table or input is moved to its declaration, the statement whose size the user changes. ``LoweringError``
and ``TPError`` are importable from here, beside ``lower_program``.

Every pass is a pure function of its inputs; cost is linear in the program, never in the model's depth (the tile
pass lowers the program again at a logarithmic number of tile sizes).
"""

from __future__ import annotations

from dataclasses import replace

from ..model.program import Program
from .deployment import Cut
from .ir import SpatialProgram
from .passes.certify import certify
from .passes.errors import LoweringError, TPError
from .passes.fold_q8 import fold_q8
from .passes.lift import lift
from .passes.place import place
from .passes.split_tp import split_tp
from .passes.tile import tile
from .target import SpatialTarget

__all__ = ["PASSES", "LoweringError", "TPError", "lower_program"]


PASSES = ("lift", "split_tp", "fold_q8", "tile", "place", "certify")


def _unplaced(program: Program, constants: dict[str, float], cut: Cut, name: str, q8: frozenset[str],
              dtypes: tuple[tuple[str, str], ...] = ()):
    """``lift → split_tp → fold_q8``: the program's tensors and ops for ``cut``, not yet tiled, placed or certified;
    and the declared weights stored Q8_0 that it reads dense (all its chips, or some), with why."""
    tensors, ops, carried = lift(program, constants, cut, dtypes)
    dense: dict[str, str] = {}
    if cut.tp > 1:
        tensors, ops, carried, dense = split_tp(tensors, ops, carried, cut.tp, q8, name)
    else:
        ops = [replace(op, phase=i) for i, op in enumerate(ops)]
    tensors, ops, also = fold_q8(tensors, ops, q8 - frozenset(dense))
    dense = {**dense, **also}
    sp = SpatialProgram(name=name, rows=cut.rows, ctx=cut.ctx, tensors=tuple(tensors.values()), ops=tuple(ops),
                        carried=carried, tp=cut.tp)
    return sp, dense


def lower_program(program: Program, constants: dict[str, float], cut: Cut, target: SpatialTarget, name: str,
                  q8: frozenset[str] = frozenset(), dtypes: tuple[tuple[str, str], ...] = ()) -> SpatialProgram:
    """One authored program, lowered and certified for ``cut`` on ``target``; raises ``LoweringError`` (with every
    reject of the program in its ``every``). ``q8``: the weights read as stored Q8_0; ``dtypes``: those held other
    than bf16 (``lift``)."""
    sp, dense = _unplaced(program, constants, cut, name, q8, dtypes)
    try:
        # A batched cut's rows are its sequences: a tile of n rows is a batch of n.
        at = lambda rows: replace(cut, rows=rows, batch=rows if cut.batched else cut.batch)  # noqa: E731
        sp = tile(sp, lambda rows: _unplaced(program, constants, at(rows), name, q8, dtypes)[0], target)
        sp = certify(place(sp, target), target, {d.name for d in program.decls.values()
                                                 if d.role not in ("position", "state")})
    except LoweringError as e:
        # A refusal that names a declared tensor (a table too large for SRAM) belongs on its declaration: the
        # statement whose size the user changes.
        raise LoweringError.of([_on_declaration(program, one) for one in e.every]) from None
    if dense:
        sp = replace(sp, certificate={**sp.certificate, "read_dense": dense})
    return sp


def _on_declaration(program: Program, e: LoweringError) -> LoweringError:
    decl = program.decls.get(e.binder) if e.binder else None
    if decl is None or e.statement == decl.statement or decl.role not in ("table", "input"):
        return e
    return type(e)(e.why, decl.statement, e.binder)
