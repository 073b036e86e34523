#!/usr/bin/env node
// Grammar tests: unit assertions over a corpus of tricky lines (grammars/tests/unit/*.test.lgm), snapshot tests
// over our own samples (grammars/tests/snap/*.lgm) and over every examples/*.lgm of the repository (their snapshots
// live in grammars/tests/snap/examples/), and a check that no example line tokenizes as invalid.
//   node scripts/grammar-tests.mjs            run
//   node scripts/grammar-tests.mjs --update   rewrite the snapshots
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..');
const grammarPath = path.join(repo, 'grammars', 'streamed.tmLanguage.json');
const testsDir = path.join(repo, 'grammars', 'tests');
const update = process.argv.includes('--update');
const bin = (name) => path.join(ext, 'node_modules', '.bin', name);

let failures = 0;
let passed = 0;
function run(label, cmd, args) {
  console.log(`\n== ${label}`);
  const r = spawnSync(cmd, args, { cwd: repo, stdio: 'inherit' });
  if (r.status !== 0) { failures++; console.error(`FAILED: ${label}`); } else { passed++; }
}

// 0. The grammar is valid JSON with the scope the extension declares.
const grammar = JSON.parse(fs.readFileSync(grammarPath, 'utf8'));
if (grammar.scopeName !== 'source.streamed') { console.error('grammar scopeName must be source.streamed'); process.exit(1); }

// 1. Unit assertions.
run('unit assertions (grammars/tests/unit)', bin('vscode-tmgrammar-test'),
  ['-g', grammarPath, path.relative(repo, path.join(testsDir, 'unit')) + '/*.test.lgm']);

// 2. Snapshots: our samples, and copies of the repository's examples.
const exDir = path.join(repo, 'examples');
const snapEx = path.join(testsDir, 'snap', 'examples');
fs.mkdirSync(snapEx, { recursive: true });
const examples = fs.existsSync(exDir) ? fs.readdirSync(exDir).filter((f) => f.endsWith('.lgm')).sort() : [];
for (const f of examples) fs.copyFileSync(path.join(exDir, f), path.join(snapEx, f));
const fresh = examples.filter((f) => !fs.existsSync(path.join(snapEx, f + '.snap')));
console.log(`\nexamples found: ${examples.length}${examples.length ? ' (' + examples.join(', ') + ')' : ''}`);
const snapArgs = ['-s', 'source.streamed', '-g', grammarPath];
if (update) snapArgs.push('--updateSnapshot');
const rel = path.relative(repo, path.join(testsDir, 'snap'));
run('snapshots (grammars/tests/snap)', bin('vscode-tmgrammar-snap'), [...snapArgs, `${rel}/*.lgm`]);
if (examples.length) run('snapshots of examples/*.lgm', bin('vscode-tmgrammar-snap'), [...snapArgs, `${rel}/examples/*.lgm`]);
if (fresh.length) console.log(`new snapshots written for ${fresh.join(', ')}: review and commit grammars/tests/snap/examples/*.snap`);

// 3. No example (nor sample) tokenizes as invalid.illegal.
const require = createRequire(path.join(ext, 'node_modules', 'vscode-tmgrammar-test', 'package.json'));
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');
const wasm = fs.readFileSync(require.resolve('vscode-oniguruma').replace(/main\.js$/, 'onig.wasm'));
await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
const registry = new vsctm.Registry({
  onigLib: Promise.resolve({ createOnigScanner: (p) => new oniguruma.OnigScanner(p), createOnigString: (s) => new oniguruma.OnigString(s) }),
  loadGrammar: async (scope) => (scope === 'source.streamed' ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath) : null),
});
const g = await registry.loadGrammar('source.streamed');
console.log('\n== no invalid tokens in samples and examples');
const docs = [
  ...fs.readdirSync(path.join(testsDir, 'snap')).filter((f) => f.endsWith('.lgm')).map((f) => path.join(testsDir, 'snap', f)),
  ...examples.map((f) => path.join(exDir, f)),
];
let bad = 0;
for (const file of docs) {
  let stack = vsctm.INITIAL;
  const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
  lines.forEach((line, i) => {
    const r = g.tokenizeLine(line, stack);
    stack = r.ruleStack;
    for (const t of r.tokens) {
      if (t.scopes.some((s) => s.startsWith('invalid.'))) {
        bad++;
        if (bad <= 20) console.error(`${path.relative(repo, file)}:${i + 1}:${t.startIndex + 1}: invalid token '${line.slice(t.startIndex, t.endIndex)}'`);
      }
    }
  });
}
if (bad) { failures++; console.error(`FAILED: ${bad} invalid tokens`); } else { passed++; console.log(`${docs.length} documents clean`); }

console.log(`\ngrammar: ${passed} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
