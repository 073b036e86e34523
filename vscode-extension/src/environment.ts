// Where the language server's Python comes from, as values: the interpreters tried in order, what a probe of one
// says, the state of the extension's private environment, and the lines a person reads of a failure. Pure: the
// unit tests run it under plain node; `bootstrap.ts` runs the processes.
import * as path from 'node:path';
import { looksLikePath, resolvePath } from './config';

/** The server needs Python 3.11 or later (the project's `requires-python`). */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

/** The distribution on the package index that carries `streamed` and `streamed_lsp`. */
export const DISTRIBUTION = 'streamed-lgm';

export type Source = 'setting' | 'workspace' | 'python-extension' | 'path' | 'private';

export interface Candidate {
  python: string;
  source: Source;
}

export const SOURCE_NAMES: Record<Source, string> = {
  setting: 'the setting streamed.server.python',
  workspace: "the workspace's virtual environment",
  'python-extension': "the Python extension's interpreter",
  path: 'the PATH',
  private: "the extension's own environment",
};

/** The interpreter inside a virtual environment folder. */
export function venvPython(dir: string, windows = process.platform === 'win32'): string {
  return windows ? path.join(dir, 'Scripts', 'python.exe') : path.join(dir, 'bin', 'python');
}

export interface CandidateInputs {
  /** `streamed.server.python` */
  setting: unknown;
  workspaceFolders: string[];
  /** the Python extension's active interpreter, when that extension is installed */
  pythonExtension?: string;
  exists: (file: string) => boolean;
  windows?: boolean;
}

/**
 * The Pythons to try, in order: the setting alone when it is set (a person's explicit choice is never second-guessed);
 * else each workspace folder's `.venv`, then its `venv`, then the Python extension's interpreter, then `python3`
 * from the PATH. The first one that has the server runs it.
 */
export function interpreterCandidates(i: CandidateInputs): Candidate[] {
  const windows = i.windows ?? process.platform === 'win32';
  if (typeof i.setting === 'string' && i.setting.trim() !== '') {
    const s = i.setting.trim();
    // A bare command (`python3.11`) stays a command looked up on PATH; anything path-like is resolved.
    return [{ python: looksLikePath(s) ? resolvePath(s, i.workspaceFolders[0]) : s, source: 'setting' }];
  }
  const out: Candidate[] = [];
  for (const folder of i.workspaceFolders) {
    for (const name of ['.venv', 'venv']) {
      const p = venvPython(path.join(folder, name), windows);
      if (i.exists(p)) out.push({ python: p, source: 'workspace' });
    }
  }
  if (i.pythonExtension && i.pythonExtension.trim() !== '') out.push({ python: i.pythonExtension.trim(), source: 'python-extension' });
  out.push({ python: windows ? 'python' : 'python3', source: 'path' });
  return out.filter((c, n) => out.findIndex((d) => d.python === c.python) === n);
}

/** Run as `python -c PROBE`: one line of JSON saying which Python this is and whether the server imports. */
export const PROBE = [
  'import json, sys',
  'r = {"version": list(sys.version_info[:2]), "executable": sys.executable, "server": False}',
  'try:',
  '    import streamed_lsp',
  '    r["server"] = True',
  'except Exception as e:',
  '    r["error"] = f"{type(e).__name__}: {e}"',
  'print(json.dumps(r))',
].join('\n');

export interface Probe {
  /** `runs`: a Python 3.11+ without the server; `old`: a Python older than 3.11; `broken`: it could not be run */
  status: 'server' | 'runs' | 'old' | 'broken';
  version?: string;
  executable?: string;
  detail: string;
}

/** What a probe's output says (`stdout` of `python -c PROBE`, or the failure to run it). */
export function readProbe(stdout: string, failure?: string): Probe {
  const line = stdout.trim().split('\n').pop() ?? '';
  let r: any;
  try {
    r = JSON.parse(line);
  } catch {
    return { status: 'broken', detail: failure ?? (lastLine(stdout) || 'it printed nothing') };
  }
  const v: number[] = Array.isArray(r?.version) ? r.version : [];
  const version = v.join('.');
  const executable = typeof r?.executable === 'string' ? r.executable : undefined;
  if (r.server === true) return { status: 'server', version, executable, detail: '' };
  const old = v.length === 2 && (v[0] < MIN_PYTHON[0] || (v[0] === MIN_PYTHON[0] && v[1] < MIN_PYTHON[1]));
  if (old) return { status: 'old', version, executable, detail: `Python ${version} is older than ${MIN_PYTHON.join('.')}` };
  return { status: 'runs', version, executable, detail: typeof r.error === 'string' ? r.error : 'streamed_lsp is not installed' };
}

/**
 * The record kept beside the private environment: which extension version and which wheel installed it — `wheel`
 * is the wheel's identity, its file name and the start of its SHA-256 (`wheelIdentity`), so a rebuilt wheel of the
 * same version counts as another.
 */
export interface EnvStamp {
  extension: string;
  wheel: string;
  python: string;
}

export function wheelIdentity(file: string, sha256: string): string {
  return `${path.basename(file)}#${sha256.slice(0, 16)}`;
}

/**
 * The private environment against this extension: `missing` (never set up, or its Python is gone), `current`, or
 * `outdated` — made by another version of the extension or from another wheel, so the wheel it carries must be
 * installed again.
 */
export function envState(stamp: EnvStamp | undefined, extensionVersion: string, wheel: string | undefined): 'missing' | 'current' | 'outdated' {
  if (!stamp) return 'missing';
  return stamp.extension === extensionVersion && (!wheel || stamp.wheel === wheel) ? 'current' : 'outdated';
}

/** The wheel a packaged extension carries (`server/streamed_lgm-<version>-py3-none-any.whl`), if any. */
export function bundledWheel(files: string[]): string | undefined {
  const prefix = DISTRIBUTION.replace(/-/g, '_') + '-';
  return files.filter((f) => f.startsWith(prefix) && f.endsWith('.whl')).sort().pop();
}

/** The last line of a failure that says something: `ModuleNotFoundError: No module named 'lsprotocol'`. */
export function lastLine(text: string, max = 300): string {
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '');
  const line = lines.pop() ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** The progress message for a line pip prints, or undefined for the lines a person need not read. */
export function pipStep(line: string): string | undefined {
  const t = line.trim();
  const list = /^(Installing collected packages:|Successfully installed)\s+(.*)$/.exec(t);
  if (list) return `${list[1].startsWith('Installing') ? 'installing' : 'installed'} ${list[2]}`;
  const one = /^(Collecting|Downloading|Using cached|Processing)\s+(\S+)/.exec(t);
  return one ? `${one[1].toLowerCase()} ${path.basename(one[2])}` : undefined;
}
