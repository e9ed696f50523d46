'use strict';
// Parses the GraphQL that prisma-client-py's query builder writes (prisma/_builder.py):
//
//   mutation {
//     result: createOneUser
//     (
//       data: { name: "ana" tags: ["a", "b"] }
//     )
//     { id name posts(where: {...}) { id } _count { _all } }
//   }
//
// Argument values are JSON literals (the builder writes them with json.dumps), objects are
// GraphQL objects (unquoted keys, no commas needed), lists are bracketed. Nothing else of GraphQL
// (variables, fragments, directives) is ever sent, so nothing else is accepted.

class GraphQLSyntaxError extends Error {}

const PUNCT = new Set(['{', '}', '(', ')', '[', ']', ':']);
const NAME = /[_A-Za-z][_0-9A-Za-z]*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING = /"(?:[^"\\]|\\.)*"/y;
const SPACE = /[\s,]+/y; // GraphQL treats commas as white space

function tokenize(text) {
  const tokens = [];
  let i = 0;
  const at = (re) => {
    re.lastIndex = i;
    const m = re.exec(text);
    return m ? m[0] : null;
  };
  while (i < text.length) {
    const space = at(SPACE);
    if (space) {
      i += space.length;
      continue;
    }
    const c = text[i];
    if (PUNCT.has(c)) {
      tokens.push({ kind: c, pos: i });
      i += 1;
      continue;
    }
    let m;
    if (c === '"' && (m = at(STRING))) {
      tokens.push({ kind: 'value', value: JSON.parse(m), pos: i });
    } else if ((m = at(NUMBER))) {
      tokens.push({ kind: 'value', value: Number(m), pos: i });
    } else if ((m = at(NAME))) {
      tokens.push({ kind: 'name', value: m, pos: i });
    } else {
      throw new GraphQLSyntaxError(`unexpected character ${JSON.stringify(c)} at ${i}`);
    }
    i += m.length;
  }
  return tokens;
}

class Parser {
  constructor(text) {
    this.tokens = tokenize(text);
    this.i = 0;
  }

  peek() {
    return this.tokens[this.i];
  }

  next() {
    const t = this.tokens[this.i++];
    if (!t) throw new GraphQLSyntaxError('unexpected end of query');
    return t;
  }

  expect(kind) {
    const t = this.next();
    if (t.kind !== kind) throw new GraphQLSyntaxError(`expected ${kind} at ${t.pos}, got ${t.kind} ${t.value ?? ''}`);
    return t;
  }

  is(kind) {
    const t = this.peek();
    return t !== undefined && t.kind === kind;
  }

  document() {
    const op = this.expect('name').value;
    if (op !== 'query' && op !== 'mutation') throw new GraphQLSyntaxError(`unknown operation ${op}`);
    const fields = this.selectionSet();
    if (this.peek()) throw new GraphQLSyntaxError(`unexpected ${this.peek().kind} after the operation`);
    return { operation: op, fields };
  }

  // { field field(args) { ... } alias: field ... }
  selectionSet() {
    this.expect('{');
    const fields = [];
    while (!this.is('}')) fields.push(this.field());
    this.expect('}');
    return fields;
  }

  field() {
    let name = this.expect('name').value;
    let alias = name;
    if (this.is(':')) {
      this.next();
      name = this.expect('name').value;
    }
    const args = this.is('(') ? this.args() : {};
    const selection = this.is('{') ? this.selectionSet() : null;
    return { alias, name, args, selection };
  }

  args() {
    this.expect('(');
    const args = {};
    while (!this.is(')')) {
      const key = this.expect('name').value;
      this.expect(':');
      args[key] = this.value();
    }
    this.expect(')');
    return args;
  }

  value() {
    const t = this.next();
    if (t.kind === 'value') return t.value;
    if (t.kind === 'name') {
      if (t.value === 'true') return true;
      if (t.value === 'false') return false;
      if (t.value === 'null') return null;
      return t.value; // an enum value written bare
    }
    if (t.kind === '[') {
      const list = [];
      while (!this.is(']')) list.push(this.value());
      this.next();
      return list;
    }
    if (t.kind === '{') {
      const obj = {};
      while (!this.is('}')) {
        const key = this.expect('name').value;
        this.expect(':');
        obj[key] = this.value();
      }
      this.next();
      return obj;
    }
    throw new GraphQLSyntaxError(`unexpected ${t.kind} at ${t.pos}`);
  }
}

function parse(text) {
  return new Parser(text).document();
}

module.exports = { parse, GraphQLSyntaxError };
