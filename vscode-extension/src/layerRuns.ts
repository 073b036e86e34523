// Runs of identical layer rows, so that 64 rows of two kinds read as one line: "Layers 0–63 · (gated deltanet ×3 ·
// attention) ×16". Pure: rows are compared by a signature the caller gives (the kind and the residency a row shows),
// never by anything the extension works out about the model.

/** Rows `[start, start + period × repeats)`: a block of `period` rows repeated `repeats` times (1 × 1: one row). */
export interface Run {
  start: number;
  period: number;
  repeats: number;
}

/**
 * The rows as runs, in order. At each row the run that covers the most rows wins — a block of up to `maxPeriod`
 * rows repeated at least twice — the shorter block on a tie (so `a a a a` is `a ×4`, not `(a a) ×2`); a row no
 * block repeats from is a run of its own.
 */
export function runsOf(signatures: readonly string[], maxPeriod = 8): Run[] {
  const out: Run[] = [];
  const n = signatures.length;
  let i = 0;
  while (i < n) {
    let best: Run = { start: i, period: 1, repeats: 1 };
    for (let p = 1; p <= maxPeriod && i + 2 * p <= n; p++) {
      let repeats = 1;
      while (i + (repeats + 1) * p <= n && sameBlock(signatures, i, i + repeats * p, p)) repeats++;
      if (repeats >= 2 && p * repeats > best.period * best.repeats) best = { start: i, period: p, repeats };
    }
    out.push(best);
    i += best.period * best.repeats;
  }
  return out;
}

function sameBlock(s: readonly string[], a: number, b: number, p: number): boolean {
  for (let k = 0; k < p; k++) if (s[a + k] !== s[b + k]) return false;
  return true;
}

/** What one block of a run holds, as people read it: `gated deltanet ×3 · attention`. */
export function blockLabel(names: readonly string[]): string {
  const parts: string[] = [];
  for (let k = 0; k < names.length; ) {
    let j = k;
    while (j + 1 < names.length && names[j + 1] === names[k]) j++;
    parts.push(j > k ? `${names[k]} ×${j - k + 1}` : names[k]);
    k = j + 1;
  }
  return parts.join(' · ');
}

/** A run's summary: `Layers 4–63 · attention ×60`, `Layers 0–63 · (gated deltanet ×3 · attention) ×16`. */
export function runLabel(first: number, last: number, block: readonly string[], repeats: number): string {
  const inner = blockLabel(block);
  const what = block.length === 1 ? `${block[0]} ×${repeats}` : `(${inner}) ×${repeats}`;
  return `Layers ${first}–${last} · ${what}`;
}
