'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { translateBody, translateQuery, translateResult, errorAnswer, TranslationError } = require('../lib/translate');
const { testIndex } = require('./fixtures');

test('a create names the model and action and tags Json, DateTime, BigInt, Decimal and Bytes values', () => {
  const { request } = translateQuery(testIndex(), `mutation {
  result: createOneUser
  (
    data: {
      id: "u1"
      name: "ana"
      meta: "{\\"a\\": 1}"
      born: "2030-01-02T03:04:05+00:00"
      big: 9007199254740
      amount: "12.50"
      blob: "AAE="
      tags: {
        set: [
          "x",
          "y"]
      }
      spend: 0.5
    }
  )
  {
    id
    meta
  }
}`);
  assert.equal(request.modelName, 'User');
  assert.equal(request.action, 'createOne');
  assert.deepEqual(request.query.arguments.data, {
    id: 'u1',
    name: 'ana',
    meta: { $type: 'Json', value: '{"a": 1}' },
    born: { $type: 'DateTime', value: '2030-01-02T03:04:05+00:00' },
    big: { $type: 'BigInt', value: '9007199254740' },
    amount: { $type: 'Decimal', value: '12.50' },
    blob: { $type: 'Bytes', value: 'AAE=' },
    tags: { set: ['x', 'y'] },
    spend: 0.5,
  });
  assert.deepEqual(request.query.selection, { id: true, meta: true });
});

test('filters are tagged through nested where inputs, lists of them and update operations', () => {
  const { request } = translateQuery(testIndex(), `query {
  result: findManyUser
  (
    where: {
      AND: [
        {
          born: {
            gt: "2020-01-01T00:00:00+00:00"
          }
        },
        {
          big: {
            in: [
              1,
              2]
          }
        }]
      name: "ana"
    }
    take: 5
  )
  {
    id
  }
}`);
  assert.equal(request.action, 'findMany');
  assert.deepEqual(request.query.arguments, {
    where: {
      AND: [
        { born: { gt: { $type: 'DateTime', value: '2020-01-01T00:00:00+00:00' } } },
        { big: { in: [{ $type: 'BigInt', value: '1' }, { $type: 'BigInt', value: '2' }] } },
      ],
      name: 'ana',
    },
    take: 5,
  });
  const update = translateQuery(testIndex(), 'mutation { result: updateManyUser(where: {} data: { spend: { increment: 1.5 } big: { increment: 2 } }) { count } }');
  assert.equal(update.request.action, 'updateMany');
  assert.deepEqual(update.request.query.arguments.data, {
    spend: { increment: 1.5 },
    big: { increment: { $type: 'BigInt', value: '2' } },
  });
  assert.deepEqual(update.request.query.selection, { count: true });
});

test('an included relation becomes a nested selection with its own tagged arguments', () => {
  const { request } = translateQuery(testIndex(), `query {
  result: findUniqueUserOrThrow
  (
    where: { id: "u1" }
  )
  {
    id
    posts(
      where: { id: { gt: 3 } }
      take: 2
    )
    {
      id
      title
    }
    _count {
      posts
    }
  }
}`);
  assert.equal(request.action, 'findUniqueOrThrow');
  assert.deepEqual(request.query.selection, {
    id: true,
    posts: { arguments: { where: { id: { gt: 3 } }, take: 2 }, selection: { id: true, title: true } },
    _count: { arguments: {}, selection: { posts: true } },
  });
});

test('answers are keyed by the alias and typed values come back bare', () => {
  const { shape } = translateQuery(testIndex(), 'query { result: findManyUser { id born meta big posts { id } } }');
  const answer = {
    data: {
      findManyUser: [{
        id: 'u1',
        born: { $type: 'DateTime', value: '2030-01-02T03:04:05.000Z' },
        meta: { $type: 'Json', value: '{"a":1}' },
        big: { $type: 'BigInt', value: '5' },
        posts: [{ id: 1 }],
      }],
    },
  };
  assert.deepEqual(translateResult(shape, answer), {
    data: { result: [{ id: 'u1', born: '2030-01-02T03:04:05.000Z', meta: '{"a":1}', big: '5', posts: [{ id: 1 }] }] },
  });
});

