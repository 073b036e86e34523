"""Document → programs: the embed program, one program per layer, the head — with their declarations, the shape of
every bound name, what each carries, and the semantic diagnostics.

Shapes keep the deployment words symbolic: a dimension is an ``int`` or one of ``"rows"`` and ``"ctx"``, so one
checked document serves every deployment. A name whose shape cannot be known (because of an earlier error) has shape
``None`` and is never reported again: one mistake, one diagnostic.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

from ..lang.limits import MAX_DIMENSION, beyond
from ..lang.limits import show as show_value
from ..lang.lexer import Range
from ..lang.parser import nearest, split_statements
from .checkpoint import quantized_as
from ..lang.syntax import (
    Binary,
    Call,
    Declaration,
    Diagnostic,
    Document,
    Expr,
    Let,
    Name,
    Number,
    Renaming,
    Return,
    Section,
    SectionKind,
    Set,
    Severity,
)

Dim = Union[int, str]
Shape = tuple  # tuple[Dim, ...]
SCALAR: Shape = ()
DEPLOYMENT_WORDS = ("rows", "ctx")


def show(shape: Shape | None) -> str:
    if shape is None:
        return "?"
    if shape == ():
        return "a scalar"
    return "×".join(str(d) for d in shape)


#: A table's fill as the host computes it: ``(kind, base)`` or ``(kind, base, params)`` with ``params`` the rotation's
#: scaling as ``(key, value)`` pairs — ``scaling`` (``linear``, ``llama3``, ``yarn``), ``factor``, ``context``,
#: ``low``, ``high``, ``fast``, ``slow``, ``unrounded``, ``attention``. The lowering copies it into the bundle and
#: ``numerics.kernels.fill_table`` computes the table from it alone (LANGUAGE §4).
Fill = tuple

#: The scaling options of a fill (``ops.FILLS``) and the scheme each names.
SCALINGS = {"linear scaling by": "linear", "llama3 scaling by": "llama3", "yarn scaling by": "yarn",
            "longrope scaling from": "longrope"}


@dataclass(frozen=True)
class Decl:
    """A declared tensor or runtime scalar of one program."""

    name: str
    role: str  # weight, input, state, table, token, position
    q8: bool
    shape: Shape
    range: Range  # the binder's range
    statement: int
    fill: Fill | None = None


#: The smallest normal float32: a soft cap below it is 0, or loses its digits, in the float32 the model computes in.
SMALLEST_FLOAT32 = 2.0 ** -126


def _soft_cap_problem(cap: float | None) -> str | None:
    """Why ``cap`` is no soft cap ``C`` of ``C·tanh(x/C)``: it is positive, and float32 holds it (★ a cap of 1e-300
    is 0 in float32, and every capped value was ``0·tanh(x/0)``); ``None`` when it is one (or unknown)."""
    if cap is None:
        return None
    if cap <= 0:
        return f"a soft cap is positive, not {cap:g}"
    if cap < SMALLEST_FLOAT32:
        return f"a soft cap of {cap:g} is below the smallest float32 ({SMALLEST_FLOAT32:.3g}), which computes it as 0"
    return None


class Program:
    """One program of the document, checked. ``shapes`` holds every bound name's shape (declared or computed).

    A layer of a shape already checked cleanly (``checked_program``) is not checked again: its program is that one
    renamed — ``decls``, ``shapes`` and ``bound_at`` in its own names and ranges, made when first read. Immutable;
    equal when every part is equal."""

    __slots__ = ("section", "input", "output", "carried", "errors", "in_shape", "out_shape", "_decls", "_shapes",
                 "_bound_at", "_rep", "_names", "_routers", "__weakref__")

    def __init__(self, section: Section, decls: dict[str, Decl], shapes: dict[str, Shape | None],
                 bound_at: dict[str, Range], input: str | None, output: str | None, carried: tuple[str, ...],
                 errors: int):
        self.section = section
        self.input = input
        self.output = output
        self.carried = carried
        self.errors = errors
        # The shapes the links between programs compare, kept apart so a renamed program answers them unrenamed.
        self.in_shape = shapes.get(input) if input is not None else None
        self.out_shape = shapes.get(output) if output is not None else None
        self._decls = decls
        self._shapes = shapes
        self._bound_at = bound_at
        self._rep: Program | None = None
        self._names: dict[str, int] | None = None
        self._routers: frozenset[str] | None = None  # ``routers`` of its statements, found when first asked

    @classmethod
    def renamed(cls, rep: "Program", section: Section) -> "Program":
        """``rep``'s program for ``section``, a section of the same shape: its names are ``section``'s binders at
        the places ``rep``'s are."""
        index = _name_index(rep)
        mine = section.shape.names
        name = lambda n: mine[index[n]] if n in index else n  # noqa: E731
        p = cls.__new__(cls)
        p.section = section
        p.input = name(rep.input) if rep.input is not None else None
        p.output = name(rep.output) if rep.output is not None else None
        p.carried = tuple(map(name, rep.carried)) if rep.carried else ()
        p.errors = rep.errors
        p.in_shape, p.out_shape = rep.in_shape, rep.out_shape
        p._decls = p._shapes = p._bound_at = None
        p._rep = rep
        p._names = None
        p._routers = None
        return p

    def _rename(self) -> None:
        rep = self._rep
        r = Renaming(rep.section, self.section)
        name, rng = r.name, r.range
        self._decls = {name(n): replace(d, name=name(n), range=rng(d.range)) for n, d in rep.decls.items()}
        self._shapes = {name(n): v for n, v in rep.shapes.items()}
        self._bound_at = {name(n): rng(v) for n, v in rep.bound_at.items()}

    @property
    def decls(self) -> dict[str, Decl]:
        if self._decls is None:
            self._rename()
        return self._decls

    @property
    def shapes(self) -> dict[str, Shape | None]:
        if self._shapes is None:
            self._rename()
        return self._shapes

    @property
    def bound_at(self) -> dict[str, Range]:
        if self._bound_at is None:
            self._rename()
        return self._bound_at

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Program):
            return NotImplemented
        return (self.section, self.decls, self.shapes, self.bound_at, self.input, self.output, self.carried,
                self.errors) == (other.section, other.decls, other.shapes, other.bound_at, other.input, other.output,
                                 other.carried, other.errors)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Program({self.section.label}, input={self.input}, output={self.output})"

    @property
    def label(self) -> str:
        return self.section.label

    @property
    def layer(self) -> int | None:
        return self.section.index if self.section.kind is SectionKind.LAYER else None

    @property
    def tokens(self):
        return self.section.tokens

    @property
    def statements(self):
        return self.section.statements

    def weights(self) -> list[Decl]:
        return [d for d in self.decls.values() if d.role == "weight"]

    def q8_declared(self) -> tuple[str, ...]:
        """The weights this program declares ``q8``, in declaration order (a renamed program's without renaming the
        rest of its declarations)."""
        if self._decls is None and self._rep is not None:
            index, mine = _name_index(self._rep), self.section.shape.names
            return tuple(mine[index[n]] for n in self._rep.q8_declared())
        return tuple(d.name for d in self.decls.values() if d.role == "weight" and d.q8)


    def assumed_storage(self, file_type: str = "Q8_0") -> tuple[tuple[str, str], ...]:
        """Each weight this program declares ``q8``, with the type llama.cpp's quantizer writes it as in a file of
        ``file_type`` (``Q8_0``, ``F16``, ``BF16``: ``llama_model_quantize``'s ``ftype``) — what a document read with
        no checkpoint assumes, in declaration order (``model.checkpoint.quantized_as``, the rule). A renamed program's
        are its representative's, renamed without renaming the rest of its declarations."""
        if self._decls is None and self._rep is not None:
            index, mine = _name_index(self._rep), self.section.shape.names
            return tuple((mine[index[n]], t) for n, t in self._rep.assumed_storage(file_type))
        if self._routers is None:  # asked for every layer renamed from this one, at every digest: walked once
            self._routers = routers(self.statements)
        kept = self._routers
        return tuple((d.name, quantized_as(d.shape, file_type, d.name in kept)) for d in self.decls.values()
                     if d.role == "weight" and d.q8)


