'use strict';
// The schema's DMMF (from prisma-schema-wasm's get_dmmf, the same description the Prisma CLI
// generates clients from), indexed for the translator: which model and JSON-protocol action a
// GraphQL root field names, the input types of every argument and input field (to tag values),
// and the output type of every field (to follow nested selections).

function getDmmf(schemaText) {
  // Required lazily: the unit tests build an index from a small DMMF without the wasm module.
  const { get_dmmf: wasmGetDmmf } = require('@prisma/prisma-schema-wasm');
  return JSON.parse(wasmGetDmmf(JSON.stringify({ prismaSchema: schemaText })));
}

function byName(list) {
  const map = new Map();
  for (const item of list || []) map.set(item.name, item);
  return map;
}

function indexDmmf(dmmf) {
  const { schema, mappings } = dmmf;
  const inputTypes = new Map();
  for (const ns of Object.values(schema.inputObjectTypes)) {
    for (const t of ns) inputTypes.set(t.name, byName(t.fields));
  }
  const outputTypes = new Map();
  for (const ns of Object.values(schema.outputObjectTypes)) {
    for (const t of ns) outputTypes.set(t.name, byName(t.fields));
  }
  // GraphQL root field name (findUniqueUser) -> {modelName, action (findUnique)}.
  const operations = new Map();
  for (const ops of mappings.modelOperations) {
    for (const [action, fieldName] of Object.entries(ops)) {
      if (action !== 'model' && fieldName) operations.set(fieldName, { modelName: ops.model, action });
    }
  }
  for (const kind of ['read', 'write']) {
    for (const action of mappings.otherOperations[kind] || []) operations.set(action, { modelName: undefined, action });
  }
  // The root fields' own descriptions (args, outputType) live on the Query and Mutation types.
  const rootFields = new Map([...(outputTypes.get('Query') || []), ...(outputTypes.get('Mutation') || [])]);
  return { inputTypes, outputTypes, operations, rootFields };
}

module.exports = { getDmmf, indexDmmf };
