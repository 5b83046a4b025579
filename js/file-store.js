// `user-memory/node`: a storage adapter that keeps memory in files, for Node.js agents.
//
//   import { UserMemory } from "user-memory";
//   import { fileStore } from "user-memory/node";
//   const memory = await UserMemory.open({ storage: fileStore("./memory"), llm });
//
// Layout: one file per key in one flat directory. Keys are percent-encoded into file names
// that are the same on case-sensitive and case-insensitive file systems (only a-z 0-9 _ - .
// are kept; everything else, capitals included, becomes %xx). Names starting with "." are
// never keys: temp files and the lock live there. A key whose name would be longer than
// 200 characters is stored under a hashed name, with the key on the file's first line.
//
// Writes: temp file (unique name) → fsync → rename over the target → fsync of the directory,
// so a file holds the old or the new value after a crash, never a torn one.
//
// compareAndSet is safe between processes: it holds a lock file (created exclusively, with
// pid, host and time in it from the first instant) while it reads, compares and renames. A
// lock whose holder is a dead process on this host, or which is older than `staleLockMs`, is
// broken. "This host" means the same host name, PID namespace and boot: containers that
// share a directory (and often a host name) cannot see each other's processes, so their
// locks are judged by age only. Breakers take turns (`.lock.break`, created complete like
// the lock) and remove a lock only if it is still the one they judged stale, so a fresh
// lock is never taken away.
//
// Memory is personal: the directory is created 0700 and every file 0600 (owner only; a
// directory that already exists keeps its mode). The directory is created if it is missing and its parent exists; a missing parent, a
// file in its place or a read-only directory is an error with code STORAGE_UNAVAILABLE
// that names the path (so a typo never silently starts an empty memory elsewhere).
import { createHash, randomBytes } from "node:crypto";
import { access, link, mkdir, open, readdir, readFile, rename, stat, unlink, writeFile } from "node:fs/promises";
import { constants, readFileSync, readlinkSync } from "node:fs";

/** Owner-only modes of what the store creates (no effect on Windows). */
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
import { homedir, hostname } from "node:os";
import { dirname, join, relative, resolve, isAbsolute } from "node:path";
import { errorCode, invalidInput, userMemoryError } from "./errors.js";
import { messageOf, retryingOnce } from "./store-util.js";

const LOCK = ".lock";
const TEMP = ".tmp-";
/** Locks moved aside by older versions when breaking them; removed like temp files. */
const STALE = ".stale-";
const BREAK = ".lock.break";
const MAX_NAME = 200;
/** Temp files of dead writers older than this are removed (a live write takes milliseconds). */
const ORPHAN_MS = 60 * 60_000;
const HOST = hostname();
/** Where this process's pids mean something: its PID namespace and boot (Linux; "" elsewhere). */
const PID_SPACE = pidSpace();
/** A short tag of this host and PID space in temp file names, so orphans are only judged by pid here. */
const HOST_TAG = createHash("sha256").update(`${HOST}\n${PID_SPACE}`).digest("hex").slice(0, 8);

// A server keeping one memory per user also wants a bounded cache of open instances.
export { memoryPool, MemoryPool } from "./pool.js";

/**
 * Creates a file store in `dir`. See {@link FileStore}.
 * @param {string} dir
 * @param {FileStoreOptions} [options]
 */
export function fileStore(dir, options) {
  return new FileStore(dir, options);
}

/**
 * @typedef {object} FileStoreOptions
 * @property {number} [staleLockMs] A lock held longer than this is considered abandoned
 *   (default 10 000; a compareAndSet holds it for one read and one small write).
 * @property {string | false} [markDir] Where encrypted memory keeps its rollback marks, outside
 *   `dir` (default {@link defaultMarkDir}); `false`: none.
 */

