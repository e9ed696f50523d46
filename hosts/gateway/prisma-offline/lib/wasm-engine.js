'use strict';
// Loads Prisma's WebAssembly query engine (postgresql build) and connects it to PostgreSQL
// through @prisma/adapter-pg. Works on Node 18 and 20.
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const pg = require('pg');
const { PrismaPg } = require('@prisma/adapter-pg');
const { bindAdapter } = require('@prisma/driver-adapter-utils');
const { withTextColumns } = require('./pg-text-columns');

const WASM_DIR = path.dirname(require.resolve('@prisma/query-engine-wasm/postgresql/query_engine_bg.wasm'));

let loaded = null;

// The package's entry does `import * as wasm from "./query_engine_bg.wasm"`, which Node cannot
// import; instantiate the module by hand and hand its exports to the wasm-bindgen glue instead.
async function loadWasm() {
  if (loaded) return loaded;
  // The glue reads `module.require` to reach node:crypto for random numbers (transaction ids);
  // it is ESM, where that name does not exist, so lend it this CommonJS module.
  if (typeof globalThis.module === 'undefined') globalThis.module = module;
  const glue = await import(pathToFileURL(path.join(WASM_DIR, 'query_engine_bg.js')).href);
  const bytes = fs.readFileSync(path.join(WASM_DIR, 'query_engine_bg.wasm'));
  const { instance } = await WebAssembly.instantiate(bytes, { './query_engine_bg.js': glue });
  glue.__wbg_set_wasm(instance.exports);
  loaded = glue;
  return glue;
}

// Splits Prisma's `?schema=` (the PostgreSQL schema holding the tables) from what pg reads.
function poolOptions(url) {
  const u = new URL(url);
  const schema = u.searchParams.get('schema') || undefined;
  // Prisma-only parameters that pg would pass to the server as unknown options.
  for (const key of ['schema', 'connection_limit', 'pool_timeout', 'connect_timeout', 'socket_timeout', 'pgbouncer', 'statement_cache_size']) {
    u.searchParams.delete(key);
  }
  const limit = Number(new URL(url).searchParams.get('connection_limit')) || 10;
  return { pool: { connectionString: u.toString(), max: limit }, schema };
}

async function startEngine({ datamodel, url, logLevel = 'error' }) {
  const glue = await loadWasm();
  const { pool: poolConfig, schema } = poolOptions(url);
  const pool = withTextColumns(new pg.Pool(poolConfig));
  const adapter = bindAdapter(new PrismaPg(pool, { schema }));
  const engine = new glue.QueryEngine({ datamodel, logLevel, logQueries: false }, () => {}, adapter);
  await engine.connect('{}');
  return {
    engine,
    version: glue.getBuildTimeInfo(),
    async close() {
      await engine.disconnect('{}');
      await pool.end();
    },
  };
}

module.exports = { loadWasm, startEngine };
