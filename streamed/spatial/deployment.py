"""What a bundle serves, and how each of its programs is cut for it: ``Deployment`` (the mode and its sizes, as the
user names them) and ``Cut`` (``rows`` and ``ctx`` bound for one program, state per sequence, chips).

Light on purpose: the command line and the language server read ``MODES`` and build a ``Deployment`` while they start,
before anything is lowered.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lang.limits import MAX_BATCH, MAX_CONTEXT, MAX_UNITS, beyond


@dataclass(frozen=True)
class Cut:
    """How one program is lowered in a deployment: ``rows`` and ``ctx`` bound; ``batched``: per-sequence state and
    positions for ``batch`` sequences (row b is sequence b); ``tp`` chips; ``forward``: no state carried;
    ``last_row``: the head reads only its input's last row (prefill); ``step_rows``: the most rows one step writes
    into a sequence's state (0: ``rows``) — what a windowed cache's ring holds beyond its window
    (``model.caches``): a prefill's chunk, also in the decode that continues it; 1 for each sequence of a batch."""

    rows: int
    ctx: int
    batch: int = 1
    batched: bool = False
    tp: int = 1
    forward: bool = False
    last_row: bool = False
    step_rows: int = 0

    @property
    def written(self) -> int:
        """The most rows one step writes into a sequence's state (``step_rows``, or ``rows``)."""
        return self.step_rows or self.rows


MODES = ("forward", "decode", "prefill", "batched", "tp", "batched-tp")

#: The largest value of each size a deployment names: the command line, the server's settings and its commands all
#: check a size with ``size_problem``, so one limit binds them all.
SIZE_LIMITS = {"ctx": MAX_CONTEXT, "chunk": MAX_CONTEXT, "batch": MAX_BATCH, "tp": MAX_UNITS}


def past_training(ctx: int, trained: int | None) -> str | None:
    """The warning a context past the one the model was trained at gets (the document's ``trained`` constant, LANGUAGE
    §3), or ``None``: the model computes there, but what it computes is nothing it learned."""
    if trained is None or ctx <= trained:
        return None
    return (f"ctx {ctx:,} is past the {trained:,} positions the model was trained at (`trained`): what it computes "
            f"there it was never trained to")


def past_modelled(positions: int, modelled: int | None, unit: str = "ctx") -> str | None:
    """The refusal a context (``unit`` ``ctx``) or a run (``tokens``) of more ``positions`` than the document models
    gets (its ``modelled`` constant, LANGUAGE §3), or ``None``: past it the model computes something the document
    does not say (Llama 4's query temperature), so no answer there would be the model's."""
    if modelled is None or positions <= modelled:
        return None
    said = f"ctx {positions:,} is" if unit == "ctx" else f"{positions:,} {unit} are"
    return (f"{said} past the {modelled:,} positions the document computes as the model does (`modelled`: its "
            f"comment says what it leaves out past them); use at most {modelled:,}")


def trained_of(constants: dict) -> int | None:
    """The document's ``trained`` constant (LANGUAGE §3), when it is a whole number of positions."""
    return positions_constant(constants, "trained")


def modelled_of(constants: dict) -> int | None:
    """The document's ``modelled`` constant (LANGUAGE §3), when it is a whole number of positions."""
    return positions_constant(constants, "modelled")


def positions_constant(constants: dict, name: str) -> int | None:
    v = constants.get(name)
    return int(v) if isinstance(v, (int, float)) and v >= 1 and v == int(v) else None


def size_problem(size: str, value, say_value: bool = True) -> str | None:
    """Why ``value`` cannot be the deployment's ``size`` (``ctx``, ``chunk``, ``batch``, ``tp``), as the end of a
    sentence that names it first, or ``None``: a whole number from 1 to its limit."""
    return beyond(value, SIZE_LIMITS[size], say_value=say_value)


@dataclass(frozen=True)
class Deployment:
    """What the bundle serves: ``mode`` and its sizes. ``ctx`` is the KV-cache length (the sequence, for
    ``forward``); ``chunk`` the prefill rows — for ``decode``, the prefill chunk whose state the decode continues
    (its windowed caches' rings hold a chunk's rows beyond the window: LANGUAGE §8), 0 when it continues none;
    ``batch`` the sequences of a batched step; ``tp`` the chips."""

    mode: str = "decode"
    ctx: int = 4096
    chunk: int = 0
    batch: int = 1
    tp: int = 1

    @property
    def rows(self) -> int:
        return {"forward": self.ctx, "decode": 1, "prefill": self.chunk, "batched": self.batch, "tp": 1,
                "batched-tp": self.batch}[self.mode]

    @property
    def batched(self) -> bool:
        return self.mode in ("batched", "batched-tp")

    @property
    def stacked(self) -> bool:
        """Whether a step's hidden states are rows stacked from several tokens or sequences (batched, batched-tp,
        prefill): the seed names them ``X`` (the first layer's input), ``bxo{l-1}`` (layer l's) and its token ids
        ``toks``."""
        return self.mode in ("batched", "batched-tp", "prefill")

    @property
    def chips(self) -> int:
        return self.tp if self.mode in ("tp", "batched-tp") else 1

    @property
    def tokens_per_step(self) -> int:
        return self.rows

    def refusal(self) -> str | None:
        """Why no bundle of this deployment can exist, or ``None``."""
        if self.mode not in MODES:
            return f"unknown deployment `{self.mode}` (one of {', '.join(MODES)})"
        if self.ctx <= 0:
            return ("a forward bundle over an empty sequence" if self.mode == "forward"
                    else f"a {self.mode} bundle with an empty KV cache (ctx {self.ctx})")
        if self.batched and self.batch <= 0:
            return f"a batched decode bundle serving no sequence (batch {self.batch})"
        if self.mode == "prefill" and (self.chunk <= 0 or self.chunk > self.ctx):
            return f"a prefill chunk of {self.chunk} tokens in a context of {self.ctx}"
        if self.mode == "decode" and (self.chunk < 0 or self.chunk > self.ctx):
            return f"a decode continuing a prefill chunk of {self.chunk} tokens in a context of {self.ctx}"
        if self.mode in ("tp", "batched-tp") and self.tp <= 0:
            return f"tensor parallel over {self.tp} chips"
        return None

    def cut(self, program: str) -> Cut:
        """The cut each program of the deployment is lowered at: ``embed``, ``layer`` or ``head``."""
        rows, ctx = self.rows, self.ctx
        if program == "layer":
            written = self.chunk if self.mode in ("prefill", "decode") and self.chunk else 1 if self.batched else rows
            return Cut(rows, ctx, batch=self.batch if self.batched else 1, batched=self.batched, tp=self.chips,
                       forward=self.mode == "forward", step_rows=written)
        return Cut(rows, ctx, forward=self.mode == "forward", last_row=program == "head" and self.mode == "prefill")

    def normal(self) -> "Deployment":
        """The same deployment with the sizes its mode does not read at their defaults (one key per bundle)."""
        return Deployment(self.mode, self.ctx, self.chunk if self.mode in ("prefill", "decode") else 0,
                          self.batch if self.batched else 1, self.tp if self.mode in ("tp", "batched-tp") else 1)

    def to_json(self) -> dict:
        return {"mode": self.mode, "ctx": self.ctx, "chunk": self.chunk, "batch": self.batch, "tp": self.tp}
