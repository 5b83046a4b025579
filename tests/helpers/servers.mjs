// Real database servers for the tests and benchmarks: Postgres and Redis from Debian's packages
// (scripts/setup.sh --all installs them), each started on 127.0.0.1 on a free port with its data
// in a fresh folder under target/servers/, with a password, and stopped when the process exits.
//
//   const pg = await startPostgres();   // pg.url = postgres://postgres:<password>@127.0.0.1:<port>/postgres
//   await pg.stop(); await pg.start();  // a restart (same port, same data)
//   await pg.close();                   // stop and remove the data
//   const redis = await startRedis();   // redis.url = redis://:<password>@127.0.0.1:<port>
//
// Postgres refuses to run as root: when the tests run as root (CI), initdb and pg_ctl run as
// the `postgres` system user (runuser), and the data folder belongs to it.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./pack.mjs";

const running = new Set();
process.on("exit", () => {
  for (const s of running) s.killNow();
});

/** A TCP port nobody listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** A fresh folder under target/servers/ for a server's data. */
function dataFolder(kind) {
  const base = join(ROOT, "target", "servers");
  mkdirSync(base, { recursive: true });
  return mkdtempSync(join(base, `${kind}-`));
}

const asRoot = process.getuid?.() === 0;

/** Runs a Postgres program (as the postgres user when we are root); throws with its output. */
function pgRun(bin, args, { allowFail = false } = {}) {
  const [cmd, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: "utf8", timeout: 120_000 });
  if (r.status !== 0 && !allowFail)
    throw new Error(`${bin} ${args.join(" ")} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`);
  return r;
}

/** The bin folder of the newest installed Postgres (Debian: /usr/lib/postgresql/<major>/bin). */
function postgresBin() {
  const base = "/usr/lib/postgresql";
  const versions = existsSync(base) ? readdirSync(base).filter((v) => existsSync(join(base, v, "bin", "initdb"))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0)
    throw new Error("Postgres is not installed (no /usr/lib/postgresql/*/bin/initdb): run bash scripts/setup.sh --all");
  return join(base, versions[0], "bin");
}

/**
 * Starts a fresh Postgres cluster on 127.0.0.1 (password authentication, UTF-8, C locale).
 * @returns {Promise<{url: string, port: number, password: string, start(): Promise<void>, stop(mode?: "fast" | "immediate"): Promise<void>, close(): Promise<void>}>}
 */
export async function startPostgres() {
  const bin = postgresBin();
  let dir = dataFolder("pg");
  if (asRoot) {
    // The postgres user must be able to reach the folder; if a parent is closed to it, use /tmp.
    spawnSync("chown", ["postgres:postgres", dir]);
    if (spawnSync("runuser", ["-u", "postgres", "--", "test", "-w", dir]).status !== 0) {
      rmSync(dir, { recursive: true, force: true });
      dir = mkdtempSync(join(tmpdir(), "um-pg-"));
      chmodSync(dir, 0o755);
      spawnSync("chown", ["postgres:postgres", dir]);
    }
  }
  const data = join(dir, "data");
  const password = `pg-${randomBytes(9).toString("hex")}`;
  const pwfile = join(dir, "pw");
  writeFileSync(pwfile, password, { mode: 0o600 });
  if (asRoot) spawnSync("chown", ["postgres:postgres", pwfile]);
  pgRun(join(bin, "initdb"), [
    "-D",
    data,
    "-U",
    "postgres",
    "--auth=scram-sha-256",
    `--pwfile=${pwfile}`,
    "-E",
    "UTF8",
    "--locale=C",
    "--no-sync",
  ]);
  rmSync(pwfile);
  const port = await freePort();
  const conf = [
    "listen_addresses = '127.0.0.1'",
    `port = ${port}`,
    `unix_socket_directories = '${dir}'`,
    "max_connections = 200",
    "shared_buffers = 32MB",
    "logging_collector = off",
  ];
  pgRun("sh", ["-c", `printf '%s\\n' "$@" >> ${data}/postgresql.conf`, "sh", ...conf]);
  const log = join(dir, "log");
  const server = {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    password,
    async start() {
      pgRun(join(bin, "pg_ctl"), ["-D", data, "-l", log, "-w", "-t", "60", "start"]);
      running.add(server);
    },
    /** "fast": a clean shutdown; "immediate": the server dies as in a crash. */
    async stop(mode = "fast") {
      pgRun(join(bin, "pg_ctl"), ["-D", data, "-m", mode, "-w", "-t", "60", "stop"], { allowFail: true });
      running.delete(server);
    },
    killNow() {
      pgRun(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"], { allowFail: true });
    },
    async close() {
      await server.stop("immediate");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}

/** Whether something answers a Redis PING on `port` (a NOAUTH error is an answer; LOADING is not). */
function redisAnswers(port) {
  return new Promise((resolve) => {
    const s = createConnection({ host: "127.0.0.1", port });
    let buf = "";
    const done = (v) => (s.destroy(), resolve(v));
    s.setTimeout(1000, () => done(false));
    s.on("error", () => done(false));
    s.on("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => {
      buf += d;
      if (buf.includes("\r\n")) done(!buf.startsWith("-LOADING"));
    });
  });
}

/**
 * Starts redis-server on 127.0.0.1 with a password and an append-only file (fsync on every
 * write), so a restart keeps every acknowledged write.
 * @returns {Promise<{url: string, port: number, password: string, start(): Promise<void>, stop(signal?: "SIGTERM" | "SIGKILL"): Promise<void>, close(): Promise<void>}>}
 */
export async function startRedis() {
  const dir = dataFolder("redis");
  const port = await freePort();
  const password = `rd-${randomBytes(9).toString("hex")}`;
  let child = null;
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--requirepass",
    password,
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
    "--logfile",
    join(dir, "log"),
  ];
  const server = {
    url: `redis://:${encodeURIComponent(password)}@127.0.0.1:${port}`,
    port,
    password,
    async start() {
      child = spawn("redis-server", args, { stdio: "ignore" });
      const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
      child.exited = exited;
      running.add(server);
      const deadline = Date.now() + 30_000;
      while (!(await redisAnswers(port))) {
        const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 50))]);
        if (gone !== null)
          throw new Error(`redis-server exited (${gone}) at start; is it installed? (bash scripts/setup.sh --all)`);
        if (Date.now() > deadline) throw new Error("redis-server did not answer within 30 s");
      }
    },
    /** SIGTERM: a clean shutdown; SIGKILL: the server dies as in a crash. */
    async stop(signal = "SIGTERM") {
      if (!child) return;
      const c = child;
      child = null;
      c.kill(signal);
      await c.exited;
      running.delete(server);
    },
    killNow() {
      child?.kill("SIGKILL");
    },
    async close() {
      await server.stop("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}