def routers(statements) -> frozenset[str]:
    """The weights ``statements`` read as an ``experts``' router or shared gate — llama.cpp's ``ffn_gate_inp`` and
    ``ffn_gate_inp_shexp``, which its quantizer never quantises."""
    out: set[str] = set()

    def walk(e) -> None:
        if isinstance(e, Binary):
            walk(e.left)
            walk(e.right)
        elif isinstance(e, Call):
            if e.op == "experts":
                out.update(a.text for slot, a in e.args if slot in ("R", "S") and isinstance(a, Name))
            for _, a in e.args:
                walk(a)

    for st in statements:
        if isinstance(st, (Let, Set)):
            walk(st.value)
    return frozenset(out)


def _name_index(p: Program) -> dict[str, int]:
    """Each binder of ``p``'s section and its place in the section's shape."""
    if p._names is None:
        names = p.section.shape.names
        p._names = dict(zip(names, range(len(names))))
    return p._names


@dataclass(frozen=True)
class Programs:
    document: Document
    embed: Program | None
    layers: tuple[Program, ...]  # in section order; only layers with a valid number
    head: Program | None
    constants: dict[str, float]
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    def all(self) -> list[Program]:
        return [p for p in (self.embed, *self.layers, self.head) if p is not None]

    def layer(self, index: int) -> Program | None:
        layers = self.layers
        if 0 <= index < len(layers) and layers[index].section.index == index:  # numbered in order: the usual case
            return layers[index]
        for p in layers:
            if p.section.index == index:
                return p
        return None


