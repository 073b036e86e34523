"""The spatial IR: one program of a bundle as the RDU runs it — tensors, and operations in pipeline order.

This docstring is THE execution semantics of the IR. An executor (``streamed/numerics/execute.py``) implements it from this
text alone; the lowering (``streamed/spatial/lower.py`` and its ``passes/``) produces nothing it does not describe.

Values
======

Every tensor is a numpy array of its ``shape``; scalars (a ``position``) have shape ``()``. Arithmetic is float32 in
a reference executor (``dtype`` says how the chip stores the tensor: ``bf16``, ``f16``, ``int8``, ``int32``).

Tensors (``Tensor``)
--------------------

``role`` says where a tensor's value comes from:

- ``input``: supplied by the host each step. The program's hidden-state input (``x`` at layer 0, ``xo{l-1}`` after;
  in a deployment that stacks rows — prefill, batched, batched-tp — ``X`` and ``bxo{l-1}``, as the seed names them),
  its token ids (``tok``: ``int32`` of shape ``(rows,)``, one id per row; ``toks`` where rows are stacked) and its
  positions (``pos``: ``int32``, shape ``()``; in a batched program ``pos_s{b}``, one per sequence).
- ``weight``: read from the checkpoint (or a seeded generator) under the name ``of`` if ``of`` is set, else under
  ``name``. ``slice`` (``(axis, start, stop)``) keeps only ``[start, stop)`` of that axis of the declared weight (a
  tensor-parallel chip's part; on any other chip-local tensor ``of`` and ``slice`` say which part of which whole it
  holds, see Tensor parallel). ``part`` says how the stored weight is encoded:

  * ``None``: the dense values.
  * ``"planes"``: the Q8_0 int8 values of the (sliced) weight ``W`` (``k by n`` in the language's ``in by out``
    orientation; a stack of such matrices — an expert bank ``E by k by n``, one matrix per head — keeps its leading
    axes), exactly as GGUF stores them: with ``d = max_i |W[32b + i, j]| / 127`` in float32 for block ``b``
    of column ``j``, ``planes[32b + i, j] = round_half_away(W[32b + i, j] · (1/d))`` (0 where ``d = 0``) — the
    float32 ``d``, not its fp16 rounding, as ggml's ``quantize_row_q8_0_ref`` does (``streamed/numerics/q8.py``).
  * ``"scales"``: the Q8_0 block scales of the same weight: ``scales[b, j] = fp16(d)``, shape ``(k / 32, n)``
    (``(…, k / 32, n)`` for a stack). Blocks of 32 run along ``k`` (the input features, axis −2), exactly as GGUF
    stores a Q8_0 tensor.

  A weight's value as the chip reads it is ``planes · float32(scales)`` expanded along ``k``; an executor reads both
  from a Q8_0 checkpoint as stored, or quantises a dense weight with ``streamed.numerics.q8`` (never by dividing by the fp16
  scale, which differs from GGUF in about one value in a hundred).
- ``state``: carried from step to step (KV caches, recurrent and convolution states); zero at the first step. A
  program's ``carried`` names the states a step hands to the next; a state not in ``carried`` (every state of a
  ``forward`` program) is zeroed at the start of each step.
- ``table``: filled by the host. ``fill = ("cosines", base)`` is ``T[p, i] = cos(p · base^(−i/w))``; ``("sines",
  base)`` is ``sin``; ``w`` is the table's width (``shape[1]``). Shared by every program that reads it.
- ``intermediate``: written by exactly one op of the program.
- ``output``: the program's result (the hidden state it returns, or the head's next tokens); written by one op.

``tier`` is where it lives: ``sram``, ``hbm``, ``ddr``. ``bytes`` is its size on the chip. ``chip`` is the chip that
holds a tensor-parallel program's local tensor; ``None`` means replicated (every chip holds its own copy).

Operations (``Op``)
-------------------

Ops run by ``phase``, phases in increasing order, and in list order within one phase (``SpatialProgram.schedule``).
Each reads ``inputs`` and writes ``outputs`` (names of tensors of the program). An op writing a ``state`` updates it
in place: ops after it in the schedule and the next step see the new value. ``attrs``
is a tuple of ``(key, value)`` pairs; an absent optional attr takes the default below. ``statement`` is the index of
the authored statement the op was lifted from (``None`` for ops the lowering adds). ``rows`` below is ``shape[0]``
of the hidden state.

**Weights read as stored Q8_0.** ``matmul_q8`` is a product over a Q8_0 weight. Any other op whose product weights
the table names (``experts``: R, G, U, D and the shared expert's G2, U2, D2 and gate S; ``latent_attention``: A
and B) may read some of them as stored Q8_0: attr ``q8`` lists their positions in ``inputs``; each such input is
the weight's planes P, and its scales S follow the op's other inputs, in the order ``q8`` lists them (so the op
reads ``inputs[:len(inputs) − len(q8)]`` as the table says). The weight's value is ``P · S`` expanded along its
input features (axis −2), exactly as ``matmul_q8`` reads its weight.

============== ================================ ================================================================
kind           inputs → outputs                 computes (attrs)
============== ================================ ================================================================
matmul         X, W → Y                         ``Y = X @ W``; W ``k by n`` (a weight or any matrix).
matmul_q8      X, P, S → Y                      ``Y = X @ (P * S[k // 32])``: P the int8 planes ``k by n``, S the
                                                f16 scales ``k/32 by n`` of one weight (``part`` planes/scales).
add            A, B → Y / A → Y                 ``A + B``; a 1-D operand broadcasts over rows. With one input,
                                                ``A + scalar`` (attr ``scalar``).
sub            A, B → Y / A → Y                 ``A − B``; with one input and attrs ``scalar``, ``side``:
                                                ``side="right"``: ``A − scalar``; ``side="left"``: ``scalar − A``.
mul            A, B → Y / A → Y                 elementwise ``A · B`` (broadcast as ``add``); one input: ``A · scalar``.
scale          X → Y                            ``factor · X`` (``factor``: a number).
rmsnorm        X, G → Y                         per row, or per head when ``heads`` = H (the row cut into H equal
                                                parts): ``x / sqrt(mean(x²) + epsilon) · (G + offset)``;
                                                ``epsilon`` default 1e-6, ``offset`` default 0. G is as wide as a
                                                head (or the row).
l2norm         X → Y                            per row / per head: ``x / sqrt(sum(x²) + epsilon)`` (``epsilon``,
                                                ``heads``).
layernorm      X, G [, B] → Y                   per row: ``(x − mean x) / sqrt(mean((x − mean x)²) + epsilon) · G``
                                                ``+ B`` (``epsilon`` default 1e-5; no B: no bias).
silu gelu      X → Y                            elementwise: ``x·σ(x)``; tanh-approximate GELU
sigmoid                                         ``0.5·x·(1 + tanh(sqrt(2/π)(x + 0.044715x³)))``; ``σ(x)``;
softplus exp                                    ``log(1 + eˣ)``; ``eˣ``.
softcap        X → Y                            elementwise ``cap · tanh(x / cap)`` (``cap``).
softmax        X → Y                            softmax over the last axis.
lookup         T, E → Y                         ``Y[r] = E[T[r]]`` (T int32 token ids ``(rows,)``, E ``vocab by d``).
rope           X, P, C, S → Y                   rotate-half rotary embedding of each of ``heads`` heads of row r at
                                                position ``P + r``: with w the head width, ``R = rotating`` (default
                                                w), half = R/2, for i < half: ``y[i] = x[i]·c − x[i+half]·s``,
                                                ``y[i+half] = x[i+half]·c + x[i]·s`` with ``c = C[P+r, i]``,
                                                ``s = S[P+r, i]``; dims ≥ R pass through. With
                                                ``after`` N (default 0) the R rotated dims are those from N on
                                                (indices shifted by N); the first N pass through.
attention      Q, K, V, P [, sinks] → Y         causal grouped-query attention: ``heads`` H query heads, ``groups``
                                                G KV heads (query head h reads KV head ``h // (H/G)``); row r (at
                                                position ``P + r``) attends over rows j of K, V with j ≤ P + r;
                                                ``window`` W keeps j > P + r − W; ``chunk`` C keeps
                                                ``j // C == (P + r) // C``; logits times ``scale`` (default
                                                ``1/sqrt(head width)``); with a 5th input (``sinks``, one logit per
                                                head) the sink joins each softmax's denominator as ``exp(sink)``
                                                and contributes no value; with ``softcap`` C each scaled logit is
                                                ``C · tanh(logit / C)`` before the mask. Y is ``rows by H·(V width
                                                / G)``. With ``ring`` = ctx, K and V are rings (see
                                                ``write_rows``): position j of the context is row ``j mod L`` of
                                                them, which hold positions ``P + rows − L … P + rows − 1``; they
                                                hold at least every position the rows keep (``L ≥ min(ctx, W +
                                                rows − 1)``, W the window or chunk).
latent_attention Q, C, R, P, A, B → Y           DeepSeek-V2 MLA, absorbed: ``heads`` H, ``nope`` N, ``rope`` M;
                                                for head h, ``qn = Q[r, h(N+M) : h(N+M)+N]``, ``qr`` the next M;
                                                logit_j = ``(qn·A[h]) · C[j] + qr · R[j]``, times ``scale``
                                                (default ``1/sqrt(N+M)``), causal over j ≤ P + r; the head's
                                                output ``(softmax · C) · B[h]`` (width V); Y ``rows by H·V``.
gated_delta    Q, K, V, S, A, B → Y, S          Gated DeltaNet, ``heads`` H value heads sharing ``groups`` G key
                                                heads (value head h reads key head ``h // (H/G)``); S ``H by dk by
                                                dv``; for each row r in order and head h: ``S[h] ← A[r,h]·S[h]``;
                                                ``S[h] ← S[h] + B[r,h]·k ⊗ (v − S[h]ᵀk)``; ``y = S[h]ᵀq``, times
                                                ``scale`` when given. Updates S.
short_convolution X, S, W → Y, S                causal depthwise convolution: W ``k by c``, S ``k−1 by c`` the rows
                                                before this step; with Z = concat(S, X) over rows,
                                                ``Y[r] = Σ_i Z[r + i] · W[i]``; then S ← the last k−1 rows of Z.
experts        X, R, G, U, D [, …] → Y          mixture of experts; after the five fixed inputs come the optional
                                                tensors named, in order, by attr ``optional`` (a tuple drawn from
                                                ``selection_bias``, ``router_bias``, ``bias_gate``, ``bias_up``,
                                                ``bias_down``, ``shared_gate_proj``, ``shared_up``,
                                                ``shared_down``, ``shared_gate``). logits = X·R (+ router bias);
                                                scores =
                                                softmax(logits) or σ(logits) (``scored`` = "softmax"|"sigmoid");
                                                choose the ``top`` K by scores (+ selection bias), within the
                                                ``keep`` best of ``groups`` groups (a group's score: the sum of its
                                                top two); weights = the chosen scores (divided by their sum if
                                                ``normalized``), times ``routed_scale`` (default 1). Expert e:
                                                ``(act(X·G[e] + bg) ⊙ (X·U[e] + bu))·D[e] + bd``, act = silu, or
                                                with ``clamp`` L: ``g = min(g, L)``, ``u = clamp(u, −L, L)``,
                                                ``(u + 1)·g·σ(1.702·g)``. The weight multiplies the expert's input
                                                instead of its output when ``weighting_inputs``. The shared expert
                                                (silu SwiGLU of the shared tensors) is added, times
                                                ``σ(X·shared_gate)`` when given — with ``quotient_gate``,
                                                σ(g) as the float32 quotient ``silu(g)/g``.
argmax         X → Y                            the index of the largest value of each row (int32, ``(rows,)``).
running_argmax X → Y, M                         ``argmax`` over column tiles (see Tiles): Y (int32) and M hold the
                                                index, counted from column 0 of the whole, and the value of the
                                                largest of X's columns seen so far in this row tile; a tie keeps the
                                                lowest index. Untiled, ``Y = argmax(X)``, ``M = max(X)``.
write_rows     S, P, V → S                      ``S[P + r] = V[r]`` for each row r of V (``Set row P of S``).
                                                With ``ring`` = ctx, S is a ring of its L rows over the context's
                                                positions (a windowed cache, LANGUAGE §8): ``S[(P + r) mod L] =
                                                V[r]``, positions past ctx refused.
assign         V → S                            ``S = V`` (``Set S to V``).
copy           X → Y                            ``Y = X``.
take_rows      X → Y                            ``Y = X[start : start + count]`` (attrs ``start``, ``count``).
stack_rows     X0, X1, … → Y                    the inputs' rows, concatenated in order.
take_cols      X → Y                            ``Y = X[..., start : stop]`` (attrs ``start``, ``stop``) — a
                                                replicated tensor's part on one chip, or one part of a fused
                                                product (``columns A to B of X``); with ``every`` N, columns
                                                ``[start, stop)`` of each consecutive group of N, side by side.
allreduce      P0, …, P{tp−1} → Y               ``Y = Σ_c P_c``: the chips' partial sums (tensor parallel).
allgather      X0, …, X{tp−1} → Y               the chips' column slices concatenated along the last axis
                                                (axis ``axis`` when given).
============== ================================ ================================================================

Deployments
-----------

A program is lowered for one deployment (``streamed.spatial.deployment.Deployment``); ``rows`` and ``ctx`` are bound to
numbers. ``decode``: rows 1. ``prefill``: rows = the chunk; layers take the chunk's rows in order over the sequence's
one state; the head first ``take_rows`` the last row of its input. ``forward``: rows = ctx = the sequence; no embed
program; no state is carried (each is zero at the start of the step).

Batched (``batched``, ``batched-tp``): rows = batch, row b is sequence b. Ops that are per-row alike (products,
norms, activations, experts…) run on all rows at once. Ops that read a position or a state run per sequence: the
lowering emits ``take_rows(X, start=b, count=1) → X__s{b}``, the op on sequence b's own tensors — its position
``pos_s{b}`` (an input) and its states ``Kc3_s{b}`` (one state per sequence; the authored ``Kc3`` does not exist in a
batched program) — and ``stack_rows`` of the per-sequence results in sequence order. The token ids ``toks`` hold one
id per sequence.

Tensor parallel (``tp``, ``batched-tp``) over ``tp`` chips: a program's ``tp`` is the chip count. A tensor with
``chip = c`` lives on chip c only (names end ``_c{c}``); ``chip = None`` is replicated. An op with ``chip = c`` runs
on chip c over its local (and replicated) tensors; an op with ``chip = None`` runs on every chip over replicated
tensors (each computes the same value). ``allreduce``/``allgather`` read one local tensor per chip and write a
replicated one. ``phase`` numbers the pipeline stages: the chips' slices of one authored op share a phase and run
at once; phases run in order. Weight slices carry ``of`` and ``slice``: a column split gives chip c output features
``[c·n/tp, (c+1)·n/tp)`` (whole heads, as heads are contiguous), a row split the same range of input features (its
product a partial sum, followed by an ``allreduce``). A Q8_0 row slice is whole 32-element blocks, so its scales are
whole rows of the full weight's scales. Within one phase a chip runs its ops in list order (a ``take_cols`` that
feeds an op shares its phase). ``experts`` over chips: every chip holds columns ``[c·f/tp, (c+1)·f/tp)`` of each
expert's G and U (axis 2), the same rows of D (axis 1), the same part of the gate/up biases and of the shared
expert; the router and the shared gate are replicated; only chip 0 receives ``bias_down`` (its ``optional`` omits it
on the other chips), so the all-reduced sum adds it once. A Q8_0 slice of an expert bank's D (or of any weight along
its input features) is whole blocks, or the chips read that weight dense.

Replicated key/value heads: when an attention's G key/value heads are fewer than the chips (and divide them), chip
c's query heads ``[c·H/tp, (c+1)·H/tp)`` all read KV head ``c // (tp/G)``, so the chips hold the KV heads in G
*shares*, chip c share ``c // (tp/G)`` — its own copy: its columns of the key and value projections (and biases),
its ``rope``/norm over that head, its rows of the cache. Its ``attention`` says ``groups`` 1 (of ``G / shares``
in general). Gated delta's key heads likewise; with ``in_turn`` value head h reads key head ``h mod G``, so chip c
holds share ``c mod S``. Every chip-local tensor a split computes or holds (``name_c{c}``, a state's share
included) carries ``of`` — the whole tensor — and ``slice`` — its ``(axis, start, stop)`` of it — so two chips with
equal slices hold copies, and ``verify`` compares each chip's share with that part of the reference's whole.

Invariant (checked by ``certify``): every tensor an op reads is an input, weight, state or table, or is written by an
op before it in the schedule — in an earlier phase, or earlier in the list within the same phase, except that an
``allreduce``/``allgather`` reads only what earlier phases wrote (the chips' ops of one phase run at once); the ops
that read or write one state keep their list order in the schedule; every intermediate and output is written
exactly once (once per tile); shapes agree op by op.

Tiles
-----

A program whose working footprint does not fit its target's SRAM is *tiled*: its ops run once per tile of
``tiles``, in order. Its tensors and ops are then those of one tile — the *body*, lowered at the largest tile's
rows (and columns) — while ``rows`` stays the whole program's. Tile t covers the program's rows ``[r0, r1)``
(``Tile.rows``) and, in a column-tiled program, columns ``[c0, c1)`` of its vocabulary-wide product
(``Tile.cols``). Running tile t:

- a *per-row* tensor holds the tile's ``r1 − r0`` rows: a row input (an ``input`` that is not a position: the
  hidden state, the token ids) is its rows ``[r0, r1)``, and an op's output other than a state is per-row when the
  op reads a per-row tensor — except a ``take_rows``'s (a part of the tile's rows), while a ``stack_rows``'s is
  (``row_tensors``). A smaller (last) tile runs the same ops over fewer rows. The program's output is its tiles'
  rows, in order.
- the position input reads ``P + r0``: row r of the tile is at position ``P + r0 + r``, as in the whole program.
- in a batched program, row b of a tile is sequence ``r0 + b``: an op's per-sequence state or position
  ``N_s{b}`` (``N_s{b}_c{c}`` on chip c) is the program's ``N_s{r0+b}``. The program holds every sequence's states
  and positions; its ops name those of the tile's sequences, ``b`` below the body's rows. A batched program's
  tiles are all as large as its body (its ``take_rows`` pick sequence b of the tile).
- states are whole and persist from tile to tile: tile t sees what the tiles before it wrote (a cache's earlier
  rows, a recurrence's state after row ``r0 − 1``); a state not carried is zeroed once, at the start of the step.
- weights and tables are whole, except a column-tiled weight, of which the tile reads columns ``[c0, c1)`` (its
  ``read`` along axis 1). A *per-column* tensor (that weight, and the output of an op reading a per-column tensor,
  except ``running_argmax``'s) holds the tile's columns (``column_tensors``). Column tiles of one row tile are
  consecutive in ``tiles``; an op that reads no per-column tensor runs in the first column tile of its row tile
  only, and the later ones read what it wrote (``runs_in``).
- any other intermediate (one no row reaches) is recomputed alike by every tile.

Each tile lists what it ``reads`` and ``writes`` of the program's tensors (``Access``): a tensor, an axis and
``[start, stop)`` along it (axis ``None``: all of it; start ``None``: from its first row); with ``from_position``
start and stop count from the step's position P. So a tile of rows ``[r0, r1)`` writes rows ``[P + r0, P + r1)``
of a KV cache and its attention reads rows ``[0, P + r1)`` (with a window W, from ``P + r0 − W + 1``): the keys
and values it needs, causally — every earlier tile's rows and its own.

``from_position`` counts from the position of the tensor's own sequence in a batched program (``pos_s{b}``).
Positions of a ring (a windowed cache, ``write_rows``'s ``ring``) are its rows modulo its length.

``weights_on_chip``: the body's weights stay in SRAM across the tiles (they fit beside a tile's footprint), so a
step reads each from its tier once; otherwise every tile reads the weights it uses.

Invariant (checked by ``certify``): the tiles cover every row (and, column-tiled, every column of every row) exactly
once, in order, none larger than the body (a batched program's all equal to it); when there are several row tiles
the body is row-local — an op reads per-row tensors only at its own rows (attention reads its keys and values from
states, not from per-row tensors; no all-gather along rows, no ``assign`` of a per-row value, and
``take_rows``/``stack_rows`` only as a batched program picks and stacks its sequences); only elementwise ops and
``running_argmax`` read per-column tensors; the body's footprint (with its weights when ``weights_on_chip``), its
PMUs and its PCUs fit the target.

Placement
---------

``placement`` says where a placed program sits on each of its chips (``place`` lays it out; an executor needs none of
it, a picture of the chip all of it). ``pcus``: for each chip (``chip`` ``None`` for a program of one chip) and each
op that runs on it, in schedule order, the op's PCUs ``[start, stop)`` — ``op.pcus`` of them, end to end from PCU 0;
an op replicated over the chips is listed on each. ``pmus``: for each chip, each on-chip buffer (a tensor by name) and
its PMUs ``[start, stop)`` in order of first use, end to end from PMU 0: a buffer fills ``ceil(bytes / PMU bytes)``
PMUs (an op's first output also those of what the op holds while it runs, ``passes/shapes.held_parts``), a state one (the buffer it streams through from wherever residency keeps it), the weights of a program that
keeps them on chip across its tiles their own; inputs and tables no op reads come last. Invariant (checked by
``certify``): on each chip the ranges are disjoint and within the target's PCUs and PMUs, every op of the chip has
one range as long as its ``pcus``, and the buffers are exactly what ``pmus_needed`` counts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

ROLES = ("input", "weight", "state", "table", "intermediate", "output")
#: The ops that read one tensor of every chip: they wait for every chip's phase before theirs.
COLLECTIVES = ("allreduce", "allgather")
TIERS = ("sram", "hbm", "ddr")
#: Bytes a value: ``mxfp4`` is OCP MXFP4 as GGUF stores it, 32 four-bit values and one E8M0 scale in 17 bytes (a
#: weight stored so is read dense by its ops; its dtype says what it holds in memory).
DTYPE_BYTES = {"bf16": 2.0, "f16": 2.0, "f32": 4.0, "int8": 1.0, "int32": 4.0, "mxfp4": 17 / 32}
Q8_BLOCK = 32
#: Q8_0 stores 32 values in 34 bytes: 32 int8 values and one fp16 scale.
Q8_BYTES_PER_BLOCK = 34


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    tier: str
    bytes: int
    chip: int | None = None
    of: str | None = None
    fill: tuple | None = None
    part: str | None = None  # None, "planes", "scales"
    slice: tuple | None = None  # (axis, start, stop) of the declared weight ``of``

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Op:
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    pcus: int = 0
    pmus: int = 0
    flops: int = 0
    bytes_moved: dict = field(default_factory=dict)  # tier -> bytes
    phase: int = 0
    chip: int | None = None
    statement: int | None = None

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class Access:
    """What a tile reads or writes of one tensor of the program: ``axis`` and ``[start, stop)`` along it (``axis``
    ``None``: the whole tensor; ``start`` ``None``: from its first row); ``from_position``: start and stop count from
    the step's position."""

    tensor: str
    axis: int | None = None
    start: int | None = None
    stop: int | None = None
    from_position: bool = False


