"""What the llama.cpp oracle costs and what it measures.

- ``## The llama.cpp oracle`` in docs/performance.md: the oracle suite as ``make test`` runs it (``python -m pytest
  tests/oracle``, a new process), and, with ``--install``, what the ``llama-cpp-python`` test extra adds to ``make
  test`` on a fresh machine: ``pip install`` of it into a fresh venv with pip's cache off (cold: llama.cpp is built
  from source with the machine's gcc and cmake) and with the wheel cache that build left (warm).
- docs/oracle.md: every case of ``tests/oracle`` with the largest difference between llama.cpp's logits and the
  reference's and the bundle's, relative to llama.cpp's largest logit at that position — the figures the suite's
  tolerances are set from.

Run: ``python benchmarks/bench_oracle.py [--install]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from common import ROOT, load_average, machine, record

ORACLE_DOC = ROOT / "docs" / "oracle.md"


def timed(argv: list[str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def install_costs() -> tuple[float, float, str]:
    """Seconds to ``pip install llama-cpp-python`` (the installed version) into a fresh venv: cache off, then warm."""
    from importlib.metadata import version

    spec = f"llama-cpp-python=={version('llama-cpp-python')}"
    with tempfile.TemporaryDirectory() as tmp:
        cold_env, warm_env = Path(tmp, "cold"), Path(tmp, "warm")
        for env in (cold_env, warm_env):
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        cold = timed([str(cold_env / "bin" / "pip"), "install", "-q", "--no-cache-dir", spec])
        # Warm: pip's own wheel cache, which holds this build since this checkout's first `make test`.
        warm = timed([str(warm_env / "bin" / "pip"), "install", "-q", spec])
    return cold, warm, spec


def agreement() -> list[tuple]:
    """(case, weights, reference vs llama.cpp, bundle vs llama.cpp, the reference in llama.cpp's arithmetic vs
    llama.cpp, the bundles in it vs llama.cpp — Q8_0 only, as the suite holds them) for every oracle case: F32, Q8_0
    and F16 projections."""
    sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "tests" / "oracle")]
    import numpy as np

    import llamacpp
    import oracle
    import test_llamacpp as t

    def worst(got, want) -> float:
        return float(oracle.relative(got, want).max())

    def bundled(ours, want) -> float:
        pos = sorted(ours.bundle)
        return worst(np.stack([ours.bundle[p] for p in pos]), want[pos])

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(t.CASES):
            for q8 in (False, True):
                c = t.CASES[name]()
                w = oracle.write(Path(tmp) / "m.gguf", c, q8=q8, **t.WRITTEN.get(name, {}))
                tokens = t.tokens_for(c)
                want = llamacpp.logits(w.path, tokens, t.PREFILL)
                ours = oracle.ours(w.path, tokens, t.PREFILL)
                emulated = oracle.ours(w.path, tokens, t.PREFILL, bundle=q8, arithmetic="llama.cpp")
                rows.append((name, "Q8_0" if q8 else "F32", worst(ours.reference, want), bundled(ours, want),
                             worst(emulated.reference, want), bundled(emulated, want) if q8 else None))
            c = t.CASES[name]()
            w = oracle.write(Path(tmp) / "m.gguf", c, f16=True, **t.WRITTEN.get(name, {}))
            tokens = t.tokens_for(c)
            want = llamacpp.logits(w.path, tokens, t.PREFILL)
            ours = oracle.ours(w.path, tokens, t.PREFILL, bundle=False)
            emulated = oracle.ours(w.path, tokens, t.PREFILL, bundle=False, arithmetic="llama.cpp").reference
            rows.append((name, "F16", worst(ours.reference, want), None, worst(emulated, want), None))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true", help="also time the extra's install, cold and warm (slow)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agreement-only", action="store_true",
                    help="only docs/oracle.md's table (leave the suite's time in docs/performance.md as it is)")
    args = ap.parse_args()
    when, where, load = date.today().isoformat(), machine(), load_average()
    if args.agreement_only:
        write_agreement(when, where, load)
        return
    suite = [timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/oracle"])
             for _ in range(args.runs)]
    lines = [
        "## The llama.cpp oracle",
        "",
        f"`benchmarks/bench_oracle.py`, {when}, {where}, load average {load} at the start; the machine is shared with "
        "other work while this runs.",
        "",
        f"**The oracle suite (`python -m pytest tests/oracle`, a new process): {statistics.median(suite):.0f} s** "
        f"(median of {args.runs}), of `make test`'s Python run.",
    ]
    if args.install:
        cold, warm, spec = install_costs()
        lines += [
            "",
            f"What the test extra `{spec}` adds to `make test`'s install on a fresh machine: **{cold / 60:.1f} min** "
            f"with pip's cache empty (llama.cpp built from source, CPU only, with gcc and cmake), **{warm:.0f} s** "
            f"once pip's wheel cache holds that build (load average {load_average()} at the end). CI runs "
            "`make test` on the session's machine, whose pip wheel cache holds the build after its first install, "
            "so CI pays the warm figure; a fresh machine pays the cold one once.",
        ]
    record("\n".join(lines) + "\n")
    print("\n".join(lines + [""]))
    write_agreement(when, where, load)


def path_sections(text: str) -> dict[str, str]:
    """docs/oracle.md's tables by kernel path: each between ``<!-- path NAME -->`` and ``<!-- /path -->``."""
    import re

    return {m.group(1): m.group(0) for m in re.finditer(r"<!-- path (\S+) -->.*?<!-- /path -->", text, re.S)}


