// Layer kinds → tree items, analysis → status bar text, and finding a layer's heading in a document. Pure.

export interface Kind {
  name: string;
  layers: number[];
  representative: number;
  reject?: string;
}

export interface Analysis {
  uri: string;
  version?: number;
  kinds: number;
  layers: number;
  rejects: number;
}

export interface TreeNode {
  id: string;
  label: string;
  description?: string;
  tooltip?: string;
  icon: 'kind' | 'kind-refused' | 'layer' | 'representative' | 'reason';
  layer?: number;
  children?: TreeNode[];
  collapsed?: boolean;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** A compact list of layer numbers: 0–3, 5, 7–9. */
export function layerRanges(layers: number[]): string {
  const s = [...new Set(layers)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < s.length; ) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
    parts.push(j === i ? `${s[i]}` : j === i + 1 ? `${s[i]}, ${s[j]}` : `${s[i]}–${s[j]}`);
    i = j + 1;
  }
  return parts.join(', ');
}

/**
 * A refusal as its row says it: what the view already shows left out — that the bundle is refused (the row is under
 * a refused kind) and which layer and kind (the row's parent) — so the reason itself starts the row.
 */
export function conciseReason(reject: string): string {
  return reject
    .replace(/^the bundle is refused: |^the bundle program does not lower: /, '')
    .replace(/(^|: )(the )?layer \d+ \([^)]*(\([^)]*\))?[^)]*\)( program)?(: | does not lower: )/, '$1')
    .replace(/^./, (c) => c.toUpperCase());
}

/**
 * A refusal as a notification about the document says it: the seed's `the … program does not lower:` and the count
 * of the kind's other layers left out (the notification names the document), and the values that lower (the server's
 * `; tp 2 or 4 lower`) apart, so that shortening the reason never cuts them.
 */
export function refusalReason(message: string): { why: string; lowers?: string } {
  let why = message.replace(/^the .*? program does not lower: /, '');
  const lowers = /; ((?:(?:tp|ctx|chunk|batch) [\d, or]+ lowers?(?:; )?)+)$/.exec(why);
  if (lowers) why = why.slice(0, lowers.index);
  why = why.replace(/ \(and so (?:does|do) the (?:\d+ )?other layers? of `[^`]*`\)$/, '');
  return { why, lowers: lowers?.[1] };
}

/**
 * The Layer Kinds view's rows. A sidebar is narrow: each row's label and description are short enough to be read
 * whole (`attention, window 512` · `52 layers`), and its tooltip says everything. A refused kind (its icon says so) has
 * its reason as a row of its own, first under it, with the whole sentence in its tooltip.
 */
export function kindsToTree(kinds: Kind[]): TreeNode[] {
  return kinds.map((k, i) => {
    const refused = typeof k.reject === 'string' && k.reject !== '';
    const layers = Array.isArray(k.layers) ? k.layers : [];
    const rep = typeof k.representative === 'number' ? k.representative : layers[0];
    const tooltipLines = [`${k.name}`, `${plural(layers.length, 'layer')}: ${layerRanges(layers)}`, `first: layer ${rep}, its representative`];
    if (refused) tooltipLines.push(`lowering refused under the current deployment: ${k.reject}`);
    const children: TreeNode[] = layers.map((l) => ({
      id: `kind:${i}:${k.name}:layer:${l}`,
      label: `Layer ${l}`,
      description: l === rep ? 'first' : undefined,
      tooltip: l === rep ? `Reveal ## Layer ${l}, the first layer of ${k.name}` : `Reveal ## Layer ${l}`,
      icon: l === rep ? 'representative' : 'layer',
      layer: l,
    }));
    if (refused) {
      children.unshift({ id: `kind:${i}:${k.name}:reason`, label: conciseReason(k.reject!), tooltip: `Lowering refused: ${k.reject}`, icon: 'reason' });
    }
    return {
      id: `kind:${i}:${k.name}`,
      label: k.name,
      description: plural(layers.length, 'layer'),
      tooltip: tooltipLines.join('\n'),
      icon: refused ? 'kind-refused' : 'kind',
      collapsed: layers.length > 8 && !refused,
      children,
    };
  });
}

export interface StatusText {
  text: string;
  tooltip: string;
  error: boolean;
}

export function statusText(a: Analysis | undefined): StatusText | undefined {
  if (!a) return undefined;
  const base = `${plural(a.kinds, 'kind')} · ${plural(a.layers, 'layer')}`;
  if (a.rejects > 0) {
    return {
      text: `$(error) ${base} · ${a.rejects} refused`,
      tooltip: `${base}; lowering refused for ${plural(a.rejects, 'kind')} — see the Problems panel and the Layer Kinds view`,
      error: true,
    };
  }
  return { text: `$(layers) ${base}`, tooltip: `${base} — click to show the Layer Kinds view`, error: false };
}

/** The line of `## Layer N` in a document's text, or -1. */
export function findLayerLine(text: string, layer: number): number {
  const lines = text.split('\n');
  const re = new RegExp(`^##\\s*Layer\\s+${layer}(?![0-9])`);
  for (let i = 0; i < lines.length; i++) if (re.test(lines[i])) return i;
  return -1;
}

/** The layer whose section holds a line, or undefined. */
export function layerAtLine(text: string, line: number): number | undefined {
  const lines = text.split('\n');
  for (let i = Math.min(line, lines.length - 1); i >= 0; i--) {
    const m = /^##\s*(\S+)(?:\s+(\d+))?/.exec(lines[i]);
    if (m) return m[1] === 'Layer' && m[2] !== undefined ? Number(m[2]) : undefined;
  }
  return undefined;
}

/** Server command ids in code lenses and code actions → the client's own commands (which show the answer). */
export const LENS_COMMANDS: Record<string, string> = {
  'streamed.goToRepresentative': 'streamed.client.goToRepresentative',
  'streamed.compareWithRepresentative': 'streamed.client.compareWithRepresentative',
  'streamed.lowerBundle': 'streamed.client.lowerBundle',
  'streamed.openManifest': 'streamed.client.openManifest',
  'streamed.showKinds': 'streamed.client.showKinds',
};

export function mapLensCommand<T extends { command: string }>(cmd: T | undefined): T | undefined {
  if (!cmd) return cmd;
  const to = LENS_COMMANDS[cmd.command];
  return to ? { ...cmd, command: to } : cmd;
}