@dataclass(frozen=True)
class Tile:
    """One run of a tiled program's body: the program's rows ``[r0, r1)`` and, column-tiled, columns ``[c0, c1)``;
    what it reads and writes of the program's tensors."""

    rows: tuple[int, int]
    cols: tuple[int, int] | None = None
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where a program sits on each chip (the module docstring, Placement): ``pcus`` as ``(chip, op index, start,
    stop)``, ``pmus`` as ``(chip, tensor, start, stop)``."""

    pcus: tuple[tuple[int | None, int, int, int], ...] = ()
    pmus: tuple[tuple[int | None, str, int, int], ...] = ()

    def on(self, chip: int | None) -> tuple[list[tuple[int, int, int]], list[tuple[str, int, int]]]:
        """One chip's op ranges ``(op, start, stop)`` and buffer ranges ``(tensor, start, stop)``."""
        return ([(i, a, b) for c, i, a, b in self.pcus if c == chip],
                [(n, a, b) for c, n, a, b in self.pmus if c == chip])


@dataclass(frozen=True)
class SpatialProgram:
    """One program of a bundle: ``embed``, ``head`` or a layer kind's (named after its representative layer).

    ``tensors`` in declaration order, then intermediates in the order they are written; ``ops`` in pipeline order;
    ``carried`` the states a step hands to the next; ``certificate`` the checks ``certify`` passed, with numbers
    (``None`` until certified); ``tp`` the chip count (1 unless tensor parallel); ``tiles`` the tiles of a program
    whose footprint does not fit SRAM whole (empty: it runs once), ``weights_on_chip`` whether its weights stay
    in SRAM across them, ``cols`` the whole width of a column-tiled program's vocabulary product (see the module
    docstring); ``placement`` its ops' PCUs and its buffers' PMUs on each chip (``None`` until placed)."""

    name: str
    rows: int
    ctx: int
    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    carried: tuple[str, ...] = ()
    certificate: dict | None = None
    tp: int = 1
    tiles: tuple[Tile, ...] = ()
    weights_on_chip: bool = False
    cols: int | None = None
    placement: Placement | None = None

    @property
    def tile_rows(self) -> int:
        """The body's rows: the largest tile's (the program's own when it is not tiled)."""
        return max((t.rows[1] - t.rows[0] for t in self.tiles), default=self.rows)

    @property
    def tile_cols(self) -> int | None:
        """The body's columns of a column-tiled program (the largest column tile's); ``None`` otherwise."""
        return max((t.cols[1] - t.cols[0] for t in self.tiles if t.cols is not None), default=None)

    def tensor(self, name: str) -> Tensor:
        return self._index()[name]

    def schedule(self) -> list[tuple[int, "Op"]]:
        """The ops in the order they run, each with its index in ``ops``: by phase, in list order within a phase."""
        return sorted(enumerate(self.ops), key=lambda io: io[1].phase)

    def has(self, name: str) -> bool:
        return name in self._index()

    def _index(self) -> dict[str, Tensor]:
        cached = self.__dict__.get("_by_name")
        if cached is None:
            cached = {t.name: t for t in self.tensors}
            object.__setattr__(self, "_by_name", cached)
        return cached

    @property
    def inputs(self) -> list[Tensor]:
        return [t for t in self.tensors if t.role == "input"]

    @property
    def output(self) -> str | None:
        return next((t.name for t in self.tensors if t.role == "output"), None)

    def to_json(self) -> dict:
        return program_to_json(self)

    @staticmethod
    def from_json(data: dict | str) -> "SpatialProgram":
        return program_from_json(data)


