// The `streamed.*` settings as values: the server's initialization options, the deployment, the target's name,
// where a bundle goes. Pure: no `vscode` import, so the unit tests run under plain node.
import * as path from 'node:path';
import * as os from 'node:os';

export type Mode = 'forward' | 'decode' | 'prefill' | 'batched' | 'tp' | 'batched-tp';
export const MODES: readonly Mode[] = ['forward', 'decode', 'prefill', 'batched', 'tp', 'batched-tp'];

export interface Deployment {
  mode: Mode;
  ctx: number;
  chunk: number;
  batch: number;
  tp: number;
}

export interface InitOptions {
  target: string;
  deployment: Deployment;
  checkpoint: string | null;
  debounceMs: number;
}

/** Reads one setting of the `streamed` section (e.g. `get('deployment.ctx')`); undefined when unset. */
export type SettingGetter = (key: string) => unknown;

export const DEFAULTS: InitOptions = {
  target: 'sn50',
  deployment: { mode: 'decode', ctx: 4096, chunk: 512, batch: 8, tp: 2 },
  checkpoint: null,
  debounceMs: 150,
};

function positiveInt(v: unknown, fallback: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : fallback;
}

function nonNegativeInt(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : fallback;
}

/** `~`, `${workspaceFolder}` and relative paths, resolved against the first workspace folder. */
export function resolvePath(p: string, workspaceFolder: string | undefined): string {
  let s = p.trim();
  if (workspaceFolder) s = s.split('${workspaceFolder}').join(workspaceFolder);
  if (s === '~' || s.startsWith('~/')) s = path.join(os.homedir(), s.slice(1));
  if (!path.isAbsolute(s) && workspaceFolder) s = path.join(workspaceFolder, s);
  return s;
}

export function looksLikePath(s: string): boolean {
  return s.includes('/') || s.includes('\\') || s.endsWith('.toml') || s.startsWith('~') || s.includes('${');
}

export function initOptions(get: SettingGetter, workspaceFolder?: string): InitOptions {
  const rawTarget = get('target');
  let target = typeof rawTarget === 'string' && rawTarget.trim() !== '' ? rawTarget.trim() : DEFAULTS.target;
  if (looksLikePath(target)) target = resolvePath(target, workspaceFolder);
  const rawMode = get('deployment.mode');
  const mode = MODES.includes(rawMode as Mode) ? (rawMode as Mode) : DEFAULTS.deployment.mode;
  const rawCheckpoint = get('checkpoint');
  const checkpoint =
    typeof rawCheckpoint === 'string' && rawCheckpoint.trim() !== '' ? resolvePath(rawCheckpoint, workspaceFolder) : null;
  return {
    target,
    deployment: {
      mode,
      ctx: positiveInt(get('deployment.ctx'), DEFAULTS.deployment.ctx),
      chunk: positiveInt(get('deployment.chunk'), DEFAULTS.deployment.chunk),
      batch: positiveInt(get('deployment.batch'), DEFAULTS.deployment.batch),
      tp: positiveInt(get('deployment.tp'), DEFAULTS.deployment.tp),
    },
    checkpoint,
    debounceMs: nonNegativeInt(get('debounceMs'), DEFAULTS.debounceMs),
  };
}

/** Kinds of deployment and the numbers each one asks for. */
export function deploymentInputs(mode: Mode): Array<'ctx' | 'chunk' | 'batch' | 'tp'> {
  switch (mode) {
    case 'forward':
      return ['ctx'];
    case 'decode':
      return ['ctx'];
    case 'prefill':
      return ['ctx', 'chunk'];
    case 'batched':
      return ['ctx', 'batch'];
    case 'tp':
      return ['ctx', 'tp'];
    case 'batched-tp':
      return ['ctx', 'batch', 'tp'];
  }
}

export function validatePositiveInt(value: string): string | undefined {
  const v = value.trim();
  if (!/^\d+$/.test(v) || Number(v) <= 0) return 'a positive whole number';
  return undefined;
}

export interface LowerArgs {
  uri: string;
  /** false: the extension shows the answer in its own views (the server shows nothing through the protocol) */
  show: false;
  mode: Mode;
  ctx?: number;
  chunk?: number;
  batch?: number;
  tp?: number;
  checkpoint?: string;
  target?: string;
  out?: string;
}

/** The argument of `streamed.lowerBundle` for the answers the user gave. */
export function lowerArgs(
  uri: string,
  mode: Mode,
  numbers: Partial<Record<'ctx' | 'chunk' | 'batch' | 'tp', number>>,
  checkpoint: string | null,
  target: string,
  out?: string,
): LowerArgs {
  const args: LowerArgs = { uri, show: false, mode };
  for (const k of deploymentInputs(mode)) {
    const v = numbers[k];
    if (v !== undefined) args[k] = v;
  }
  if (checkpoint) args.checkpoint = checkpoint;
  if (target) args.target = target;
  if (out) args.out = out;
  return args;
}

