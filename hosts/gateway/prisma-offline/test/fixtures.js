'use strict';
// A small schema with every value type the translator tags, indexed from its real DMMF
// (prisma-schema-wasm, as the engine does at start).
const { getDmmf, indexDmmf } = require('../lib/dmmf');

const SCHEMA = `
datasource db {
  provider = "postgresql"
  url      = env("DATABASE_URL")
}

model User {
  id      String    @id
  name    String?
  meta    Json?
  born    DateTime?
  big     BigInt?
  amount  Decimal?
  blob    Bytes?
  tags    String[]
  spend   Float     @default(0)
  posts   Post[]
}

model Post {
  id       Int    @id @default(autoincrement())
  title    String
  authorId String
  author   User   @relation(fields: [authorId], references: [id])
}
`;

let index;
function testIndex() {
  if (!index) index = indexDmmf(getDmmf(SCHEMA));
  return index;
}

module.exports = { SCHEMA, testIndex };