# ---- JSON, losslessly ----------------------------------------------------------------------------------------------
# Tuples become lists in JSON; reading restores them where the IR holds tuples (shapes, names, attrs, fills, slices).


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _tuple(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuple(x) for x in v)
    return v


def tensor_to_json(t: Tensor) -> dict:
    out = {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "role": t.role, "tier": t.tier, "bytes": t.bytes}
    for key in ("chip", "of", "fill", "part", "slice"):
        v = getattr(t, key)
        if v is not None:
            out[key] = _plain(v)
    return out


def tensor_from_json(d: dict) -> Tensor:
    return Tensor(
        name=d["name"], shape=tuple(d["shape"]), dtype=d["dtype"], role=d["role"], tier=d["tier"], bytes=d["bytes"],
        chip=d.get("chip"), of=d.get("of"), fill=_tuple(d.get("fill")), part=d.get("part"), slice=_tuple(d.get("slice")),
    )


def op_to_json(o: Op) -> dict:
    out = {
        "kind": o.kind, "inputs": list(o.inputs), "outputs": list(o.outputs),
        "attrs": {k: _plain(v) for k, v in o.attrs},
        "pcus": o.pcus, "pmus": o.pmus, "flops": o.flops, "bytes_moved": dict(o.bytes_moved), "phase": o.phase,
    }
    if o.chip is not None:
        out["chip"] = o.chip
    if o.statement is not None:
        out["statement"] = o.statement
    return out


