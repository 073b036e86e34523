#!/usr/bin/env node
// Builds the extension: copies the grammar (its single source is ../grammars/) into syntaxes/, bundles
// src/extension.ts with esbuild into dist/extension.js. --tests also bundles test/*.test.ts into out/test/.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const production = process.argv.includes('--production');
const tests = process.argv.includes('--tests');

fs.mkdirSync(path.join(ext, 'syntaxes'), { recursive: true });
fs.copyFileSync(path.join(ext, '..', 'grammars', 'streamed.tmLanguage.json'), path.join(ext, 'syntaxes', 'streamed.tmLanguage.json'));

await esbuild.build({
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
});

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
console.log(`built dist/extension.js${tests ? ' and out/test/' : ''}${production ? ' (production)' : ''}`);
