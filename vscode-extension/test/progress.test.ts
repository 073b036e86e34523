import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProgressMapper } from '../src/progress';

test('progress: percentages become increments, never backwards, end completes', () => {
  const m = new ProgressMapper();
  assert.deepEqual(m.map({ kind: 'begin', title: 'Lowering', message: 'parsing', percentage: 0 }), { message: 'parsing' });
  assert.deepEqual(m.map({ kind: 'report', message: 'kinds', percentage: 25 }), { message: 'kinds', increment: 25 });
  assert.deepEqual(m.map({ kind: 'report', percentage: 60 }), { increment: 35 });
  assert.deepEqual(m.map({ kind: 'report', message: 'again', percentage: 40 }), { message: 'again' });
  assert.equal(m.map({ kind: 'report' }), undefined);
  assert.deepEqual(m.map({ kind: 'end', message: 'written' }), { message: 'written', increment: 40 });
  assert.equal(m.percentage, 100);
});

test('progress: out-of-range percentages are clamped; a new begin starts over', () => {
  const m = new ProgressMapper();
  m.map({ kind: 'begin', title: 't' });
  assert.deepEqual(m.map({ kind: 'report', percentage: 250 }), { increment: 100 });
  assert.deepEqual(m.map({ kind: 'begin', title: 'second', percentage: 10 }), { message: 'second', increment: 10 });
  assert.deepEqual(m.map({ kind: 'report', percentage: -5 }), undefined);
  assert.deepEqual(m.map({ kind: 'end' }), { message: 'done', increment: 90 });
});

test('progress: garbage is ignored', () => {
  const m = new ProgressMapper();
  assert.equal(m.map(undefined as any), undefined);
  assert.equal(m.map({ kind: 'report', percentage: NaN }), undefined);
});
