"""The lowering's refusals: ``LoweringError`` (a program that does not lower, on the statement that caused it) and
``TPError`` (a tensor-parallel width the model does not admit, so that the bundle cannot exist).

Every pass reports every reject it finds, not its first: ``LoweringError.of`` makes one error of several, and
``every`` gives them back in order.
"""

from __future__ import annotations

class LoweringError(Exception):
    """A program that does not lower: why, and the statement (index and binder) that caused it, when one did.

    ``more``: the program's other rejects, each on its own statement — a lowering reports every statement it cannot
    lift and every limit of the target the program exceeds, not only the first (``every`` lists them all)."""

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


class TPError(LoweringError):
    """A tensor-parallel width the model does not admit: the bundle cannot exist."""
