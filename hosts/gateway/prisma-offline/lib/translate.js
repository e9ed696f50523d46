'use strict';
// Translates prisma-client-py's GraphQL requests into Prisma's JSON protocol (the only one the
// WebAssembly engine speaks), and the engine's answers back into what the GraphQL client reads.
//
// Requests: the root field names the model and action (via the DMMF mappings); values whose
// input type is Json, DateTime, Decimal, BigInt or Bytes get their `{"$type": ..., "value": ...}`
// tag; a selection `field` becomes `field: true`, a nested one `{arguments, selection}`.
// Answers: the JSON protocol keys results by field name, the GraphQL client by alias (`result`),
// and tags typed values, which the GraphQL protocol sends bare.
const { parse } = require('./graphql');

class TranslationError extends Error {}

// Scalar input types whose values the JSON protocol wants tagged.
const TAGGED = ['Json', 'DateTime', 'Decimal', 'BigInt', 'Bytes'];
const RAW_ACTIONS = new Set(['queryRaw', 'executeRaw']);

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function tagScalar(value, scalarTypes) {
  const tag = TAGGED.find((t) => scalarTypes.includes(t));
  if (!tag) return value;
  if (tag === 'Json') {
    // The builder sends Json as a JSON string already; anything else is serialised here.
    return { $type: 'Json', value: typeof value === 'string' ? value : JSON.stringify(value) };
  }
  if (typeof value === 'boolean') return value;
  return { $type: tag, value: String(value) };
}

// Tags `value` for a position that accepts any of `types` (DMMF inputTypes entries).
function tagValue(index, value, types) {
  if (value === null || value === undefined || !types || types.length === 0) return value;
  if (Array.isArray(value)) {
    const listTypes = types.filter((t) => t.isList);
    const elementTypes = (listTypes.length ? listTypes : types).map((t) => ({ ...t, isList: false }));
    return value.map((v) => tagValue(index, v, elementTypes));
  }
  const objectTypes = types.filter((t) => t.location === 'inputObjectTypes');
  const scalarTypes = types.filter((t) => t.location === 'scalar').map((t) => t.type);
  if (isPlainObject(value)) {
    if (objectTypes.length === 0) return tagScalar(value, scalarTypes);
    return tagObject(index, value, objectTypes.map((t) => t.type));
  }
  return tagScalar(value, scalarTypes);
}

// Tags each field of an input object that may be any of the input types `typeNames` (a where
// clause may be `UserWhereInput` or `UserWhereUniqueInput`: a field's types are the union).
function tagObject(index, obj, typeNames) {
  const out = {};
  for (const [key, v] of Object.entries(obj)) {
    const fieldTypes = [];
    for (const name of typeNames) {
      const field = index.inputTypes.get(name)?.get(key);
      if (field) fieldTypes.push(...field.inputTypes);
    }
    out[key] = tagValue(index, v, fieldTypes);
  }
  return out;
}

function tagArguments(index, args, argDefs) {
  const out = {};
  for (const [key, v] of Object.entries(args)) {
    const def = argDefs?.get?.(key);
    out[key] = def ? tagValue(index, v, def.inputTypes) : v;
  }
  return out;
}

// A GraphQL selection set of an output type -> the JSON protocol's selection; also returns the
// alias of each field that was renamed, to undo on the way back.
function translateSelection(index, fields, outputTypeName) {
  const selection = {};
  const renames = {};
  const outputFields = index.outputTypes.get(outputTypeName);
  for (const f of fields) {
    if (f.name in selection) throw new TranslationError(`field ${f.name} selected twice`);
    const def = outputFields?.get(f.name);
    let nestedRenames = {};
    if (f.selection === null) {
      selection[f.name] = true;
    } else {
      const argDefs = def ? new Map(def.args.map((a) => [a.name, a])) : null;
      const nested = translateSelection(index, f.selection, def?.outputType?.type);
      selection[f.name] = { arguments: tagArguments(index, f.args, argDefs), selection: nested.selection };
      nestedRenames = nested.renames;
    }
    if (f.alias !== f.name || Object.keys(nestedRenames).length) {
      renames[f.name] = { alias: f.alias, nested: nestedRenames };
    }
  }
  return { selection, renames };
}

// One GraphQL query text -> { request (JSON protocol), shape (what undoes the renames) }.
function translateQuery(index, text) {
  const doc = parse(text);
  if (doc.fields.length !== 1) throw new TranslationError(`expected one root field, got ${doc.fields.length}`);
  const [root] = doc.fields;
  const op = index.operations.get(root.name);
  if (!op) throw new TranslationError(`unknown operation ${root.name}`);
  const def = index.rootFields.get(root.name);
  const request = { action: op.action, query: {} };
  if (op.modelName) request.modelName = op.modelName;
  if (RAW_ACTIONS.has(op.action)) {
    // The raw arguments (query, parameters as a JSON string) mean the same in both protocols.
    request.query = { arguments: root.args, selection: {} };
    return { request, shape: { alias: root.alias, field: op.action, raw: true } };
  }
  const argDefs = def ? new Map(def.args.map((a) => [a.name, a])) : null;
  const { selection, renames } = translateSelection(index, root.selection || [], def?.outputType?.type);
  request.query = { arguments: tagArguments(index, root.args, argDefs), selection };
  // The engine keys the answer by the GraphQL field name (createOneUser), not the action.
  return { request, shape: { alias: root.alias, field: root.name, renames } };
}

// Values tagged by the engine, `{"$type": "DateTime", "value": "..."}`, become the bare value.
function untag(value, renames) {
  if (Array.isArray(value)) return value.map((v) => untag(v, renames));
  if (!isPlainObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 2 && typeof value.$type === 'string' && 'value' in value) return value.value;
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    const rename = renames?.[k];
    out[rename ? rename.alias : k] = untag(v, rename?.nested);
  }
  return out;
}

// The engine's answer to one query -> `{"data": {"<alias>": ...}}`; errors pass through (they
// have the same shape in both protocols: error, user_facing_error {error_code, message, meta}).
function translateResult(shape, answer) {
  if (!answer || !answer.data) return answer;
  const value = answer.data[shape.field];
  return { data: { [shape.alias]: shape.raw ? value : untag(value, shape.renames) } };
}

// prisma-client-py's request body -> { request, finish(answer) -> what the client reads }.
function translateBody(index, body) {
  if (Array.isArray(body.batch)) {
    const parts = body.batch.map((q) => translateQuery(index, q.query));
    const request = { batch: parts.map((p) => p.request) };
    if (body.transaction) request.transaction = {};
    return {
      request,
      finish: (answer) => {
        if (!answer || !Array.isArray(answer.batchResult)) return answer;
        return { batchResult: answer.batchResult.map((r, i) => translateResult(parts[i].shape, r)) };
      },
    };
  }
  if (typeof body.query !== 'string') throw new TranslationError('request has neither query nor batch');
  const { request, shape } = translateQuery(index, body.query);
  return { request, finish: (answer) => translateResult(shape, answer) };
}

// The shape the client turns into an exception (prisma/engine/utils.py handle_response_errors):
// no error_code, so it raises DataError with this message.
function errorAnswer(message) {
  return { errors: [{ error: message, user_facing_error: { is_panic: false, message, meta: {} } }] };
}

module.exports = { translateBody, translateQuery, translateResult, tagValue, untag, errorAnswer, TranslationError };