def op_from_json(d: dict) -> Op:
    return Op(
        kind=d["kind"], inputs=tuple(d["inputs"]), outputs=tuple(d["outputs"]),
        attrs=tuple((k, _tuple(v)) for k, v in d.get("attrs", {}).items()),
        pcus=d.get("pcus", 0), pmus=d.get("pmus", 0), flops=d.get("flops", 0),
        bytes_moved=dict(d.get("bytes_moved", {})), phase=d.get("phase", 0), chip=d.get("chip"),
        statement=d.get("statement"),
    )


def access_to_json(a: Access) -> dict:
    out: dict = {"tensor": a.tensor}
    if a.axis is not None:
        out.update(axis=a.axis, start=a.start, stop=a.stop)
    if a.from_position:
        out["from_position"] = True
    return out


def access_from_json(d: dict) -> Access:
    return Access(d["tensor"], d.get("axis"), d.get("start"), d.get("stop"), bool(d.get("from_position", False)))


def tile_to_json(t: Tile) -> dict:
    out: dict = {"rows": list(t.rows)}
    if t.cols is not None:
        out["cols"] = list(t.cols)
    out["reads"] = [access_to_json(a) for a in t.reads]
    out["writes"] = [access_to_json(a) for a in t.writes]
    return out


def tile_from_json(d: dict) -> Tile:
    return Tile(tuple(d["rows"]), tuple(d["cols"]) if d.get("cols") is not None else None,
                tuple(access_from_json(a) for a in d.get("reads", ())),
                tuple(access_from_json(a) for a in d.get("writes", ())))