/**
 * The default folder of the rollback marks of encrypted memory: `user-memory/marks` in this
 * user's cache folder ($XDG_CACHE_HOME or ~/.cache; ~/Library/Caches on macOS; %LOCALAPPDATA%
 * on Windows). `null` when there is no home folder.
 * @returns {string | null}
 */
export function defaultMarkDir() {
  let base = process.env.XDG_CACHE_HOME;
  try {
    if (process.platform === "win32") base = process.env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local");
    else if (process.platform === "darwin") base = join(homedir(), "Library", "Caches");
    else if (!base || !isAbsolute(base)) base = join(homedir(), ".cache");
  } catch {
    return null;
  }
  return join(base, "user-memory", "marks");
}

/**
 * The rollback marks of the memories in `storeDir`, one small file each in `markDir`
 * (written like the store's: temp file, fsync, rename; owner-only modes).
 * @param {string} storeDir @param {string} markDir
 * @returns {import("./index.js").RollbackMark}
 */
function markFiles(storeDir, markDir) {
  /** @param {string} name */
  const path = (name) => join(markDir, createHash("sha256").update(`${storeDir}\n${name}`).digest("hex").slice(0, 32));
  return {
    name: `the rollback mark folder ${JSON.stringify(markDir)}`,
    async get(name) {
      try {
        return await readFile(path(name), "utf8");
      } catch (e) {
        if (errorCode(e) === "ENOENT") return null;
        throw e;
      }
    },
    async set(name, value) {
      await mkdir(markDir, { recursive: true, mode: DIR_MODE });
      const temp = join(markDir, `${TEMP}${process.pid}-${randomBytes(6).toString("hex")}`);
      const fh = await open(temp, "wx", FILE_MODE);
      try {
        await fh.writeFile(value, "utf8");
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(temp, path(name)).catch(async (/** @type {unknown} */ e) => {
        await unlink(temp).catch(() => {});
        throw e;
      });
    },
  };
}

/** A {@link StorageAdapter} over a directory. Every method may be called concurrently. */
export class FileStore {
  /** @type {string} */ dir;
  /** @type {number} */ #staleLockMs;
  /** Where encrypted memory in `dir` keeps its rollback marks (`markDir`), if anywhere. @type {import("./index.js").RollbackMark | undefined} */
  rollbackMark;
  #ready = retryingOnce(() => this.#check());

  /**
   * @param {string} dir the directory (created if missing, when its parent exists)
   * @param {FileStoreOptions} [options]
   */
  constructor(dir, { staleLockMs = 10_000, markDir = defaultMarkDir() ?? false } = {}) {
    if (typeof dir !== "string" || dir === "") {
      throw invalidInput("fileStore(dir) needs a directory path (a non-empty string)");
    }
    if (!(Number.isFinite(staleLockMs) && staleLockMs > 0)) {
      throw invalidInput("fileStore(dir, { staleLockMs }) needs a positive number of milliseconds");
    }
    this.dir = resolve(dir);
    this.#staleLockMs = staleLockMs;
    if (markDir !== false) {
      if (typeof markDir !== "string" || markDir === "") {
        throw invalidInput("fileStore(dir, { markDir }) needs a folder path (a non-empty string) or false");
      }
      const marks = resolve(markDir);
      const inside = relative(this.dir, marks);
      if (!inside.startsWith("..") && !isAbsolute(inside)) {
        throw invalidInput(
          `fileStore(dir, { markDir }): the rollback marks must be kept outside the store folder ${JSON.stringify(this.dir)}`,
        );
      }
      this.rollbackMark = markFiles(this.dir, marks);
    }
  }

  /** Shown in error messages. */
  get name() {
    return `fileStore(${JSON.stringify(this.dir)})`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    await this.#prepare();
    return this.#read(key);
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#prepare();
    await this.#write(key, value);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#prepare();
    try {
      await unlink(this.#path(key));
    } catch (e) {
      if (errorCode(e) === "ENOENT") return;
      throw e;
    }
    await syncDir(this.dir);
  }

  /** Keys starting with `prefix` (files that are not keys are ignored). @param {string} prefix */
  async keys(prefix) {
    await this.#prepare();
    const out = [];
    for (const name of await readdir(this.dir)) {
      if (name.startsWith(".")) continue;
      const key = name.includes("~") ? await this.#hashedKey(name) : decodeName(name);
      if (key !== null && key.startsWith(prefix)) out.push(key);
    }
    return out;
  }

  /**
   * Sets `key` to `value` if it currently holds `expected` (`null`: absent), atomically
   * with respect to every other process using this directory.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    await this.#prepare();
    const token = await this.#lock();
    try {
      if ((await this.#read(key)) !== expected) return false;
      // If the lock was broken meanwhile (we were slower than staleLockMs), someone else
      // may be writing: report a conflict, and the library re-reads and replays.
      return await this.#write(key, value, () => this.#holds(token));
    } finally {
      await this.#unlock(token);
    }
  }

  // ---- files ----

  /** @param {string} key */
  #path(key) {
    return join(this.dir, fileName(key));
  }

  /** @param {string} key */
  async #read(key) {
    const name = fileName(key);
    let text;
    try {
      text = await readFile(join(this.dir, name), "utf8");
    } catch (e) {
      if (errorCode(e) === "ENOENT") return null;
      throw e;
    }
    if (!name.includes("~")) return text;
    const newline = text.indexOf("\n");
    return newline < 0 ? null : text.slice(newline + 1);
  }

  /**
   * Writes atomically; `beforeRename` may cancel (→ false).
   * @param {string} key @param {string} value @param {() => Promise<boolean>} [beforeRename]
   */
  async #write(key, value, beforeRename) {
    const name = fileName(key);
    const temp = join(this.dir, `${TEMP}${HOST_TAG}-${process.pid}-${randomBytes(6).toString("hex")}`);
    const body = name.includes("~") ? `${JSON.stringify(key)}\n${value}` : value;
    const fh = await open(temp, "wx", FILE_MODE);
    try {
      await fh.writeFile(body, "utf8");
      await fh.sync();
    } catch (e) {
      await fh.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw e;
    }
    await fh.close();
    if (beforeRename && !(await beforeRename())) {
      await unlink(temp).catch(() => {});
      return false;
    }
    try {
      await rename(temp, join(this.dir, name));
    } catch (e) {
      await unlink(temp).catch(() => {});
      throw e;
    }
    await syncDir(this.dir);
    return true;
  }

  /** The key a hashed file name holds on its first line, or null. @param {string} name */
  async #hashedKey(name) {
    try {
      const text = await readFile(join(this.dir, name), "utf8");
      const key = JSON.parse(text.slice(0, text.indexOf("\n")));
      return typeof key === "string" && fileName(key) === name ? key : null;
    } catch {
      return null;
    }
  }

  // ---- the directory ----

  /** Checks (once) that the directory exists and is writable, creating it if needed. */
  #prepare() {
    return this.#ready(); // a failure is tried again next time (the user may fix the directory)
  }

  async #check() {
    const dir = this.dir;
    try {
      await mkdir(dir, { mode: DIR_MODE });
    } catch (e) {
      if (errorCode(e) === "ENOENT")
        throw unavailable(
          `the memory directory ${dir} does not exist and cannot be created: its parent ${dirname(dir)} is missing`,
          e,
        );
      if (errorCode(e) === "ENOTDIR")
        throw unavailable(`the memory directory ${dir} cannot be created: a parent is not a directory`, e);
      if (errorCode(e) !== "EEXIST")
        throw unavailable(`the memory directory ${dir} cannot be created (${errorCode(e)}: ${messageOf(e)})`, e);
    }
    if (!(await stat(dir)).isDirectory()) throw unavailable(`the memory directory ${dir} is a file, not a directory`);
    try {
      await access(dir, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (e) {
      throw unavailable(`the memory directory ${dir} is not writable (${errorCode(e)})`, e);
    }
    await this.#removeOrphans();
  }

  /** Removes temp files and broken locks left by writers that died. */
  async #removeOrphans() {
    for (const name of await readdir(this.dir)) {
      if (!name.startsWith(TEMP) && !name.startsWith(STALE)) continue;
      const [tag, pid] = name.slice(name.indexOf("-") + 1).split("-");
      const file = join(this.dir, name);
      const ownDead = tag === HOST_TAG && !alive(Number(pid));
      const old = await stat(file).then(
        (s) => Date.now() - s.mtimeMs > ORPHAN_MS,
        () => false,
      );
      if (ownDead || old) await unlink(file).catch(() => {});
    }
  }

  // ---- the lock ----

  /** Takes the directory lock; resolves to this holder's token. */
  async #lock() {
    const path = join(this.dir, LOCK);
    const token = randomBytes(8).toString("hex");
    const content = JSON.stringify({ pid: process.pid, host: HOST, space: PID_SPACE, at: Date.now(), token });
    // The lock appears with its content in one step (a hard link of a complete temp file),
    // so a holder killed while taking it never leaves an empty lock that only age can break.
    const temp = await this.#temp(content);
    try {
      for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
        if (await createLock(temp, path, content)) return token;
        if (await this.#breakIfStale(path)) continue;
        await new Promise((r) => setTimeout(r, wait * (0.5 + Math.random())));
      }
    } finally {
      await unlink(temp).catch(() => {});
    }
  }

  /**
   * A new temp file holding `content`; if writing it fails (a full disk), it is removed.
   * @param {string} content
   */
  async #temp(content) {
    const temp = join(this.dir, `${TEMP}${HOST_TAG}-${process.pid}-${randomBytes(6).toString("hex")}`);
    try {
      await writeFile(temp, content, { flag: "wx", mode: FILE_MODE });
    } catch (e) {
      await unlink(temp).catch(() => {});
      throw e;
    }
    return temp;
  }

  /**
   * Removes the lock if its holder is dead or it is too old; true if it is gone.
   * @param {string} path
   */
  async #breakIfStale(path) {
    const seen = await this.#readStale(path);
    if (seen === null) return true;
    if (seen === false) return false;
    // Breakers take turns, and each removes the lock only if it is still the stale one it
    // read: had another breaker removed it and a new holder taken the lock meanwhile, the
    // new lock is left alone.
    // The guard is created like the lock, complete or not at all: a guard left empty (the
    // disk filled up between creating and writing it) looked live for `staleLockMs` to
    // every writer, each time.
    const guard = join(this.dir, BREAK);
    const content = JSON.stringify({ pid: process.pid, host: HOST, space: PID_SPACE, at: Date.now(), token: "break" });
    const temp = await this.#temp(content);
    let mine;
    try {
      mine = await createLock(temp, guard, content);
    } finally {
      await unlink(temp).catch(() => {});
    }
    if (!mine) {
      // Another breaker is at it (for a moment), or one died there: clear a stale guard.
      if ((await this.#readStale(guard)) !== false) await unlink(guard).catch(() => {});
      return false;
    }
    try {
      const now = await readFile(path, "utf8").catch((e) => (errorCode(e) === "ENOENT" ? null : Promise.reject(e)));
      if (now === seen) await unlink(path).catch((e) => (errorCode(e) === "ENOENT" ? undefined : Promise.reject(e)));
    } finally {
      await unlink(guard).catch(() => {});
    }
    return true;
  }

  /**
   * The content of lock file `path` if it is stale (holder dead here, or too old); false
   * if it is live; null if there is none.
   * @param {string} path
   * @returns {Promise<string | false | null>}
   */
  async #readStale(path) {
    let raw;
    let mtime;
    try {
      raw = await readFile(path, "utf8");
      mtime = (await stat(path)).mtimeMs;
    } catch (e) {
      if (errorCode(e) === "ENOENT") return null;
      throw e;
    }
    const holder = parseLock(raw);
    const age = Date.now() - (holder?.at ?? mtime);
    // A pid is only meaningful in the holder's own PID namespace on the same boot.
    const dead = holder !== null && holder.host === HOST && (holder.space ?? "") === PID_SPACE && !alive(holder.pid);
    return dead || age >= this.#staleLockMs ? raw : false;
  }

  /** Whether the lock file is still the one taken with `token`. @param {string} token */
  async #holds(token) {
    return parseLock(await readFile(join(this.dir, LOCK), "utf8").catch(() => ""))?.token === token;
  }

  /** @param {string} token */
  async #unlock(token) {
    if (await this.#holds(token)) await unlink(join(this.dir, LOCK)).catch(() => {});
  }
}

