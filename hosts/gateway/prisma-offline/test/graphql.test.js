'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { parse, GraphQLSyntaxError } = require('../lib/graphql');

// Written the way prisma-client-py's builder writes it (prisma/_builder.py).
const BUILT = `mutation {
  result: createOneUser
  (
    data: {
      id: "u\\"1"
      name: "Zoë"
      tags: [
        "a",
        "b"]
      spend: -1.5e-3
      meta: "{\\"developer\\": \\"ana\\"}"
      born: null
      posts: {
        create: {
          title: "t"
        }
      }
    }
  )
  {
    id
    name
    posts(
      where: {
        title: {
          contains: "x"
        }
      }
    )
    {
      id
    }
    _count {
      posts
    }
  }
}`;

test('a query as the builder writes it parses into fields, arguments and selections', () => {
  const doc = parse(BUILT);
  assert.equal(doc.operation, 'mutation');
  assert.equal(doc.fields.length, 1);
  const [root] = doc.fields;
  assert.equal(root.alias, 'result');
  assert.equal(root.name, 'createOneUser');
  assert.deepEqual(root.args.data, {
    id: 'u"1',
    name: 'Zoë',
    tags: ['a', 'b'],
    spend: -0.0015,
    meta: '{"developer": "ana"}',
    born: null,
    posts: { create: { title: 't' } },
  });
  assert.deepEqual(root.selection.map((f) => f.name), ['id', 'name', 'posts', '_count']);
  const posts = root.selection[2];
  assert.deepEqual(posts.args, { where: { title: { contains: 'x' } } });
  assert.deepEqual(posts.selection, [{ alias: 'id', name: 'id', args: {}, selection: null }]);
});

test('raw query parameters stay the JSON string the builder encoded twice', () => {
  const doc = parse('mutation {\n  result: queryRaw\n  (\n    query: "SELECT $1"\n    parameters: "[\\"a\\", 1]"\n  )\n}');
  assert.deepEqual(doc.fields[0].args, { query: 'SELECT $1', parameters: '["a", 1]' });
  assert.equal(doc.fields[0].selection, null);
});

test('anything outside the builder subset is refused with the position', () => {
  assert.throws(() => parse('query { result: findManyUser(where: $var) { id } }'), GraphQLSyntaxError);
  assert.throws(() => parse('subscription { x }'), /unknown operation subscription/);
  assert.throws(() => parse('query { result: findManyUser { id }'), /unexpected end/);
  assert.throws(() => parse('query { a } { b }'), /after the operation/);
});
