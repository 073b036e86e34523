import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkSummary, parseCheckLine } from '../src/check';

test('a line of streamed check is a problem; any other line is not', () => {
  assert.deepEqual(parseCheckLine('models/tiny.lgm:61:19: error: unexpected `timse` after the end of the statement'), {
    file: 'models/tiny.lgm', line: 61, column: 19, severity: 'error', message: 'unexpected `timse` after the end of the statement',
  });
  assert.equal(parseCheckLine('tiny.lgm:3:1: warning: layer 4 is not one program with layer 0 (attention): …\r')?.severity, 'warning');
  assert.equal(parseCheckLine('Traceback (most recent call last):'), undefined);
  assert.equal(parseCheckLine('tiny.lgm: 2 kinds'), undefined);
});

test('a finished check says what it found in a sentence, not an exit code', () => {
  const e = parseCheckLine('t.lgm:1:1: error: x')!;
  const w = parseCheckLine('t.lgm:2:1: warning: y')!;
  assert.equal(checkSummary([], 't.lgm'), 'streamed check: no problems in t.lgm');
  assert.equal(checkSummary([e, e, w], 't.lgm'), 'streamed check: 2 errors and 1 warning in t.lgm (in the Problems panel)');
  assert.equal(checkSummary([w], 't.lgm'), 'streamed check: 1 warning in t.lgm (in the Problems panel)');
});