def write_agreement(when: str, where: str, load: str) -> None:
    """docs/oracle.md with this host's path measured now and every other path's table as it was measured on a host of
    that path (kept from the file)."""
    sys.path[:0] = [str(ROOT / "tests" / "support")]
    import llamacpp

    path = llamacpp.built_path()
    rows = agreement()

    def cell(x: float | None) -> str:
        return "" if x is None else "0" if x == 0 else f"{x:.2g}"

    table = ["| case | weights | reference | bundle | reference, `--arithmetic llama.cpp` | bundles, `--arithmetic "
             "llama.cpp` |", "|---|---|---|---|---|---|"]
    table += [f"| {n} | {w} | {cell(r)} | {cell(b)} | {cell(e)} | {cell(eb)} |" for n, w, r, b, e, eb in rows]
    new = max(max(r, b or 0) for n, w, r, b, e, eb in rows
              if w == "F32" and n.split(",")[0] in ("granite", "mistral3", "cohere2", "deci"))
    exact = {w: sum(1 for n, ww, r, b, e, eb in rows if ww == w and e == 0 and not eb) for w in ("Q8_0", "F16", "F32")}
    cases = sum(1 for row in rows if row[1] == "F32")
    mine = (f"<!-- path {path.isa} -->\n### {path.isa}: {path.described}\n\nMeasured {when} by "
            f"`benchmarks/bench_oracle.py` on {where} (load average {load}), llama.cpp's "
            f"{path.isa} build. In llama.cpp's arithmetic {exact['Q8_0']} of the {cases} Q8_0 cases are llama.cpp's "
            f"logits bit for bit through the reference and the bundles, {exact['F16']} of the {cases} F16 cases "
            f"through the reference, {exact['F32']} F32 cases.\n\n" + "\n".join(table) + "\n<!-- /path -->")
    kept = path_sections(ORACLE_DOC.read_text("utf-8")) if ORACLE_DOC.exists() else {}
    kept[path.isa] = mine
    tables = "\n\n".join(kept[k] for k in sorted(kept))
    ORACLE_DOC.write_text(ORACLE_TEXT.format(when=when, where=where, load=load, table=tables, cases=cases,
                                             q8_exact=exact["Q8_0"], f16_exact=exact["F16"], f32_exact=exact["F32"],
                                             new_families=f"{new:.2g}".replace("e-0", "e-")), "utf-8")
    print("\n".join(table))


