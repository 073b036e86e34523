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


def agreement() -> list[tuple[str, str, float, float]]:
    """(case, weights, reference vs llama.cpp, bundle vs llama.cpp) for every oracle case."""
    sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "tests" / "oracle")]
    import numpy as np

    import llamacpp
    import oracle
    import test_llamacpp as t

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(t.CASES):
            for q8 in (False, True):
                c = t.CASES[name]()
                w = oracle.write(Path(tmp) / "m.gguf", c, q8=q8, **t.WRITTEN.get(name, {}))
                tokens = t.tokens_for(c)
                want = llamacpp.logits(w.path, tokens, t.PREFILL)
                ours = oracle.ours(w.path, tokens, t.PREFILL)
                pos = sorted(ours.bundle)
                bundle = float(oracle.relative(np.stack([ours.bundle[p] for p in pos]), want[pos]).max())
                rows.append((name, "Q8_0" if q8 else "F32", float(oracle.relative(ours.reference, want).max()), bundle))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true", help="also time the extra's install, cold and warm (slow)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    when, where, load = date.today().isoformat(), machine(), load_average()
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
    rows = agreement()
    table = ["| case | weights | reference vs llama.cpp | bundle vs llama.cpp |", "|---|---|---|---|"]
    table += [f"| {n} | {w} | {r:.2g} | {b:.2g} |" for n, w, r, b in rows]
    ORACLE_DOC.write_text(ORACLE_TEXT.format(when=when, where=where, load=load, table="\n".join(table)), "utf-8")
    print("\n".join(lines + [""] + table))


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
executor on that document's lowered prefill (16 rows; its head gives the last) and decode bundles. Each figure is
the largest difference over every position, relative to the largest logit llama.cpp gives at that position.

Measured {when} by `benchmarks/bench_oracle.py` on {where} (load average {load}):

{table}

What the tolerances are made of:

- **F32: 1e-5.** Both compute in float32; llama.cpp sums in its SIMD order and builds rotation angles by repeated
  float32 multiplication, `streamed` accumulates products in float64 and rounds once. Every F32 case but Gemma 3's
  agrees within a few 1e-6.
- **Gemma 3: 1e-4.** llama.cpp's CPU GELU rounds its input to fp16 and reads an fp16 table (`GGML_GELU_FP16`).
  With that table emulated in the reference, Gemma 3 agrees within 1e-5 (`test_gemma3_s_differences_are_llama_cpp_s
  _fp16_gelu_table`).
- **Q8_0: 0.25.** llama.cpp quantises the activations of a product with a Q8_0 weight to Q8_0 as well (blocks of 32,
  an fp16 scale) and multiplies int8 by int8; `streamed` multiplies float32 activations by the exactly dequantised
  weights. With llama.cpp's activation quantisation emulated in the reference, a dense model whose query heads each
  have their own KV head agrees within 1e-5 (`test_q8_0_differences_are_llama_cpp_s_activation_quantisation`). Not
  yet explained: with grouped KV heads a residual of about 5e-3 remains from the third position on. With experts
  a quantised router input can flip a top-k choice, which moves a position's logits further: up to 0.2 (Qwen3-Next,
  DeepSeek-V2); dense models stay within 0.05.

## Metadata read as llama.cpp reads it

llama.cpp's loader reads a fixed set of keys for every architecture and then its architecture's own; any other key is
ignored, whatever it says. `streamed/model/gguf_keys.py` is that rule, transcribed from the vendored llama.cpp
(`llama_model_base::load_hparams`, each `src/models/<arch>.cpp`'s `load_arch_hparams`), with what each architecture
fixes rather than reads (which layers slide, whether the chosen experts' weights are renormalised); the reader
consults no other key, names the ignored ones once in the document's header, and refuses a key llama.cpp reads whose
effect the language cannot say (Gemma 3's `final_logit_softcapping`, DeepSeek-V2's query temperature). It is held
against llama.cpp both ways, F32, for every architecture the reader supports:

- `test_keys_llama_cpp_does_not_read_for_an_architecture_change_neither_its_logits_nor_the_document`: each optional
  key an architecture does not read (sliding window and its pattern, its local base, an attention scale, the experts'
  normalisation, gating and scale, YaRN's log multiplier), set at once to values that would show, leaves llama.cpp's
  logits bit for bit as they were, the document's program as it was, and is named in its header.
- `test_a_key_llama_cpp_reads_for_an_architecture_is_read_as_llama_cpp_reads_it`: each key an architecture does read
  changes llama.cpp's logits, and `streamed` agrees with the changed ones within 1e-5 (Gemma 3: 1e-4). Llama 4 with a
  window of 0 is not among them: that llama.cpp aborts on it (`GGML_ASSERT(f_attn_temp_scale != 0.0f)`).

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
  gpt-oss) and linear (Gemma 3's global layers) are now in the tables' fill.

## The config route

A config's GGUF is written from transformers' reading of it, so a field `streamed.model.hf` misreads is no longer
handed to llama.cpp too. `tests/model/test_config_and_gguf_agree.py` shows that authoring from each shipped
`config.json` (and the test configs whose conversion those do not show: Mixtral, Qwen1.5-MoE, Qwen3-MoE, Qwen2.5) and
from the GGUF converted from it gives one program up to names and these storage conventions of llama.cpp's
converter: Gemma's and Qwen's `1 + g` gains stored with the 1 added, Gated DeltaNet's `A_log` stored as
`−exp(A_log)`, Llama's q and k permuted for adjacent pairs, Qwen3.5's value heads reordered, and gpt-oss's YaRN ramp,
which transformers leaves unrounded and llama.cpp rounds. So what the oracle establishes for the GGUF route holds for
the config route. And `tests/model/test_transformers_configs.py` holds the config route against transformers' own
configuration classes directly: for every shipped and test config — and variants setting the fields a model type's
rule shows only when set, and each supported model type with every field its class's default — every field `author`
reads equals what transformers 5.24's classes resolve and its modelling code builds from them (`MODELLING`, per model
type). One difference is deliberate and asserted: transformers 5 ties Mistral-Small-3.1's head to its embedding (the
Mistral 3 wrapper's `tie_word_embeddings` defaults to true since transformers#43429), though its text model says
false and its checkpoint stores `lm_head.weight` (vLLM#51063); `streamed` reads the text model's. Llama 4 Scout's
published `attn_temperature_tuning: 4` is refused by transformers 5's strict configuration class; it is read there
as true, which transformers 4 made of it.
"""


if __name__ == "__main__":
    main()
