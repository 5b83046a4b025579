// What the SQL stores (Postgres, SQLite, D1) share: the table name option and the statements.
//
// One table of two text columns, `key` (the primary key) and `value`. Keys compare in code
// point order in all three (SQLite's BINARY collation and Postgres's "C" collation compare the
// UTF-8 bytes), so the keys starting with a prefix are exactly those in [prefix,
// prefixEnd(prefix)) (store-util.js): `keys(prefix)` is a range scan of the primary key index.
import { invalidInput } from "./errors.js";

/** The default table name. */
export const DEFAULT_TABLE = "user_memory";

/**
 * The table option quoted for SQL: `name` or `schema.name`, each part letters, digits and
 * underscores (not starting with a digit, at most 63 characters).
 * @param {unknown} table @param {string} what the store, for the message
 */
export function quoteTable(table, what) {
  const part = "[A-Za-z_][A-Za-z0-9_]{0,62}";
  if (typeof table !== "string" || !new RegExp(`^${part}(\\.${part})?$`).test(table)) {
    throw invalidInput(
      `${what}: \`table\` must be a name of letters, digits and underscores (or schema.name), got ${JSON.stringify(table)}`,
    );
  }
  return table
    .split(".")
    .map((p) => `"${p}"`)
    .join(".");
}

/**
 * The statements of a SQLite-dialect table (SQLite, D1): the schema and one statement per
 * operation, each atomic on its own.
 * @param {string} t the quoted table name (quoteTable)
 */
export function sqliteStatements(t) {
  return {
    schema: `CREATE TABLE IF NOT EXISTS ${t} (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)`,
    get: `SELECT value FROM ${t} WHERE key = ?`,
    set: `INSERT INTO ${t} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    delete: `DELETE FROM ${t} WHERE key = ?`,
    keysFrom: `SELECT key FROM ${t} WHERE key >= ?`,
    keysRange: `SELECT key FROM ${t} WHERE key >= ? AND key < ?`,
    insert: `INSERT INTO ${t} (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
    update: `UPDATE ${t} SET value = ? WHERE key = ? AND value = ?`,
  };
}