class _Checker:
    """Checks one program statement by statement; every finding is a diagnostic, never an exception."""

    def __init__(self, section: Section, constants: dict[str, float], text: bytes | None = None, statements=None):
        self.section = section
        self.statements = section.statements if statements is None else statements
        self.constants = constants
        self.text = text  # the bytes a range's byte offsets index (``None``: the section's own source, at its base)
        self.base = 0
        self.diagnostics: list[Diagnostic] = []
        self.decls: dict[str, Decl] = {}
        self.shapes: dict[str, Shape | None] = {}
        self.bound_at: dict[str, Range] = {}
        self.carried: list[str] = []
        self.output: str | None = None
        self.input: str | None = None
        self.binders = {st.name.text for st in self.statements if isinstance(st, Let)}
        self.reported: set[str] = set()  # constants already reported as no dimension
        # One mistake, one diagnostic: a name a statement that did not parse would have bound has no known shape,
        # so its uses are not reported as unbound (the syntax error is the one diagnostic).
        self.unparsed = unparsed_binders(section) - self.binders
        for name in self.unparsed:
            self.shapes[name] = None

    # ---- reporting ----
    def error(self, rng: Range, message: str, code: str, replacement: str | None = None) -> None:
        """Report at ``rng``; ``replacement`` is the nearest spelling that would fix it, for an editor's quick fix."""
        data = {"replacement": replacement} if replacement else None
        self.diagnostics.append(Diagnostic(rng, Severity.ERROR, message, code, data=data))

    def src(self, rng: Range) -> str:
        if self.text is None:
            source = self.section.table.source
            self.text, self.base = source.text.encode("utf-8"), source.offset
        s = self.text[rng.start.offset - self.base:rng.end.offset - self.base].decode("utf-8", "replace")
        return s if len(s) <= 40 else s[:39] + "…"

    def what(self, e: Expr) -> str:
        return f"`{self.src(e.range)}`"

    # ---- dimensions ----
    def dim(self, d: Name | Number, *, allow_deployment: bool) -> Dim | None:
        """A dimension: a whole number from 1 to ``MAX_DIMENSION``, written or named by a constant. A zero or
        negative width would lower to a program of no (or negative) bytes and be certified with silently wrong
        figures, so it is refused here, on the name that gives it."""
        if isinstance(d, Number):
            why = beyond(d.value, MAX_DIMENSION)
            if why is not None:
                self.error(d.range, f"a dimension is a whole number from 1 to {MAX_DIMENSION:,}, not {d.text}", "shape")
                return None
            return int(d.value)
        if allow_deployment and d.text in DEPLOYMENT_WORDS:
            return d.text
        if d.text in self.constants:
            v = self.constants[d.text]
            why = None if v == int(v) else f"is {show_value(v)}, not a whole number"
            if why is None and beyond(v, MAX_DIMENSION) is not None:
                why = f"is {show_value(v)}, but it is used as a dimension: a whole number from 1 to {MAX_DIMENSION:,}"
            if why is not None:
                if d.text not in self.reported:  # one mistake, one diagnostic: the constant's first use as a width
                    self.reported.add(d.text)
                    self.error(d.range, f"`{d.text}` {why}", "shape")
                return None
            return int(v)
        self.unknown_constant(d)
        return None

    def number(self, d: Name | Number | None) -> float | None:
        if d is None:
            return None
        if isinstance(d, Number):
            return d.value
        if d.text in self.constants:
            return self.constants[d.text]
        self.unknown_constant(d)
        return None

    def fill(self, c: Call) -> Fill | None:
        """A table's fill as the host computes it (``Fill``), or ``None`` after reporting what is wrong with it."""
        values = {slot: self.number(n) for slot, n in c.numbers if slot not in ("SF", "LF")}
        lists = {slot: tuple(self.number(n) for n in c.number_list(slot)) for slot in ("SF", "LF")}
        if any(v is None for v in values.values()) or any(v is None for l in lists.values() for v in l):
            return None
        if values["B"] <= 0:
            self.error(c.number("B").range, f"a rotation base is positive, not {show_value(values['B'])}", "table")
            return None
        scalings = [k for k in c.options if k in SCALINGS]
        if len(scalings) > 1:
            self.error(c.range, f"a table has one rotation scaling, not both `{scalings[0]}` and `{scalings[1]}`", "table")
            return None
        params: list[tuple[str, object]] = []
        if scalings:
            kind = SCALINGS[scalings[0]]
            params.append(("scaling", kind))
            for slot, key in (("F", "factor"), ("N", "context"), ("L", "low"), ("H", "high"), ("BF", "fast"), ("BS", "slow")):
                if slot in values:
                    params.append((key, values[slot]))
            if kind == "longrope":
                short, long = lists["SF"], lists["LF"]
                if len(short) != len(long):
                    self.error(c.range, f"longrope scaling has {len(short)} short factors but {len(long)} long ones", "table")
                    return None
                bad = next((n for n, v in zip(c.number_list("SF") + c.number_list("LF"), short + long) if v <= 0), None)
                if bad is not None:
                    self.error(bad.range, "a frequency factor is positive", "table")
                    return None
                params += [("short", short), ("long", long)]
            elif values["F"] <= 0:
                self.error(c.number("F").range, f"a scaling factor is positive, not {show_value(values['F'])}", "table")
                return None
            if kind == "llama3" and values["H"] < values["L"]:
                self.error(c.number("H").range, f"llama3 scaling's high frequency factor ({show_value(values['H'])}) is below its low one ({show_value(values['L'])})", "table")
                return None
        if "unrounded ramp" in c.options:
            if not scalings or SCALINGS[scalings[0]] != "yarn":
                self.error(c.range, "only a `yarn scaling` has a ramp to leave unrounded", "table")
                return None
            params.append(("unrounded", True))
        if "A" in values:
            params.append(("attention", values["A"]))
        return (c.op, values["B"], tuple(params)) if params else (c.op, values["B"])

    def unknown_constant(self, d: Name) -> None:
        guess = nearest(d.text, list(self.constants) + list(DEPLOYMENT_WORDS))
        hint = f"; did you mean `{guess}`?" if guess else ("; constants are declared in `## Model`" if not self.constants else "")
        self.error(d.range, f"unknown constant `{d.text}`{hint}", "constant", guess)

    def count(self, call: Call, slot: str) -> int | None:
        n = call.number(slot)
        v = self.number(n)
        if v is None:
            return None
        why = beyond(v, MAX_DIMENSION)
        if why is not None:
            self.error(n.range, f"`{slot}` {why}", "shape")
            return None
        return int(v)

    # ---- names ----
    def lookup(self, n: Name) -> Shape | None:
        if n.text in self.shapes:
            return self.shapes[n.text]
        if n.text in self.constants:
            return SCALAR
        if n.text in self.binders:
            self.error(n.range, f"`{n.text}` is used before it is bound", "unbound")
        else:
            guess = nearest(n.text, [k for k, v in self.shapes.items() if v is not None])
            hint = f"; did you mean `{guess}`?" if guess else ""
            self.error(n.range, f"`{n.text}` is never bound in {self.section.label}{hint}", "unbound", guess)
        self.shapes[n.text] = None  # report once
        return None

    def role_of(self, e: Expr) -> str | None:
        if isinstance(e, Name) and e.text in self.decls:
            return self.decls[e.text].role
        return None

    # ---- expressions ----
    def expr(self, e: Expr) -> Shape | None:
        if isinstance(e, Number):
            return SCALAR
        if isinstance(e, Name):
            return self.lookup(e)
        if isinstance(e, Binary):
            return self.binary(e)
        return self.call(e)

    def binary(self, e: Binary) -> Shape | None:
        a = self.expr(e.left)
        if e.op == "scaled":
            self.number(e.right)
            return a
        b = self.expr(e.right)
        if a is None or b is None:
            return None
        if e.op == "times":
            if len(a) != 2 or len(b) != 2:
                self.error(e.range, f"`times` multiplies a matrix by a matrix: {self.what(e.left)} is {show(a)} and {self.what(e.right)} is {show(b)}", "shape")
                return None
            if a[1] != b[0]:
                self.error(e.range, f"{self.what(e.left)} is {show(a)} but {self.what(e.right)} expects {b[0]} rows", "shape")
                return None
            return (a[0], b[1])
        return self.broadcast(e, a, b)

    def broadcast(self, e: Binary, a: Shape, b: Shape) -> Shape | None:
        if a == b:
            return a
        if b == SCALAR or (len(b) == 1 and len(a) >= 1 and a[-1] == b[0]):
            return a
        if a == SCALAR or (len(a) == 1 and len(b) >= 1 and b[-1] == a[0]):
            return b
        self.error(e.range, f"{self.what(e.left)} is {show(a)} but {self.what(e.right)} is {show(b)}: `{e.op}` needs equal shapes or a vector as wide as a row", "shape")
        return None

    def want(self, call: Call, slot: str, shape: Shape | None, expected: tuple, what: str) -> bool:
        """``shape`` must equal ``expected``, where an expected entry ``None`` matches anything."""
        if shape is None:
            return False
        if len(shape) != len(expected) or any(x is not None and x != y for x, y in zip(expected, shape)):
            shown = "×".join("?" if x is None else str(x) for x in expected)
            self.error(call.arg(slot).range, f"{self.what(call.arg(slot))} is {show(shape)} but `{call.op}` expects {what} of {shown}", "shape")
            return False
        return True

    def role(self, call: Call, slot: str, roles: tuple[str, ...], what: str) -> None:
        e = call.arg(slot)
        r = self.role_of(e)
        if r not in roles and not (r is None and isinstance(e, Name) and e.text not in self.decls and self.shapes.get(e.text, 0) is None):
            self.error(e.range, f"{self.what(e)} must be {what} for `{call.op}`", "role")

    def call(self, c: Call) -> Shape | None:
        shapes = {slot: self.expr(e) for slot, e in c.args}
        op = c.op
        x = shapes.get("X")
        if op in ("silu", "gelu", "sigmoid", "softplus", "exp", "softmax"):
            return x
        if op in ("rmsnorm", "l2norm"):
            if x is None:
                return None
            if len(x) != 2:
                self.error(c.arg("X").range, f"{self.what(c.arg('X'))} is {show(x)}; `{op}` normalises the rows of a matrix", "shape")
                return None
            heads = self.count(c, "H") if "heads" in c.options else 1
            self.number(c.number("E"))
            self.number(c.number("O"))
            if heads and x[1] != "rows" and isinstance(x[1], int) and x[1] % heads:
                self.error(c.range, f"{self.what(c.arg('X'))} is {show(x)}, not divisible into {heads} heads", "shape")
                return None
            if op == "rmsnorm" and heads:
                self.want(c, "G", shapes.get("G"), (x[1] // heads if isinstance(x[1], int) else None,), "a gain")
            return x
        if op == "layernorm":
            self.number(c.number("E"))
            if x is None:
                return None
            if len(x) != 2:
                self.error(c.arg("X").range, f"{self.what(c.arg('X'))} is {show(x)}; `{op}` normalises the rows of a matrix", "shape")
                return None
            width = x[1] if isinstance(x[1], int) else None
            self.want(c, "G", shapes.get("G"), (width,), "a gain")
            if "bias" in c.options:
                self.want(c, "B", shapes.get("B"), (width,), "a bias")
            return x
        if op == "soft cap":
            cap = self.number(c.number("C"))
            if (why := _soft_cap_problem(cap)) is not None:
                self.error(c.number("C").range, why, "shape")
            return x
        if op == "columns":
            return self.columns(c, x)
        if op in ("row", "rows"):
            t, emb = shapes.get("T"), shapes.get("E")
            if t is None or emb is None:
                return None
            if len(t) != 1:
                self.error(c.arg("T").range, f"{self.what(c.arg('T'))} is {show(t)}; `{op}` looks up token ids (a token)", "shape")
                return None
            if len(emb) != 2:
                self.error(c.arg("E").range, f"{self.what(c.arg('E'))} is {show(emb)}; `{op}` reads rows of a table of vocab×d", "shape")
                return None
            return (t[0], emb[1])
        if op == "rope":
            return self.rope(c, shapes)
        if op == "attention":
            return self.attention(c, shapes)
        if op == "latent attention":
            return self.latent(c, shapes)
        if op == "gated delta":
            return self.gated_delta(c, shapes)
        if op == "short convolution":
            return self.short_conv(c, shapes)
        if op == "experts":
            return self.experts(c, shapes)
        if op == "argmax":
            if x is None:
                return None
            if len(x) != 2:
                self.error(c.arg("X").range, f"{self.what(c.arg('X'))} is {show(x)}; the largest is taken along each row of a matrix", "shape")
                return None
            return (x[0],)
        return None

    def columns(self, c: Call, x: Shape | None) -> Shape | None:
        """``columns A to B of X [, of every N]``: X's columns A…B−1 (of each group of N)."""
        a, b = self.number(c.number("A")), self.number(c.number("B"))
        every = self.count(c, "N") if "of every" in c.options else None
        if x is None or a is None or b is None or ("of every" in c.options and every is None):
            return None
        if len(x) != 2 or not isinstance(x[1], int):
            self.error(c.arg("X").range, f"{self.what(c.arg('X'))} is {show(x)}; `columns` takes columns of a matrix", "shape")
            return None
        group = every or x[1]
        if a != int(a) or b != int(b) or not 0 <= a < b <= group:
            self.error(c.range, f"columns {a:g} to {b:g} are not a part of {group} columns (0 ≤ A < B ≤ {group})", "shape")
            return None
        if x[1] % group:
            self.error(c.number("N").range, f"{self.what(c.arg('X'))} is {show(x)}, not whole groups of {group} columns", "shape")
            return None
        return (x[0], (int(b) - int(a)) * (x[1] // group))

    def position(self, c: Call, slot: str = "P") -> None:
        e = c.arg(slot)
        if e is not None and self.role_of(e) != "position" and not (isinstance(e, Name) and self.shapes.get(e.text, 0) is None):
            self.error(e.range, f"{self.what(e)} is not a position (declare it `Let {self.src(e.range)} be a position.`)", "role")

    def rope(self, c: Call, s: dict) -> Shape | None:
        x, cos, sin = s.get("X"), s.get("C"), s.get("S")
        self.position(c)
        heads = self.count(c, "H")
        if x is None or heads is None:
            return None
        if len(x) != 2 or not isinstance(x[1], int) or x[1] % heads:
            self.error(c.arg("X").range, f"{self.what(c.arg('X'))} is {show(x)}, not {heads} heads", "shape")
            return None
        width = x[1] // heads
        rot = self.count(c, "R") if "rotating" in c.options else width
        if rot is None:
            return x
        if rot > width or rot % 2:
            self.error((c.number("R") or c.arg("X")).range, f"a head of {width} cannot rotate {rot} dims (an even number, at most {width})", "shape")
            return x
        for slot, t in (("C", cos), ("S", sin)):
            self.want(c, slot, t, (None, rot // 2), "a table")
        return x

    def attention(self, c: Call, s: dict) -> Shape | None:
        q, k, v = s.get("Q"), s.get("K"), s.get("V")
        self.position(c)
        heads, groups = self.count(c, "H"), self.count(c, "G")
        for opt, slot in (("window", "W"), ("chunks of", "C")):
            if opt in c.options:
                self.count(c, slot)
        self.number(c.number("F"))
        if "soft cap" in c.options:
            cap = self.number(c.number("L"))
            if (why := _soft_cap_problem(cap)) is not None:
                self.error(c.number("L").range, why, "shape")
        if None in (q, k, v, heads, groups):
            return None
        if heads % groups:
            self.error(c.number("G").range, f"{heads} query heads cannot share {groups} key/value heads evenly", "shape")
            return None
        for slot, t, n in (("Q", q, heads), ("K", k, groups), ("V", v, groups)):
            if len(t) != 2 or not isinstance(t[1], int) or t[1] % n:
                self.error(c.arg(slot).range, f"{self.what(c.arg(slot))} is {show(t)}, not {n} heads", "shape")
                return None
        if q[1] // heads != k[1] // groups:
            self.error(c.arg("K").range, f"{self.what(c.arg('Q'))} has heads of {q[1] // heads} but {self.what(c.arg('K'))} has heads of {k[1] // groups}", "shape")
            return None
        if k[0] != v[0]:
            self.error(c.arg("V").range, f"{self.what(c.arg('K'))} holds {k[0]} positions but {self.what(c.arg('V'))} holds {v[0]}", "shape")
            return None
        if "sinks" in c.options:
            self.want(c, "S", s.get("S"), (heads,), "sinks")
        return (q[0], heads * (v[1] // groups))

    def latent(self, c: Call, s: dict) -> Shape | None:
        q, lat, rk, a, b = (s.get(k) for k in ("Q", "C", "R", "A", "B"))
        self.position(c)
        heads, nope, rope = self.count(c, "H"), self.count(c, "N"), self.count(c, "M")
        self.number(c.number("F"))
        if None in (q, lat, rk, a, b, heads, nope, rope):
            return None
        ok = self.want(c, "Q", q, (None, heads * (nope + rope)), "queries")
        ok &= self.want(c, "C", lat, (None, None), "a latent cache")
        ok &= self.want(c, "R", rk, (lat[0] if len(lat) == 2 else None, rope), "a rope-key cache")
        if not ok or len(lat) != 2:
            return None
        r = lat[1]
        if not self.want(c, "A", a, (heads, nope, r), "an absorbed key projection"):
            return None
        if not self.want(c, "B", b, (heads, r, None), "an absorbed value projection"):
            return None
        return (q[0], heads * b[2])

    def gated_delta(self, c: Call, s: dict) -> Shape | None:
        q, k, v, st, a, b = (s.get(x) for x in ("Q", "K", "V", "S", "A", "B"))
        self.role(c, "S", ("state",), "a declared state")
        heads = self.count(c, "H")
        groups = self.count(c, "G") if c.number("G") is not None else heads
        if None in (q, k, v, st, a, b, heads, groups):
            return None
        if heads % groups:
            self.error(c.number("G").range, f"{heads} value heads cannot share {groups} key heads evenly", "shape")
            return None
        if not self.want(c, "S", st, (heads, None, None), "a state"):
            return None
        dk, dv = st[1], st[2]
        ok = self.want(c, "Q", q, (None, groups * dk), "queries")
        ok &= self.want(c, "K", k, (q[0], groups * dk), "keys")
        ok &= self.want(c, "V", v, (q[0], heads * dv), "values")
        ok &= self.want(c, "A", a, (q[0], heads), "a decay")
        ok &= self.want(c, "B", b, (q[0], heads), "a beta")
        self.carry(c.arg("S"))
        return (q[0], heads * dv) if ok else None

    def short_conv(self, c: Call, s: dict) -> Shape | None:
        x, st, w = s.get("X"), s.get("S"), s.get("W")
        self.role(c, "S", ("state",), "a declared state")
        if None in (x, st, w):
            return None
        if not self.want(c, "W", w, (None, x[1] if len(x) == 2 else None), "a kernel"):
            return None
        k = w[0]
        if not isinstance(k, int) or k < 1:
            return None
        self.want(c, "S", st, (k - 1, x[1]), "a state")
        self.carry(c.arg("S"))
        return x

    def experts(self, c: Call, s: dict) -> Shape | None:
        x, r, g, u, dn = (s.get(k) for k in ("X", "R", "G", "U", "D"))
        top = self.count(c, "K")
        self.number(c.number("F"))
        if None in (x, r, g, u, dn, top) or len(x) != 2:
            return None
        d = x[1]
        if not self.want(c, "R", r, (d, None), "a router"):
            return None
        n = r[1]
        if top > n:
            self.error(c.number("K").range, f"top {top} of {n} experts", "shape")
        if not self.want(c, "G", g, (n, d, None), "expert gates"):
            return None
        f = g[2]
        ok = self.want(c, "U", u, (n, d, f), "expert ups") & self.want(c, "D", dn, (n, f, d), "expert downs")
        if "groups" in c.options:
            groups, keep = self.count(c, "N"), self.count(c, "M")
            if groups and keep and (n % groups or keep > groups):
                self.error(c.number("N").range, f"{n} experts do not form {groups} groups keeping {keep}", "shape")
        for slot, shape, what in (("B", (n,), "a selection bias per expert"), ("RB", (n,), "a router bias per expert"), ("BG", (n, f), "gate biases"), ("BU", (n, f), "up biases"), ("BD", (n, d), "down biases")):
            if c.arg(slot) is not None:
                ok &= self.want(c, slot, s.get(slot), shape, what)
        self.number(c.number("L"))
        if c.arg("G2") is not None:
            g2 = s.get("G2")
            if self.want(c, "G2", g2, (d, None), "a shared gate projection"):
                fs = g2[1]
                ok &= self.want(c, "U2", s.get("U2"), (d, fs), "a shared up projection")
                ok &= self.want(c, "D2", s.get("D2"), (fs, d), "a shared down projection")
        if c.arg("S") is not None:
            sg = s.get("S")
            if sg is not None and sg not in ((d,), (d, 1)):
                self.want(c, "S", sg, (d, 1), "a shared-expert gate")
        return x if ok else None

    def carry(self, e: Expr | None) -> None:
        if isinstance(e, Name) and e.text in self.decls and self.decls[e.text].role == "state" and e.text not in self.carried:
            self.carried.append(e.text)

    # ---- statements ----
    def bind(self, name: Name, shape: Shape | None) -> None:
        if name.text in self.bound_at:
            first = self.bound_at[name.text]
            self.error(name.range, f"`{name.text}` is already bound at line {first.start.line + 1}; every name is bound once", "rebound")
            return
        if name.text in self.constants:
            self.error(name.range, f"`{name.text}` is a constant of `## Model`; a program cannot bind it again", "rebound")
            return
        self.bound_at[name.text] = name.range
        self.shapes[name.text] = shape

    def declaration(self, st: Let, d: Declaration) -> None:
        if d.role in ("token", "position"):
            shape: Shape | None = ("rows",) if d.role == "token" else SCALAR
        else:
            dims = [self.dim(x, allow_deployment=True) for x in d.dims]
            shape = None if None in dims else tuple(dims)
        fill = None
        if d.role == "table" and d.fill is None:
            self.error(d.range, f"a table says how the host fills it: `Let {st.name.text} be a table of ctx by 32, cosines of base 10000.`", "table")
        if d.fill is not None:
            fill = self.fill(d.fill)
            factors = dict(fill[2]).get("short") if fill is not None and len(fill) > 2 else None
            if factors is not None and shape is not None and len(shape) == 2 and shape[1] != len(factors):
                self.error(d.fill.range, f"longrope scaling gives {len(factors)} factors for a table {shape[1]} wide "
                                         f"(one per column)", "table")
                fill = None
        if d.role == "input":
            if self.input is not None:
                self.error(st.name.range, f"{self.section.label} already has an input, `{self.input}`", "input")
            else:
                self.input = st.name.text
        self.bind(st.name, shape)
        if st.name.text not in self.decls and self.bound_at.get(st.name.text) is st.name.range:
            self.decls[st.name.text] = Decl(st.name.text, d.role, d.q8, shape or (), st.name.range, st.index, fill)

    def statement(self, st) -> None:
        if isinstance(st, Let):
            if isinstance(st.value, Declaration):
                self.declaration(st, st.value)
            else:
                self.bind(st.name, self.expr(st.value))
        elif isinstance(st, Set):
            value = self.expr(st.value)
            decl = self.decls.get(st.target.text)
            if decl is None or decl.role != "state":
                if st.target.text in self.unparsed:
                    return
                if st.target.text in self.shapes or st.target.text in self.binders:
                    self.error(st.target.range, f"`Set` changes a declared state; `{st.target.text}` is not one", "set")
                else:
                    self.error(st.target.range, f"`{st.target.text}` is never declared; `Set` changes a declared state (`Let {st.target.text} be a state of ctx by 64.`)", "set")
                return
            if st.row is not None:
                self.expr(st.row)
                if self.role_of(st.row) != "position" and not isinstance(st.row, Number) and self.shapes.get(st.row.text, 0) is not None:
                    self.error(st.row.range, f"{self.what(st.row)} is not a position", "role")
                if value is not None and (len(value) != 2 or len(decl.shape) != 2 or value[1] != decl.shape[1]):
                    self.error(st.value.range, f"{self.what(st.value)} is {show(value)} but the rows of `{decl.name}` are {show(decl.shape[1:])} wide", "shape")
            elif value is not None and value != decl.shape:
                self.error(st.value.range, f"{self.what(st.value)} is {show(value)} but `{decl.name}` is {show(decl.shape)}", "shape")
            if st.target.text not in self.carried:
                self.carried.append(st.target.text)
        elif isinstance(st, Return):
            if self.output is not None:
                self.error(st.range, f"{self.section.label} already returns `{self.output}`; a program returns once", "return")
                return
            self.lookup(st.name)
            self.output = st.name.text


def unparsed_statements(section: Section) -> tuple[tuple[int, int], ...]:
    """The token spans of ``section``'s statements that did not parse (each reported once, by the parser). Only a
    section the parser reported on has any: a clean one answers without reading its tokens."""
    if not section.diagnostics or section.table is None:
        return ()
    if section.unparsed is None:  # found once: the analysis asks of every layer after each edit
        rep = section.shared_from
        if rep is not None and rep.broken is not None:
            # One up to its binders with a broken layer (``lang.shapes.broken_key``): its tokens, split alike.
            section.unparsed = unparsed_statements(rep)
        else:
            parsed = set(section.spans)  # (a layer sharing another's tree has its spans: no statement is renamed)
            section.unparsed = tuple((a, b) for a, b, _closed in split_statements(section.table) if (a, b) not in parsed)
    return section.unparsed


def unparsed_binders(section: Section) -> set[str]:
    """The names the statements of ``section`` that did not parse would have bound: the word after each one's first
    word (``Let NAME be …``, however misspelt its ``Let`` or ``be``) and after every ``Let`` inside one."""
    texts = section.texts
    out = set()
    for a, b in unparsed_statements(section):
        # The statement's own name, and the name after any `Let` inside it (a missing full stop joins two).
        for i in (a, *(i for i in range(a + 1, b - 1) if texts[i] == "Let")):
            if i + 1 < b and texts[i + 1][:1].isalpha():
                out.add(texts[i + 1])
    return out


def check_program(section: Section, constants: dict[str, float], text: bytes | None = None,
                  statements=None) -> tuple[Program, list[Diagnostic]]:
    """``section``'s program checked under ``constants``, and every finding. ``text``: the bytes its ranges' byte
    offsets index (by default the section's own source); ``statements``: the statements to check in its place (by
    default its own)."""
    c = _Checker(section, constants, text, statements)
    for st in c.statements:
        c.statement(st)
    if c.output is None and c.statements is not None and not unparsed_statements(section):
        end = section.heading
        c.error(end, f"{section.label} never returns: end it with `Return NAME.`", "return")
    errors = sum(1 for d in c.diagnostics if d.severity is Severity.ERROR)
    program = Program(section, c.decls, c.shapes, c.bound_at, c.input, c.output, tuple(c.carried), errors)
    return program, c.diagnostics


def checked_program(section: Section, constants: dict[str, float], checked: dict) -> tuple[Program, list[Diagnostic]]:
    """``check_program``, once per shape: a layer of a shape already checked cleanly under these ``constants``
    (``checked``: shape key → program, kept by the caller for one set of constants) gets that program renamed.

    Exact, because a clean check reads a binder only as the name it is — never its spelling, except to ask whether it
    is a constant, which is asked here — and a section shares its shape only when its binders are plain names.

    A layer of a new shape whose tree is another layer's (of its frame: one text up to names and numbers,
    ``lang.shapes``) is checked as that layer's statements with its own numbers (``Section.framed``) and, when that
    is clean, gets that program renamed: its statements are never renamed into its names and places for the check.
    The same exactness: a clean check reads ranges and the spelling of numbers only to report."""
    shape = section.shape
    key = shape.key if shape is not None else None
    if key is not None and constants.keys().isdisjoint(shape.names):
        rep = checked.get(key)
        if rep is not None:
            return Program.renamed(rep, section), []
        frm = section.shared_from
        if frm is not None and constants.keys().isdisjoint(frm.shape.names):
            p, d = check_program(frm, constants, statements=section.framed)
            if not d:
                checked[key] = p
                return Program.renamed(p, section), []
        p, d = check_program(section, constants)
        if not d:
            checked[key] = p
        return p, d
    return check_program(section, constants)
