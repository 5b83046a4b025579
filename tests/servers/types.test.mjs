// The published types of the database stores, from the packed tarball: `tsc --strict` on
// consumers that pass the real clients (pg, redis, ioredis, node:sqlite, a D1 binding) as their
// own packages type them.
import { execFileSync } from "node:child_process";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { freshProject, ROOT } from "../helpers/pack.mjs";

let project;
before(() => {
  project = freshProject({
    extra: ["typescript", "@types/node", "@types/pg", "pg", "redis", "ioredis", "@cloudflare/workers-types"],
  });
  for (const f of ["consumer-servers.ts", "consumer-d1.ts"])
    copyFileSync(join(ROOT, "tests/servers", f), join(project, f));
});

/** Runs tsc with `compilerOptions` on `files`; throws with its output on errors. */
function tsc(files, compilerOptions) {
  const config = `tsconfig.${files[0]}.json`;
  const options = {
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    target: "es2022",
    module: "nodenext",
    moduleResolution: "nodenext",
    ...compilerOptions,
  };
  writeFileSync(join(project, config), JSON.stringify({ compilerOptions: options, files }, null, 2));
  try {
    return execFileSync(process.execPath, [join(project, "node_modules/typescript/bin/tsc"), "-p", config], {
      cwd: project,
      encoding: "utf8",
    });
  } catch (e) {
    throw new Error(`tsc ${files[0]} failed:\n${e.stdout}${e.stderr}`);
  }
}

test(
  "tsc --strict: a pg Pool and Client, node-redis and ioredis clients and a node:sqlite database are accepted as their packages type them",
  { timeout: 120_000 },
  () => {
    // skipLibCheck: the clients' own declarations are not ours to check.
    tsc(["consumer-servers.ts"], { lib: ["es2022"], types: ["node"], skipLibCheck: true });
  },
);

test("tsc --strict: a Worker passes its D1Database binding to d1Store", { timeout: 120_000 }, () => {
  tsc(["consumer-d1.ts"], { lib: ["es2022"], types: ["@cloudflare/workers-types"] });
});

test("tsc --strict: a wrong store argument fails to compile", { timeout: 120_000 }, () => {
  writeFileSync(
    join(project, "wrong-store.ts"),
    `import { redisStore } from "user-memory/redis";\nconst notAClient = { get: async () => null };\nexport const s = redisStore(notAClient);\n`,
  );
  assert.throws(
    () => tsc(["wrong-store.ts"], { lib: ["es2022"], types: ["node"], skipLibCheck: true }),
    /wrong-store\.ts.*TS2345/s,
  );
});
