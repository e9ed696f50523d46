'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { withTextColumns } = require('../lib/pg-text-columns');

// Records what the adapter's query reached pg with and answers like pg does for a result with a
// `name`, a `name[]` and an `interval` column: each value through the type parser chosen for it.
function fakePool(rawRows, fields) {
  const seen = [];
  const runQuery = async (config) => {
    seen.push(config);
    const rows = rawRows.map((row) => row.map((text, i) => config.types.getTypeParser(fields[i], 'text')(text)));
    return { fields: fields.map((dataTypeID, i) => ({ name: `c${i}`, dataTypeID })), rows };
  };
  const client = { query: runQuery, release() {} };
  return { seen, pool: { query: runQuery, connect: async () => client } };
}

const adapterTypes = { getTypeParser: () => (s) => `adapter:${s}` };

test('name, name[] and interval columns reach the adapter as text and text[]', async () => {
  const { pool } = fakePool([['pg_views', '{a,b}', '1 day']], [19, 1003, 1186]);
  const wrapped = withTextColumns(pool);
  const result = await wrapped.query({ text: 'SELECT', values: [], rowMode: 'array', types: adapterTypes });
  assert.deepEqual(result.fields.map((f) => f.dataTypeID), [25, 1009, 25]);
  assert.deepEqual(result.rows, [['pg_views', ['a', 'b'], '1 day']]);
});

test("other columns keep the adapter's own parsers, also on a transaction's connection", async () => {
  const { pool } = fakePool([['5']], [20]);
  const wrapped = withTextColumns(pool);
  const client = await wrapped.connect();
  const result = await client.query({ text: 'SELECT', values: [], rowMode: 'array', types: adapterTypes });
  assert.deepEqual(result.fields.map((f) => f.dataTypeID), [20]);
  assert.deepEqual(result.rows, [['adapter:5']]);
});

test("pg's own callback-style calls (Pool.query on a pooled client) pass through untouched", async () => {
  const calls = [];
  const client = { query: (...args) => calls.push(args), release() {} };
  const wrapped = withTextColumns({ query: async () => ({ fields: [], rows: [] }), connect: async () => client });
  const pooled = await wrapped.connect();
  const callback = () => {};
  pooled.query({ text: 'SELECT', rowMode: 'array', types: adapterTypes }, [], callback);
  assert.equal(calls.length, 1);
  assert.equal(calls[0][2], callback);
  assert.equal(calls[0][0].types, adapterTypes);
});