#: What a program file says it is (``program_to_json``).
PROGRAM_FORMAT = "streamed-program/1"


def program_to_json(p: SpatialProgram) -> dict:
    out = {
        "format": PROGRAM_FORMAT,
        "name": p.name, "rows": p.rows, "ctx": p.ctx, "tp": p.tp,
        "tensors": [tensor_to_json(t) for t in p.tensors],
        "ops": [op_to_json(o) for o in p.ops],
        "carried": list(p.carried),
        "certificate": _plain(p.certificate) if p.certificate is not None else None,
    }
    if p.tiles:
        out["tiles"] = [tile_to_json(t) for t in p.tiles]
        out["weights_on_chip"] = p.weights_on_chip
        if p.cols is not None:
            out["cols"] = p.cols
    if p.placement is not None:
        out["placement"] = {"pcus": [list(e) for e in p.placement.pcus], "pmus": [list(e) for e in p.placement.pmus]}
    return out


def placement_from_json(d: dict | None, ops: int, tensors: set[str]) -> Placement | None:
    """A program file's placement, or ``ValueError`` for one that names an op or a tensor the program does not have,
    or a range that runs backwards (what the schema cannot say)."""
    if d is None:
        return None
    pcus = tuple((c, i, a, b) for c, i, a, b in d.get("pcus", ()))
    pmus = tuple((c, n, a, b) for c, n, a, b in d.get("pmus", ()))
    for c, i, a, b in pcus:
        if not 0 <= i < ops or b < a:
            raise ValueError(f"placement: op {i} at PCUs {a} to {b} is not an op of the program's {ops}")
    for c, n, a, b in pmus:
        if n not in tensors or b < a:
            raise ValueError(f"placement: the buffer {str(n)[:40]!r} at PMUs {a} to {b} is not one of the program's")
    return Placement(pcus, pmus)


