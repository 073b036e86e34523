"""The lowering's refusals: ``LoweringError`` (a program that does not lower, on the statement that caused it),
``LimitError`` (a limit of the target — PCUs, SRAM, PMUs — the program exceeds at the deployment's sizes) and
``TPError`` (a tensor-parallel width the model does not admit, so that the bundle cannot exist), and
``StreamedReject``, a bundle's program that did not lower, as a command says it (here, not beside the lowering that
raises it, so that a command catching it — ``streamed run`` — imports no lowering when it lowers nothing). ``SIZES`` names the
deployment's sizes that decide a refusal of each class: those another value of which may lower the program
(``diagnose.values_that_lower`` tries them); a ``LoweringError`` of no class of its own is the program's, which no
size changes.

Every pass reports every reject it finds, not its first: ``LoweringError.of`` makes one error of several, and
``every`` gives them back in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

class LoweringError(Exception):
    """A program that does not lower: why, and the statement (index and binder) that caused it, when one did.

    ``more``: the program's other rejects, each on its own statement — a lowering reports every statement it cannot
    lift and every limit of the target the program exceeds, not only the first (``every`` lists them all)."""

    SIZES: tuple[str, ...] = ()

    def __init__(self, why: str, statement: int | None = None, binder: str | None = None, more=()):
        super().__init__(why)
        self.why = why
        self.statement = statement
        self.binder = binder
        self.more = tuple(more)

    @property
    def every(self) -> tuple["LoweringError", ...]:
        return (self, *self.more)

    @staticmethod
    def of(errors: list["LoweringError"]) -> "LoweringError":
        """One error standing for ``errors`` (at least one), in order: the first, with the rest as its ``more``."""
        first, rest = errors[0], [m for e in errors for m in e.every][1:]
        return type(first)(first.why, first.statement, first.binder, rest)


class LimitError(LoweringError):
    """A limit of the target the program exceeds at the deployment's sizes: fewer rows or a shorter context may fit."""

    SIZES = ("ctx", "chunk", "batch")


class TPError(LoweringError):
    """A tensor-parallel width the model does not admit: the bundle cannot exist."""

    SIZES = ("tp",)


@dataclass
class StreamedReject(Exception):
    """A program of the bundle that did not lower: which (``embed``, ``layer 3 (attention)``, ``head``, or
    ``bundle`` for a request no program is lowered for), why, and where when a statement caused it. Said as the
    seed says it: ``the {program} program does not lower: {why}`` — on the command line, in the editor's
    diagnostics and in this exception's message alike."""

    program: str
    why: str
    statement: int | None = None
    binder: str | None = None
    layer: int | None = None
    #: The lowering's other rejects — further statements of this program, and other programs' — in program order.
    more: tuple = field(default=(), compare=False)

    @property
    def every(self) -> tuple["StreamedReject", ...]:
        return (self, *self.more)

    def __str__(self) -> str:
        # The seed's words, whatever refused it — a program (`the layer 3 (attention) program does not lower: …`) or
        # the request itself, for which no program was lowered (`the bundle program does not lower: …`).
        return f"the {self.program} program does not lower: {self.why}"

    def __hash__(self):
        return hash((self.program, self.why, self.statement))
