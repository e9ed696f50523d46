'use strict';
// The HTTP interface of Prisma's native query engine as prisma-client-py drives it
// (prisma/engine/_query.py): GET /status, POST / (one query or {"batch": [...]}, in a transaction
// when the X-transaction-id header names one), POST /transaction/start, /transaction/<id>/commit
// and /transaction/<id>/rollback.
const http = require('node:http');
const { translateBody, errorAnswer } = require('./translate');

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res, status, body) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

const TX_PATH = /^\/transaction\/([^/]+)\/(commit|rollback)$/;

// `engine` is the wasm QueryEngine; `index` the DMMF index; `onFatal` is told when the engine
// itself broke (a trap in the WebAssembly module leaves it unusable).
function createServer({ engine, index, onFatal = () => {} }) {
  async function handle(req, res) {
    const url = new URL(req.url, 'http://engine');
    if (req.method === 'GET' && url.pathname === '/status') return send(res, 200, { status: 'ok' });
    if (req.method !== 'POST') return send(res, 404, errorAnswer(`no route ${req.method} ${url.pathname}`));
    const text = await readBody(req);
    if (url.pathname === '/') {
      let translated;
      try {
        translated = translateBody(index, JSON.parse(text));
      } catch (err) {
        // Answered like the engine answers a query it cannot validate, so the client raises.
        return send(res, 200, errorAnswer(`prisma-offline cannot translate the query: ${err.message}`));
      }
      const txId = req.headers['x-transaction-id'] || undefined;
      const answer = JSON.parse(await engine.query(JSON.stringify(translated.request), '{}', txId));
      return send(res, 200, translated.finish(answer));
    }
    if (url.pathname === '/transaction/start') {
      // Same body in both protocols: {max_wait, timeout, isolation_level}.
      return send(res, 200, await engine.startTransaction(text || '{}', '{}'));
    }
    const tx = TX_PATH.exec(url.pathname);
    if (tx) {
      const [, id, verb] = tx;
      const answer = verb === 'commit' ? await engine.commitTransaction(id, '{}') : await engine.rollbackTransaction(id, '{}');
      return send(res, 200, answer);
    }
    return send(res, 404, errorAnswer(`no route POST ${url.pathname}`));
  }

  return http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      process.stderr.write(`prisma-offline: ${req.method} ${req.url} failed: ${err && err.stack ? err.stack : err}\n`);
      if (err instanceof WebAssembly.RuntimeError) onFatal(err);
      if (!res.headersSent) send(res, 500, errorAnswer(String(err && err.message ? err.message : err)));
    });
  });
}

module.exports = { createServer };
