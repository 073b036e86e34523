#!/usr/bin/env node
// Builds the extension: copies the grammar (its single source is ../grammars/) into syntaxes/ and the language
// reference (../docs/language.md) into docs/, bundles src/extension.ts with esbuild into dist/extension.js and the
// manifest view's page script src/webview/manifestPage.ts into dist/webview.js. --tests also bundles test/*.test.ts
// into out/test/.
// --wheel builds the project's wheel (streamed-lgm, with the language server) from this checkout into server/: the
// .vsix carries it, and Streamed: Set Up Server installs it into the extension's own environment. The Python that
// builds it: $STREAMED_PYTHON, else the repository's .venv, else python3.
import { execFileSync } from 'node:child_process';
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const production = process.argv.includes('--production');
const tests = process.argv.includes('--tests');
const wheel = process.argv.includes('--wheel');

fs.mkdirSync(path.join(ext, 'syntaxes'), { recursive: true });
fs.copyFileSync(path.join(ext, '..', 'grammars', 'streamed.tmLanguage.json'), path.join(ext, 'syntaxes', 'streamed.tmLanguage.json'));
// The language reference, which the walkthrough and Streamed: Open the Language Reference show (its single source is
// ../docs/language.md).
fs.mkdirSync(path.join(ext, 'docs'), { recursive: true });
fs.copyFileSync(path.join(ext, '..', 'docs', 'language.md'), path.join(ext, 'docs', 'language.md'));

const bundled = [];
bundled.push(await esbuild.build({
  metafile: true,
  entryPoints: [path.join(ext, 'src', 'extension.ts')],
  bundle: true,
  outfile: path.join(ext, 'dist', 'extension.js'),
  external: ['vscode'],
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  sourcemap: !production,
  minify: production,
  logLevel: 'warning',
}));

// The manifest view's page script, with vega-embed (Vega, Vega-Lite and the CSP-safe expression interpreter): it runs in
// the webview, not in the extension host.
bundled.push(await esbuild.build({
  metafile: true,
  entryPoints: [path.join(ext, 'src', 'webview', 'manifestPage.ts')],
  bundle: true,
  outfile: path.join(ext, 'dist', 'webview.js'),
  format: 'iife',
  platform: 'browser',
  target: 'chrome114',
  sourcemap: !production,
  minify: production,
  legalComments: 'none',
  logLevel: 'warning',
}));

// The licences of every package the two bundles carry, beside them (the .vsix ships it): BSD and MIT code in a
// bundle keeps its notice.
const packages = new Set();
for (const r of bundled) {
  for (const input of Object.keys(r.metafile.inputs)) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input.replace(/\\/g, '/'));
    if (m) packages.add(m[1]);
  }
}
const notices = [...packages].sort().map((name) => {
  const dir = path.join(ext, 'node_modules', name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  const text = file ? fs.readFileSync(path.join(dir, file), 'utf8').trim() : `License: ${pkg.license ?? 'unknown'}`;
  return `${name} ${pkg.version}\n${'-'.repeat(name.length + 1 + String(pkg.version).length)}\n${text}\n`;
});
fs.writeFileSync(path.join(ext, 'dist', 'THIRD-PARTY-NOTICES.txt'),
  `The Streamed extension bundles these packages (dist/extension.js, dist/webview.js); their notices follow.\n\n${notices.join('\n')}`);

if (tests) {
  const dir = path.join(ext, 'test');
  const entries = fs.readdirSync(dir).filter((f) => f.endsWith('.test.ts')).map((f) => path.join(dir, f));
  fs.rmSync(path.join(ext, 'out', 'test'), { recursive: true, force: true });
  await esbuild.build({
    entryPoints: entries,
    bundle: true,
    outdir: path.join(ext, 'out', 'test'),
    external: ['vscode'],
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcemap: 'inline',
    logLevel: 'warning',
  });
}
if (wheel) {
  const repo = path.join(ext, '..');
  const venv = path.join(repo, '.venv', 'bin', 'python');
  const python = process.env.STREAMED_PYTHON || (fs.existsSync(venv) ? venv : 'python3');
  const out = path.join(ext, 'server');
  fs.rmSync(out, { recursive: true, force: true });
  execFileSync(python, ['-m', 'pip', 'wheel', '--no-deps', '--quiet', '--wheel-dir', out, repo], { stdio: 'inherit' });
  const built = fs.readdirSync(out).filter((f) => f.endsWith('.whl'));
  if (built.length !== 1) throw new Error(`expected one wheel in ${out}, found ${built.join(', ') || 'none'}`);
  console.log(`built server/${built[0]}`);
}
console.log(`built dist/extension.js${tests ? ' and out/test/' : ''}${production ? ' (production)' : ''}`);