def program_from_json(data: dict | str) -> SpatialProgram:
    d = json.loads(data) if isinstance(data, str) else data
    tensors = tuple(tensor_from_json(t) for t in d["tensors"])
    ops = tuple(op_from_json(o) for o in d["ops"])
    return SpatialProgram(
        name=d["name"], rows=d["rows"], ctx=d["ctx"], tensors=tensors, ops=ops,
        carried=tuple(d.get("carried", ())), certificate=d.get("certificate"), tp=d.get("tp", 1),
        tiles=tuple(tile_from_json(t) for t in d.get("tiles", ())), weights_on_chip=bool(d.get("weights_on_chip", False)),
        cols=d.get("cols"), placement=placement_from_json(d.get("placement"), len(ops), {t.name for t in tensors}),
    )


def row_tensors(program: SpatialProgram) -> frozenset[str]:
    """The per-row tensors of a program (see Tiles): its row inputs, and every op output other than a state that an
    op computes from a per-row tensor."""
    rows = {t.name for t in program.tensors if t.role == "input" and t.shape != ()}
    states = {t.name for t in program.tensors if t.role == "state"}
    for op in program.ops:
        if op.kind == "stack_rows" or op.kind != "take_rows" and any(n in rows for n in op.inputs):
            rows.update(n for n in op.outputs if n not in states)
    return frozenset(rows)