/** The file name of `key`. @param {string} key */
export function fileName(key) {
  let name = "";
  for (const byte of Buffer.from(key, "utf8")) {
    const keep =
      (byte >= 0x61 && byte <= 0x7a) ||
      (byte >= 0x30 && byte <= 0x39) ||
      byte === 0x5f ||
      byte === 0x2d ||
      (byte === 0x2e && name !== "");
    name += keep ? String.fromCharCode(byte) : `%${byte.toString(16).padStart(2, "0")}`;
  }
  if (name === "" || name.length > MAX_NAME) {
    name = `${name.slice(0, MAX_NAME - 41)}~${createHash("sha256").update(key).digest("hex").slice(0, 40)}`;
  }
  return name;
}

/** The key of a file name, or null if it is not one of ours. @param {string} name */
function decodeName(name) {
  if (!/^[a-z0-9_\-.%]+$/.test(name)) return null;
  try {
    const key = decodeURIComponent(name);
    return fileName(key) === name ? key : null;
  } catch {
    return null;
  }
}

/** @type {Set<unknown>} What link() fails with where the file system has no hard links. */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV"]);

/**
 * Creates `path` exclusively with `content` (`temp` holds it already); false if it exists.
 * @param {string} temp @param {string} path @param {string} content
 */
async function createLock(temp, path, content) {
  try {
    await link(temp, path);
    return true;
  } catch (e) {
    if (errorCode(e) === "EEXIST") return false;
    if (!NO_HARD_LINKS.has(errorCode(e))) throw e;
  }
  // A file system without hard links: O_EXCL create, then write; a write that fails
  // removes what it created.
  let fh;
  try {
    fh = await open(path, "wx", FILE_MODE);
  } catch (e) {
    if (errorCode(e) === "EEXIST") return false;
    throw e;
  }
  try {
    await fh.writeFile(content, "utf8");
  } catch (e) {
    await fh.close().catch(() => {});
    await unlink(path).catch(() => {});
    throw e;
  }
  await fh.close();
  return true;
}

/**
 * The holder a lock file names, or null if it is not a lock.
 * @param {string} raw
 * @returns {{ token: string, pid?: number, host?: string, space?: string, at?: number } | null}
 */
function parseLock(raw) {
  try {
    const v = JSON.parse(raw);
    return v && typeof v === "object" && typeof v.token === "string" ? v : null;
  } catch {
    return null;
  }
}

/** This process's PID namespace and boot id (Linux), "" where they cannot be read. */
function pidSpace() {
  try {
    return `${readlinkSync("/proc/self/ns/pid")} ${readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`;
  } catch {
    return "";
  }
}

/** Whether process `pid` exists on this host. @param {unknown} pid */
function alive(pid) {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return errorCode(e) === "EPERM";
  }
}

/**
 * fsync of a directory, so a rename or unlink in it is durable (not possible on Windows).
 * @param {string} dir
 */
async function syncDir(dir) {
  if (process.platform === "win32") return;
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** @param {string} message @param {unknown} [cause] */
function unavailable(message, cause) {
  return userMemoryError("STORAGE_UNAVAILABLE", message, cause);
}