ORACLE_TEXT = """# The llama.cpp oracle: what it compares, and how close

`tests/oracle/test_llamacpp.py` holds what `streamed` computes against llama.cpp (through `llama-cpp-python` 0.3.36,
a test extra, which vendors `ggml-org/llama.cpp@0c1e57098`) on the same GGUF. For each case a small checkpoint with
seeded random weights is written as llama.cpp's converter would write it (`tests/support/oracle.py`): its metadata
is the converter's (`convert_hf_to_gguf.py`'s `set_gguf_parameters`, transcribed in `tests/support/convert.py`), read
— as the converter reads it — from transformers' resolved configuration (`AutoConfig…to_dict()`), never from
`streamed`'s reading of the config; its tensors are those of the document `streamed` authors from the config, whose
shapes llama.cpp's loader holds to that metadata. llama.cpp evaluates it on 28 tokens — 16 in one batch, then one
decode step each, past every sliding window (8 tokens wide here), f32 KV cache, flash attention off — and so does
`streamed`: the reference interpreter on the document `streamed author` writes from the file, and the bundle
executor on that document's lowered prefill (16 rows; its head gives the last) and decode bundles, in exact float32
and in `--arithmetic llama.cpp`. Each figure is the largest difference over every position, relative to the largest
logit llama.cpp gives at that position. llama.cpp runs its plain CPU kernels (`use_extra_bufts` off: its AMX path
segfaults on Q8_0 on this machine's Sapphire Rapids cores, and the repacked layouts reorder sums).

llama.cpp's arithmetic is a kernel path's (`streamed/numerics/cpu.py`: ggml groups its float sums by the width of
the vector registers, so an AVX2 build and an AVX-512 build of one llama.cpp differ in last bits, and a Q8_0 model's
logits by 1e-2). Each table below was measured on a host of its path, against llama.cpp's build for that path
(`tests/oracle/test_kernel_paths.py` holds every path the host runs; `benchmarks/bench_oracle.py` rewrites the table
of the path it runs on and keeps the others).

{table}

The families of issue #23, F32, reference and bundles alike: Gemma 2 (windowed and global layers, soft-capped
attention and final logits, sandwich norms) and StarCoder2 (layer norms with biases, an ungated GELU MLP, biased
projections) differ by llama.cpp's fp16 GELU table alone — with it emulated both are llama.cpp's logits bit for bit;
Phi-3 (fused `qkv` and `gate_up`; LongRoPE with its long factors, its short ones, and none) agrees within 1.6e-6, OLMo
2 (post-norms only, q/k norms over the whole projection) and InternLM2 (the grouped `wqkv`, split by the converter)
within 7.4e-7, and so does a Llama GGUF storing q, k and v in one `attn_qkv`. Granite (its embedding, attention,
residual and logit multipliers; and with biased attention and MLP), Mistral 3 (a `mistral3` GGUF of the wrapper's
Mistral text model; and with YaRN, whose betas and log multiplier it reads), Cohere 2 (attention and the MLP side by
side on one LayerNorm, window 8 on three layers of four that rotate adjacent pairs, the fourth global and unrotated,
scaled logits, the head tied) and Nemotron-NAS (`deci`: per-layer key/value grouping and feed-forward widths,
attention replaced by one product or removed, a layer with no block; and a layer with attention but no feed-forward
block, which llama.cpp skips whole) agree within {new_families}.

**In llama.cpp's arithmetic** (`--arithmetic llama.cpp`, `streamed/numerics/ggml.py`: ggml's CPU kernels as the
vendored build compiles them — Q8_0 activations quantised and F16 ones rounded before their products, vec_dot and
tinyBLAS orders, RMS and layer norms, rotation tables (YaRN's ramp and LongRoPE's factors among them) and turns,
attention's `kq`/`soft_max`/`kqv` (latent attention's as its absorbed graph computes it), SiLU, GELU's fp16 table,
soft caps, softplus and sigmoid, the experts' routing, renormalisation and sum, the fused Gated DeltaNet
recurrence — each held to llama.cpp's own tensors by
`tests/oracle/test_ggml_kernels.py` on the host's path) the cases bit for bit on each path are counted in
its table's heading (a 0 in the table). What is left, each named in the suite (`Q8_LEFT`, `Q8_LEFT_ON` for one path,
`F16_LEFT`) and held to 1e-3 (the figures below are the AVX-512 host's unless said):

- **Gemma 3** (Q8_0 6.3e-4, F16 3.4e-5; F32 3.1e-6): its document, not the arithmetic. It scales the embedding by √d
  written to 7 digits (llama.cpp multiplies by `sqrtf(d)`), and puts the attention scale on the logits (llama.cpp
  scales the rotated queries, then attends with a scale of 1): two orders of float32 arithmetic a document states
  otherwise than llama.cpp's graph, each a last bit per value, which Q8_0's activation rounding carries on.
- **Cohere 2** (Q8_0 2.1e-7, F16 5.9e-4): its document adds the residual as `(x + attention) + MLP`; llama.cpp's
  graph adds `(MLP + x) + attention` — float32 addition in another order.
- **Qwen2-MoE** (both cases, F16 2.5e-5): llama.cpp's Qwen2-MoE computes its shared expert's gate `σ(g)` as
  `silu(g)/g` (`qwen2moe.cpp`; its Qwen3-Next and Qwen3.5 call `ggml_sigmoid`); with that quotient in its place the
  case is bit for bit — the document says σ, as transformers does.

What the tolerances are made of:

- **F32: 1e-5.** Both compute in float32; llama.cpp sums in its SIMD order and builds rotation angles by repeated
  float32 multiplication, `streamed` by its product's rule (blocks of 32 in float32 lanes, float64 between blocks).
  Every F32 case but the GELU models' agrees within a few 1e-6.
- **GELU: Gemma 2 and 3 2.5e-4, StarCoder2 7.5e-4; in `--arithmetic llama.cpp` 1e-5.** llama.cpp's CPU GELU rounds
  its input to fp16 and reads an fp16 table (`GGML_GELU_FP16`). Measured without it 2.7e-5 (Gemma 3), 1.2e-4 (Gemma 2)
  and 3.7e-4 (StarCoder2, whose GELU is not gated and feeds its down projection alone); each bound leaves 2× room.
  The arithmetic reads the same table, each entry computed as `ggml-cpu.c` computes it — libm's `tanhf` and
  `1 + a·x·x` contracted into one fma; with numpy's `tanh`, an entry near an fp16 rounding boundary took the
  neighbouring value and StarCoder2 stayed 1e-4 away.
- **Q8_0 and F16, in `--arithmetic llama.cpp`: bit for bit, or 1e-3 for the cases named above.** llama.cpp quantises
  a Q8_0 product's activations to Q8_0 (per row, blocks of 32, `d = max/127` as fp16, `round(x·127/max)` half to
  even) and rounds an F16 product's to fp16: a rounding to a coarse step, so any last-bit difference before it moves
  a value across a step now and then, and carries on through every later layer and position. That is why the
  arithmetic is ggml's bit for bit rather than close to it, and why what is left above is each a named order of
  arithmetic, not a tolerance. An fp16 rounding is 32 times finer than a Q8_0 step: last bits a Q8_0 product's
  quantisation absorbs reach an F16 product, which is why F16 shows what Q8_0 hides.
- **At real size** (`benchmarks/bench_realsize.py`, docs/performance.md): the Llama-3.2-1B-shaped Q8_0 checkpoint
  (d 2048, 16 layers) is llama.cpp's logits bit for bit in prefill and decode, through the reference and the bundle;
  F32 within 1.2e-6.
- **Without the arithmetic**, Q8_0 cases differ by up to 0.2: the activation quantisation itself (with experts, a
  quantised router input can flip a top-k choice). Granite's multipliers damp it — each block's output is added
  ×0.22 to an embedding ×12 — to 2e-4, within the Q8_0 bound even in exact float32 (`QUANTISATION_DAMPED`).

## Every kernel path the host runs, against a build of that path

llama-cpp-python builds llama.cpp natively: on an AVX2 host its build is AVX2's, on an AVX-512 host AVX-512's, and the
whole oracle above holds that path. A CPU runs narrower paths too (an AVX-512 host runs AVX2 code), so
`tests/support/llama_builds.py` — run by `make test` before the Python suite — builds llama.cpp once for each other
path the CPU runs: the sources of the installed llama-cpp-python (its sdist, from pip's cache or the index), its
vendored llama.cpp configured with `GGML_NATIVE=OFF` and the path's instruction sets (AVX2: `GGML_AVX2`, `GGML_FMA`,
`GGML_F16C`, `GGML_AVX512=OFF`), shared libraries only, into `~/.cache/streamed-llama/<version>-<path>/`, kept for
later runs. `tests/oracle/test_kernel_paths.py` then runs the kernel tests, the real-width Q8_0 slice and the oracle's
cases in llama.cpp's arithmetic in a process whose `llama_cpp` loads that build (`LLAMA_CPP_LIB_PATH`), and must pass;
a path the CPU cannot run is reported not testable there, with the reason (on this project's AVX2 machines: "the
avx512 path needs a CPU that runs it, and this CPU has no avx512dq, avx512f").

On an AVX2 host nothing is built. On an AVX-512 host the AVX2 build is made once: measured here (AMD EPYC, 2 cores,
2026-12-02) by building that same AVX2 library on this AVX2 host, 25 minutes of wall time niced under a load of 15 to
25 from the team's other work (a quiet machine takes a fraction of that: llama-cpp-python's own build, which compiles
the tools and multimodal library too, is about 9 minutes there); the kernel tests against it passed, 12 of 12, bit
for bit. A cold `make test` on an AVX-512 host pays it once; later runs find it cached.

## Metadata read as llama.cpp reads it

llama.cpp's loader reads a fixed set of keys for every architecture and then its architecture's own; any other key is
ignored, whatever it says. `streamed/model/gguf_keys.py` is that rule, transcribed from the vendored llama.cpp
(`llama_model_base::load_hparams`, each `src/models/<arch>.cpp`'s `load_arch_hparams`), with what each architecture
fixes rather than reads (which layers slide, whether the chosen experts' weights are renormalised); the reader
consults no other key, names the ignored ones once in the document's header, and refuses a key llama.cpp reads whose
effect the language cannot say (DeepSeek-V2's query temperature; Gemma 3's `final_logit_softcapping`, refused until
the language could soft-cap, is now read). It is held
against llama.cpp both ways, F32, for every architecture the reader supports:

- `test_keys_llama_cpp_does_not_read_for_an_architecture_change_neither_its_logits_nor_the_document`: each optional
  key an architecture does not read (sliding window and its pattern, its local base, an attention scale, the experts'
  normalisation, gating and scale, YaRN's log multiplier), set at once to values that would show, leaves llama.cpp's
  logits bit for bit as they were, the document's program as it was, and is named in its header.
- `test_a_key_llama_cpp_reads_for_an_architecture_is_read_as_llama_cpp_reads_it`: each key an architecture does read
  changes llama.cpp's logits, and `streamed` agrees with the changed ones within 1e-5 (the GELU models: their bound).
  Among them Gemma 2's window, pattern, local base and both soft caps, Gemma 3's final soft cap, and an Olmo 3-style
  OLMo 2 file's window and pattern. Llama 4 with a window of 0 is not among them: that llama.cpp aborts on it
  (`GGML_ASSERT(f_attn_temp_scale != 0.0f)`). Phi-3 reads its `sliding_window` and disables it (`Phi SWA is currently
  disabled`): a Phi-3 GGUF attends over every position, and its document says so. OLMo 2 reads `rope.freq_base_swa`
  but its graph rotates every layer at the global base: the key is listed as ignored, and the rule's first test shows
  it changes nothing. Among the keys read, Granite's four multipliers (each applied only where it is not 0; its logit
  scale divides) and `rope.scaling.finetuned`, which switches its rotation off; Cohere 2's window, pattern and logit
  scale; Mistral 3's YaRN betas and log multiplier (an attention factor of `get_mscale(F)/get_mscale(F, m)`). Cohere 2
  reads `rope.freq_base_swa` but rotates its sliding layers at the global base: listed as ignored, like OLMo 2's.
  Nemotron-NAS reads its head, key/value head and feed-forward counts per layer: 0 heads is a layer without
  attention, 0 key/value heads one `d by d` product in its place (`attn_output`), a width of 0 a layer without a
  feed-forward block — which llama.cpp's `deci` graph skips whole, its attention's output never joining the
  residual (`continue` before it is added); the document runs that layer as its input and says so, and the oracle
  case `deci, attention without a feed-forward block` holds it to llama.cpp. transformers adds that attention.

Disagreements the oracle found, each fixed in the authoring or the weight reading, never in a tolerance:

- A Mixtral-style GGUF (architecture `llama` with experts) was read without renormalising the chosen experts'
  weights; llama.cpp's `llama` graph renormalises them: 0.45 off (case `llama, mixtral-style experts`).
- A `sliding_window` key in a `llama` or `qwen2` GGUF put a window on every layer; llama.cpp reads no window for
  either: 1.8 and 1.4 off (cases `… a sliding_window key it ignores`). The same rule found more: every architecture's
  `attention.scale`, and `expert_weights_norm`, `expert_gating_func` and `expert_weights_scale` outside DeepSeek-V2,
  and a sliding-window pattern in an architecture without sliding layers, were read though llama.cpp reads none of
  them; gpt-oss and Llama 4 rotate their sliding (chunked) layers at `rope.freq_base_swa`, which was not read (0.98 and
  0.68 off); Llama 4's NoPE layers follow llama.cpp's step of 4, not its sliding pattern; Gemma 3's logit soft-capping
  was silently dropped (now refused); experts in an architecture whose llama.cpp model has none were read.
- A shared expert's gate stored `[d]` — llama.cpp's loader takes `[d]` and `[d, 1]` alike (GGML's trailing `ne` of 1)
  — was authored and lowered, but its weights were refused by `streamed run` and the bundle loader (case `qwen2-moe, a
  shared-expert gate stored [d]`, through the reference, the bundle and `streamed run`).
- Llama, Llama 4 and DeepSeek-V2 from a GGUF rotated halves; llama.cpp rotates adjacent pairs (its converter permutes
  Llama's q and k): every position after the first differed (`rope …, interleaved`).
- Qwen3.5 from a GGUF read its value heads grouped over the key heads; llama.cpp's converter reorders them to take
  the key heads in turn (`gated delta …, in turn`): every position differed.
- A checkpoint whose vocabulary equals its hidden width read its embedding transposed (the square-tensor rule
  preferred the product orientation for a lookup table).
- Llama 4 from a GGUF attended in chunks of the metadata's window; llama.cpp uses 8192 whatever the metadata says.
- Rope scaling was not modelled: `llama3` (Llama 3.1's `rope_freqs`), YaRN with its attention factor (DeepSeek, Qwen,
  gpt-oss) and linear (Gemma 3's global layers) are now in the tables' fill; so is LongRoPE (Phi-3's
  `rope_factors_short`/`_long`, chosen as llama.cpp chooses, by the context against the original one).
- Measured on an AVX2 host (AMD EPYC, 2026-12-02), three families were not llama.cpp's bits in its arithmetic,
  each found by comparing the tensors of llama.cpp's graph step by step, and none was the kernel path's own sums:
  the rotation tables' attention factors were written to 7 digits (Phi-3's LongRoPE 1.414214 where the file's
  float32 is 1.4142135: Q8_0 1.5e-2) and YaRN's were made in float64 and its ramp mixed in float64 (ggml's
  `rope_yarn` works in float32, its factor `llama_context`'s float32 steps times its own `1 + 0.1·ln F`) — the
  factors are now written as the float32 llama.cpp multiplies by (`author.number32`; from a GGUF, computed in
  llama.cpp's float32 steps, `model/float32.py`) and the arithmetic builds every scaled table as ggml's rope cache
  does; DeepSeek-V2's latent attention summed `q̃·c` and `q_rope·kᴿ` apart where llama.cpp's absorbed graph takes
  one dot product over `[c | kᴿ]` (Q8_0 2.3e-2 with YaRN, F16 8.4e-4 without; on AVX-512 its Q8_0 cases happened
  to round alike); and Gated DeltaNet's recurrence was the document's step-by-step order where llama.cpp
  runs the fused `ggml_gated_delta_net` (the path's `ggml_vec_dot_f32`, fma'd updates, `1/sqrtf(d)` after the
  sums: Qwen3.5-MoE Q8_0 1.5e-2) — a GGUF's document now states that order (`gated delta …, scale F`) and the
  arithmetic computes the fused kernel's. Each is a rule of the arithmetic or the authoring, the same on every
  path (rope and the recurrence's scalar steps are C code no path vectorises; the sums take the path's lanes), so
  no case is left on either path; the AVX-512 table above predates them (its F16 YaRN, LongRoPE and Gated
  DeltaNet rows) until a host of that path measures it again.
- An Olmo 3-style OLMo 2 file's sliding layers were rotated at `rope.freq_base_swa`, which its loader reads; its graph
  rotates them at the global base, unscaled: 0.55 off.

## The config route

A config's GGUF is written from transformers' reading of it, so a field `streamed.model.hf` misreads is no longer handed
to llama.cpp too. `tests/model/test_config_and_gguf_agree.py` shows that authoring from each shipped `config.json` (and
the test configs whose conversion those do not show: Mixtral, Qwen1.5-MoE, Qwen3-MoE, Qwen2.5) and from the GGUF
converted from it gives one program up to names and these storage conventions of llama.cpp's converter: Gemma's and
Qwen's `1 + g` gains stored with the 1 added, Gated DeltaNet's `A_log` stored as `−exp(A_log)`, Llama's (and
InternLM2's) q and k permuted for adjacent pairs, InternLM2's grouped `wqkv` split into `attn_q`, `attn_k` and `attn_v`,
Qwen3.5's value heads reordered, and gpt-oss's YaRN ramp, which transformers leaves unrounded and llama.cpp rounds; and
one difference of llama.cpp's graphs: transformers windows every Phi-3 and StarCoder2 layer by `sliding_window`,
llama.cpp none. So what the oracle establishes for the GGUF route holds for the config route (for Phi-3 and StarCoder2,
within their window). And `tests/model/test_transformers_configs.py` holds the config route against transformers' own
configuration classes directly: for every shipped and test config — and variants setting the fields a model type's rule
shows only when set, and each supported model type with every field its class's default — every field `author` reads
equals what transformers 5.24's classes resolve and its modelling code builds from them (`MODELLING`, per model type).
One difference is deliberate and asserted: transformers 5 ties Mistral-Small-3.1's head to its embedding (the Mistral 3
wrapper's `tie_word_embeddings` defaults to true since transformers#43429), though its text model says false and its
checkpoint stores `lm_head.weight` (vLLM#51063); `streamed` reads the text model's. Llama 4 Scout's published
`attn_temperature_tuning: 4` is refused by transformers 5's strict configuration class; it is read there as true, which
transformers 4 made of it. Phi-3-mini-128k's first release writes its LongRoPE as `"type": "su"`, which transformers 5
refuses (it validates before Phi3Config renames `su` to `longrope`); it is read there as `longrope`, as later Phi-3
files write it. InternLM2 is not in transformers: its config is held against the published remote code's
`InternLM2Config` defaults, transcribed in the test; Nemotron-NAS neither: its config is held against the published
remote code's `DeciLMConfig` (a LlamaConfig of transformers 4.44.2 with `block_configs`) and `modeling_decilm.py`'s
reading of each block — key/value heads `num_attention_heads / n_heads_in_group`, widths
`int(2 · ffn_mult · hidden / 3)` rounded up to 256, blocks removed or replaced — transcribed in the test. Granite's,
Mistral 3's and Nemotron-NAS's q and k are permuted by the converter for adjacent pairs, as Llama's; Cohere rotates
adjacent pairs in transformers too, so its two routes' programs are one as written.
"""


if __name__ == "__main__":
    main()