#: A batched program's per-sequence state or position: ``Kc3_s1`` (``Kc3_s1_c0``, chip 0's part), ``pos_s1``.
_SEQUENCE = re.compile(r"(.*_s)(\d+)((?:_c\d+)?)\Z")


def sequence_of(name: str) -> int | None:
    """The sequence a batched program's per-sequence name belongs to (``Kc3_s1`` → 1), else ``None``."""
    m = _SEQUENCE.match(name)
    return int(m.group(2)) if m and "__" not in name else None


def in_tile(program: SpatialProgram, tile: Tile, name: str) -> str:
    """The program's tensor that ``name``, as an op of ``tile`` names it, is: a batched program's per-sequence state
    or position of the tile's sequence b is the program's of sequence ``r0 + b``; every other name is itself."""
    if tile.rows[0] == 0 or not program.has(name) or program.tensor(name).role not in ("state", "input"):
        return name
    m = _SEQUENCE.match(name)
    if m is None or "__" in name:
        return name
    return f"{m.group(1)}{int(m.group(2)) + tile.rows[0]}{m.group(3)}"


def column_tensors(program: SpatialProgram, weights: frozenset[str] | None = None) -> frozenset[str]:
    """The per-column tensors of a column-tiled program (see Tiles): the weights its tiles read by columns (or
    ``weights``), and every op output computed from one — except ``running_argmax``'s, which fold the columns
    away."""
    cols = set(weights) if weights is not None else {
        a.tensor for t in program.tiles if t.cols is not None for a in t.reads
        if a.axis == 1 and program.has(a.tensor) and program.tensor(a.tensor).role == "weight"}
    for op in program.ops:
        if op.kind != "running_argmax" and any(n in cols for n in op.inputs):
            cols.update(op.outputs)
    return frozenset(cols)


