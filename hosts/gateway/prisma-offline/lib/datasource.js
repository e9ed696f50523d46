'use strict';
// Which database the engine connects to, resolved the way the native engine does:
// OVERWRITE_DATASOURCES (prisma-client-py sets it when the program passes a datasource) wins,
// else the schema's datasource url, a literal or env("NAME").
const { get_config: getConfig } = require('@prisma/prisma-schema-wasm');

function datasourceUrl(datamodel, env) {
  const config = JSON.parse(getConfig(JSON.stringify({ prismaSchema: datamodel, datasourceOverrides: {}, ignoreEnvVarErrors: true, env: {} })));
  const [source] = config.config.datasources;
  if (!source) throw new Error('the schema declares no datasource');
  if (env.OVERWRITE_DATASOURCES) {
    const override = JSON.parse(env.OVERWRITE_DATASOURCES).find((d) => d.name === source.name);
    if (override && override.url) return override.url;
  }
  if (source.url.value) return source.url.value;
  const name = source.url.fromEnvVar;
  if (!env[name]) throw new Error(`the schema's datasource url is env("${name}"), which is not set`);
  return env[name];
}

module.exports = { datasourceUrl };