test('nested aliases are restored on the way back', () => {
  const { request, shape } = translateQuery(testIndex(), 'query { result: findFirstUser { key: id writings: posts { heading: title } } }');
  assert.deepEqual(request.query.selection, { id: true, posts: { arguments: {}, selection: { title: true } } });
  const answer = { data: { findFirstUser: { id: 'u1', posts: [{ title: 't' }] } } };
  assert.deepEqual(translateResult(shape, answer), { data: { result: { key: 'u1', writings: [{ heading: 't' }] } } });
});

test('raw queries keep their arguments and their typed rows untouched', () => {
  const { request, finish } = translateBody(testIndex(), {
    query: 'mutation {\n  result: queryRaw\n  (\n    query: "SELECT $1::text AS v"\n    parameters: "[\\"x\\"]"\n  )\n}',
    variables: {},
  });
  assert.deepEqual(request, { action: 'queryRaw', query: { arguments: { query: 'SELECT $1::text AS v', parameters: '["x"]' }, selection: {} } });
  const rows = { columns: ['v'], types: ['json'], rows: [[{ $type: 'x', value: 1 }]] };
  assert.deepEqual(finish({ data: { queryRaw: rows } }), { data: { result: rows } });
  const exec = translateBody(testIndex(), { query: 'mutation { result: executeRaw(query: "DELETE FROM x" parameters: "[]") }' });
  assert.equal(exec.request.action, 'executeRaw');
  assert.deepEqual(exec.finish({ data: { executeRaw: 3 } }), { data: { result: 3 } });
});

test('a batch becomes the JSON protocol batch, in a transaction when asked, answered item by item', () => {
  const body = {
    batch: [
      { query: 'mutation { result: deleteManyPost(where: {}) { count } }', variables: {} },
      { query: 'mutation { result: createOnePost(data: { title: "t" authorId: "u1" }) { id } }', variables: {} },
    ],
    transaction: true,
  };
  const { request, finish } = translateBody(testIndex(), body);
  assert.deepEqual(request.transaction, {});
  assert.deepEqual(request.batch.map((q) => [q.modelName, q.action]), [['Post', 'deleteMany'], ['Post', 'createOne']]);
  const answer = { batchResult: [{ data: { deleteManyPost: { count: 2 } } }, { data: { createOnePost: { id: 7 } } }] };
  assert.deepEqual(finish(answer), { batchResult: [{ data: { result: { count: 2 } } }, { data: { result: { id: 7 } } }] });
  assert.equal(translateBody(testIndex(), { ...body, transaction: false }).request.transaction, undefined);
});

test("the engine's errors pass through in the shape the client maps to its exceptions", () => {
  const { shape } = translateQuery(testIndex(), 'mutation { result: createOneUser(data: { id: "u1" }) { id } }');
  const unique = {
    errors: [{ error: 'Unique constraint failed', user_facing_error: { is_panic: false, message: 'Unique constraint failed on the fields: (`id`)', meta: { target: ['id'] }, error_code: 'P2002' } }],
  };
  assert.deepEqual(translateResult(shape, unique), unique);
});

test('an operation the schema does not have is refused, and such errors carry no error code', () => {
  assert.throws(() => translateQuery(testIndex(), 'query { result: findManyNothing { id } }'), TranslationError);
  assert.throws(() => translateBody(testIndex(), { nothing: true }), /neither query nor batch/);
  const answer = errorAnswer('cannot translate');
  assert.equal(answer.errors[0].user_facing_error.message, 'cannot translate');
  assert.equal('error_code' in answer.errors[0].user_facing_error, false);
});