export const MODE_DESCRIPTIONS: Record<Mode, string> = {
  forward: 'the whole sequence at once',
  decode: 'one token per step',
  prefill: 'a chunk of the prompt per step',
  batched: 'one token per sequence, a batch per step',
  tp: 'decode split over tensor-parallel chips',
  'batched-tp': 'batched decode split over tensor-parallel chips',
};

export const NUMBER_PROMPTS: Record<'ctx' | 'chunk' | 'batch' | 'tp', string> = {
  ctx: 'KV cache length (ctx)',
  chunk: 'prompt rows per step (chunk)',
  batch: 'sequences per step (batch)',
  tp: 'tensor-parallel chips (tp)',
};

/** The chip a shipped target names (`SN50`, `SN40L`), or undefined for a target file (its chip is in the file). */
export function chipOf(target: string): 'SN50' | 'SN40L' | undefined {
  const t = target.trim().toLowerCase();
  return t === 'sn50' ? 'SN50' : t === 'sn40l' ? 'SN40L' : undefined;
}

/**
 * `Lower SN50 Bundle`, `Lower SN40L Bundle`, or `Lower Bundle` for a target file: titles follow the target. The
 * command lowers in one step, with the current deployment; `asks` gives the title of the one that asks first
 * (`Lower SN50 Bundle With…`).
 */
export function lowerTitle(target: string, asks = false): string {
  const chip = chipOf(target);
  return `${chip ? `Lower ${chip} Bundle` : 'Lower Bundle'}${asks ? ' With…' : ''}`;
}

/**
 * What the language status says of a deployment, each word once: `decode · ctx 4096 · SN50`, `tp 4 · ctx 4096 ·
 * SN50`, `batched · batch 8 · tp 4 · ctx 4096 · SN50` — a mode whose name is one of its numbers' (`tp`) is that
 * number, the others read as the mode and the numbers it reads, the context last.
 */
export function deploymentSummary(o: InitOptions): string {
  const d = o.deployment;
  const numbers = deploymentInputs(d.mode);
  const order: Array<'chunk' | 'batch' | 'tp' | 'ctx'> = ['chunk', 'batch', 'tp', 'ctx'];
  const words = d.mode.split('-').filter((w) => !(numbers as string[]).includes(w));
  const parts: string[] = words.length ? [words.join('-')] : [];
  for (const k of order) if (numbers.includes(k)) parts.push(`${k} ${d[k]}`);
  parts.push(chipOf(o.target) ?? path.basename(o.target));
  return parts.join(' · ');
}

/**
 * Where a bundle of `document` goes. `setting` (`streamed.bundle.folder`) empty: undefined, the caller asks. Else
 * its `${workspaceFolder}`, `${fileDirname}`, `${fileBasenameNoExtension}` and `${mode}` are expanded, `~` too, and
 * a relative path is taken from the document's folder.
 */
export function bundleFolder(setting: unknown, document: string, mode: Mode, workspaceFolder?: string): string | undefined {
  if (typeof setting !== 'string' || setting.trim() === '') return undefined;
  const dir = path.dirname(document);
  const vars: Record<string, string> = {
    fileDirname: dir,
    fileBasenameNoExtension: path.basename(document, path.extname(document)),
    mode,
    workspaceFolder: workspaceFolder ?? dir,
  };
  let s = setting.trim().replace(/\$\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);
  if (s === '~' || s.startsWith('~/')) s = path.join(os.homedir(), s.slice(1));
  return path.resolve(dir, s);
}

/** The bundle folder a document gets when nothing else is chosen: `<stem>.bundle` beside it (the server's default). */
export function defaultBundleFolder(document: string): string {
  return path.join(path.dirname(document), `${path.basename(document, path.extname(document))}.bundle`);
}

/** The name of the document authored from a config: `llama/config.json` → `llama`, `x.gguf` → `x`, `y.json` → `y`. */
export function authoredName(src: string): string {
  const file = path.basename(src);
  if (file === 'config.json') return path.basename(path.dirname(src)) || 'model';
  return file.replace(/\.(gguf|json)$/i, '') || 'model';
}

/**
 * A message short enough for a notification, which shows a line or two: the first sentence (or clause) of `text` up
 * to `max` characters, and whether anything was left out (then the whole goes to the output channel).
 */
export function briefly(text: string, max = 160): { text: string; cut: boolean } {
  const t = text.replace(/\s+/g, ' ').trim();
  if (t.length <= max) return { text: t, cut: false };
  const head = t.slice(0, max);
  const stop = Math.max(head.lastIndexOf('; '), head.lastIndexOf('. '), head.lastIndexOf(': '));
  const word = head.lastIndexOf(' ');
  return { text: `${head.slice(0, stop > max / 2 ? stop : word > 0 ? word : max).replace(/[;:,. ]+$/, '')}…`, cut: true };
}
