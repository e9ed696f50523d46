'use strict';
// adapter-pg 5.17 refuses result columns of types it has no mapping for (`name`, `name[]`,
// `interval`, ...): "Failed to deserialize column of type 'Unknown'". LiteLLM reads such columns
// in raw queries (its view check aggregates pg_views.viewname, a `name`), so this reads them as
// text, the way the native engine returns them.
const { parse: parseArray } = require('postgres-array');

const TEXT = 25;
const TEXT_ARRAY = 1009;
// oid -> [oid the adapter is told, parser for the text the server sends]
const AS_TEXT = {
  19: [TEXT, (s) => s], // name
  1003: [TEXT_ARRAY, (s) => parseArray(s)], // name[]
  1186: [TEXT, (s) => s], // interval
  1187: [TEXT_ARRAY, (s) => parseArray(s)], // interval[]
  1028: [TEXT_ARRAY, (s) => parseArray(s)], // oid[]
  22: [TEXT, (s) => s], // int2vector
  30: [TEXT, (s) => s], // oidvector
  24: [TEXT, (s) => s], // regproc
  2205: [TEXT, (s) => s], // regclass
  194: [TEXT, (s) => s], // pg_node_tree
  18: [TEXT, (s) => s], // "char"
};

// Only the adapter's own calls are rewritten: a config object in array row mode with its type
// parsers, and no callback (pg's Pool.query calls the client's query with one: passed through).
function wrapQuery(target) {
  const query = target.query.bind(target);
  target.query = (config, ...rest) => {
    const fromAdapter = config && typeof config === 'object' && config.types && config.rowMode === 'array'
      && !rest.some((a) => typeof a === 'function');
    if (!fromAdapter) return query(config, ...rest);
    const inner = config.types.getTypeParser;
    const types = {
      getTypeParser: (oid, format) => (AS_TEXT[oid] && format !== 'binary' ? AS_TEXT[oid][1] : inner(oid, format)),
    };
    return query({ ...config, types }, ...rest).then((result) => {
      for (const field of result.fields) {
        if (AS_TEXT[field.dataTypeID]) field.dataTypeID = AS_TEXT[field.dataTypeID][0];
      }
      return result;
    });
  };
  return target;
}

// Wraps the pool's queries and those of every client it hands out (transactions run on those).
function withTextColumns(pool) {
  wrapQuery(pool);
  const connect = pool.connect.bind(pool);
  pool.connect = async (...args) => {
    if (args.length) return connect(...args);
    const client = await connect();
    if (!client.__spearTextColumns) {
      wrapQuery(client);
      client.__spearTextColumns = true;
    }
    return client;
  };
  return pool;
}

module.exports = { withTextColumns, AS_TEXT };