def runs_in(program: SpatialProgram, tile: Tile, columns: frozenset[str] | None = None) -> list[Op]:
    """The ops a tile runs: all of them, except in a column tile after its row tile's first, which runs only the ops
    reading a per-column tensor (``columns``: ``column_tensors(program)``, when the caller has it)."""
    if tile.cols is None or tile.cols[0] == 0:
        return list(program.ops)
    columns = column_tensors(program) if columns is None else columns
    return [op for op in program.ops if any(n in columns for n in op.inputs)]


def authored(name: str) -> str:
    """The authored name a lowered tensor comes from: ``Kc3_s1`` (sequence 1's cache), ``Wq3_c0`` (chip 0's
    slice), ``xn3__1`` (a part of ``xn3``'s expression) all come from what precedes the lowering's suffix."""
    return re.sub(r"(_[sc]\d+)+$", "", name.split("__", 1)[0])


def batched(p: SpatialProgram) -> bool:
    """Whether ``p`` runs per sequence: it holds per-sequence positions or states (``pos_s0``, ``Kc3_s0``)."""
    return any((t.role == "state" or t.role == "input" and t.shape == ()) and sequence_of(t.name) is not None
               for t in p.tensors)


def rows_per_run(p: SpatialProgram) -> int:
    """The rows one run of ``p``'s ops covers: its row inputs' (the program's rows when it has none)."""
    return next((t.shape[0] for t in p.tensors if t.role == "input" and t.shape != ()), p.rows)


def q8_scales(op: Op) -> dict[int, str]:
    """The inputs ``op`` reads as stored Q8_0 planes (attr ``q8``: their positions), each with its scales — the op's
    last ``len(q8)`` inputs, in the same order (see "Weights read as stored Q8_0"). ``matmul_q8``'s is its P and S."""
    if op.kind == "matmul_q8":
        return {1: op.inputs[2]}
    slots = op.attr("q8", ())
    return dict(zip(slots, op.inputs[len(op.inputs) - len(slots):])) if slots else {}


def operands(op: Op) -> tuple[str, ...]:
    """``op``'s inputs as the table of ops lists them: without the scales a Q8_0 read appends (``q8_scales``)."""
    n = len(op.attr("q8", ())) if op.kind != "matmul_q8" else 0
    return op.inputs[:len(op.inputs) - n] if n else op.inputs


def nbytes(shape: tuple[int, ...], dtype: str) -> int:
    n = 1
    for s in shape:
        n *= s
    return int(n * DTYPE_BYTES[dtype])


__all__ = [
    "Tensor", "Op", "Access", "Tile", "Placement", "SpatialProgram", "row_tensors", "column_tensors", "runs_in", "sequence_of",
    "in_tile", "authored", "batched", "rows_per_run", "ROLES", "COLLECTIVES", "TIERS", "DTYPE_BYTES", "Q8_BLOCK",
    "Q8_BYTES_PER_BLOCK", "nbytes", "q8_scales", "operands", "program_to_json", "program_from_json", "replace", "fields",
]
