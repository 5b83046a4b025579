// Nothing reachable from JS can panic or break the wasm module. A panic (a RefCell borrowed
// twice when a callback calls back into the instance) traps the module: `RuntimeError:
// unreachable`; an exception thrown through the wasm from a Proxy trap or a getter leaves
// Rust state half-updated, and inside a promise it stops every later promise of the module
// (Node exits with it as an uncaught exception).
//
// So every exported method is called from inside every user callback (countTokens, the LLM
// function and its abort signal, each storage adapter method, each event listener, getters
// of the arguments) and with hostile arguments (Proxies whose traps throw, revoked Proxies,
// throwing getters and toJSON, symbols, BigInts, an array claiming 2^32 - 1 items). Then the
// same instance and a fresh one must still work, and no error may be a wasm trap. All of it
// runs in this test process: one trap would fail the tests after it too.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { closeAll, eventually, freshAgent, openMemory, turn } from "../helpers/pipeline.mjs";

after(closeAll);

const boom = () => {
  throw new Error("hostile trap");
};
const throwingProxy = (target = {}) =>
  new Proxy(target, {
    get: boom,
    has: boom,
    ownKeys: boom,
    getOwnPropertyDescriptor: boom,
    getPrototypeOf: boom,
    apply: boom,
  });
const revoked = () => {
  const r = Proxy.revocable({}, {});
  r.revoke();
  return r.proxy;
};
class HostileError extends Error {
  get message() {
    return boom();
  }
}

/** Values no method accepts; `poke` is what their getters call back into. */
function hostileValues(poke) {
  const cyclic = { a: {} };
  cyclic.a.self = cyclic;
  const sparse = [];
  Object.defineProperty(sparse, 0, { get: boom, enumerable: true });
  const calling = {
    get role() {
      poke();
      return "user";
    },
    get content() {
      poke();
      return "a message whose getters call back";
    },
    toJSON() {
      poke();
      return { content: "from toJSON" };
    },
  };
  return [
    undefined,
    null,
    0,
    -1,
    NaN,
    2 ** 53,
    "",
    "x".repeat(100_000),
    Symbol("s"),
    10n,
    () => 1,
    [],
    {},
    cyclic,
    throwingProxy(),
    throwingProxy([]),
    revoked(),
    sparse,
    [throwingProxy()],
    [sparse],
    new Proxy([], { get: (t, k) => (k === "length" ? 2 ** 32 - 1 : undefined) }),
    { toJSON: boom },
    { toJSON: () => undefined },
    { content: throwingProxy(), confidence: throwingProxy() },
    { then: boom },
    calling,
    [calling],
    new HostileError("x"),
  ];
}

const TRAP = /unreachable|RuntimeError|already borrowed|already mutably borrowed|panicked/i;

/**
 * A recorder of what the memory's methods throw or reject with, and `poke(memory)`: calls
 * every method of `memory` with every hostile value in every argument position, as long as
 * the budget lasts (re-entrant chains end). `close`/`free` only when `ending`.
 */
function harness() {
  const failures = [];
  let budget = 0;
  let pending = 0;
  const note = (where) => (e) => {
    if (e instanceof WebAssembly.RuntimeError || TRAP.test(String(e?.message ?? e)))
      failures.push(`${where}: ${e?.stack ?? e}`);
  };
  const settle = (where, f) => {
    try {
      const r = f();
      if (r && typeof r.then === "function") {
        pending++;
        r.then(() => {}, note(where)).finally(() => pending--);
      }
    } catch (e) {
      note(where)(e);
    }
  };
  function poke(memory, { ending = false } = {}) {
    if (budget <= 0 || !memory) return;
    budget--;
    const again = () => poke(memory);
    const bad = hostileValues(again);
    const msgs = turn("I drink green tea every morning", "Noted.");
    for (const v of bad) {
      settle("observe", () => memory.observe(v, msgs));
      settle("observe", () => memory.observe("t-re", v));
      settle("inject", () => memory.inject(v));
      settle("explain", () => memory.explain(v));
      settle("search", () => memory.search(v, v));
      settle("import", () => memory.import(v));
      settle("addFact", () => memory.addFact(v));
      settle("updateFact", () => memory.updateFact(v, v));
      settle("removeFact", () => memory.removeFact(v));
      settle("updateSection", () => memory.updateSection(v, v));
      settle("updateSection", () => memory.updateSection("workContext", v));
      settle("configure", () => memory.configure(v));
      settle("on", () => memory.on(v, v));
      settle("on", () => memory.on("update", v));
      settle("open", () => UserMemory.open(v));
      settle("open", () => UserMemory.open({ storage: "memory", agent: "hostile", llm: v, countTokens: v }));
      settle("open", () => UserMemory.open({ storage: v, llm: async () => "{}" }));
      settle("inspect", () => UserMemory.inspect(v));
      settle("reset", () => UserMemory.reset({ storage: v }));
    }
    // Valid calls, re-entrantly: these do real work from inside the callback.
    settle("observe", () => memory.observe("t-re", msgs));
    settle("inject", () => memory.inject(msgs));
    settle("explain", () => memory.explain(msgs));
    settle("search", () => memory.search("tea"));
    settle("addFact", () => memory.addFact({ content: "Added from a callback" }));
    settle("get", () => memory.get());
    settle("export", () => memory.export());
    settle("flush", () => memory.flush());
    settle("processDue", () => memory.processDue());
    settle("status", () => memory.status());
    settle("nextDueAt", () => memory.nextDueAt());
    settle("options", () => memory.options());
    settle("configure", () => memory.configure({ topFacts: 10 }));
    settle("on", () => memory.on("update", () => {})());
    if (ending) {
      settle("close", () => memory.close());
      settle("free", () => memory.free());
    }
  }
  return {
    failures,
    poke,
    fund: (n) => (budget = n),
    /** The calls the callbacks started that have not settled yet. */
    pending: () => pending,
  };
}

/** An adapter over a Map whose every method first calls `before()`. */
function callingAdapter(before) {
  const map = new Map();
  const run =
    (f) =>
    (...args) => {
      before();
      return f(...args);
    };
  return {
    name: "calling-back",
    get: run(async (k) => map.get(k) ?? null),
    set: run(async (k, v) => void map.set(k, v)),
    delete: run(async (k) => void map.delete(k)),
    keys: run(async (p) => [...map.keys()].filter((k) => k.startsWith(p))),
    compareAndSet: run(async (k, expected, v) => {
      if ((map.get(k) ?? null) !== expected) return false;
      map.set(k, v);
      return true;
    }),
  };
}

async function works(memory, label) {
  const fact = await memory.addFact({ content: `Works after ${label}` });
  assert.equal(fact.content, `Works after ${label}`);
  assert.ok(
    (await memory.get()).facts.some((f) => f.id === fact.id),
    `${label}: the fact is stored`,
  );
  assert.match(await memory.inject(turn(`works after ${label}`)), /<memory>/, `${label}: inject renders`);
  assert.equal(typeof memory.status().revision, "number");
}

test(
  "every method called from inside every callback, with hostile arguments, never traps the module",
  { timeout: 120_000 },
  async () => {
    const h = harness();
    let memory = null;
    const poke = () => h.poke(memory);
    const reply = JSON.stringify({
      newFacts: [{ content: "Drinks green tea", category: "preference", confidence: 0.9 }],
    });
    memory = await openMemory({
      agent: freshAgent("reentrant"),
      autoProcess: false,
      debounceMs: 0,
      storage: callingAdapter(poke),
      countTokens: (text) => {
        poke();
        return Math.ceil(text.length / 4);
      },
      llm: async ({ signal }) => {
        signal.addEventListener("abort", poke);
        poke();
        return reply;
      },
    });
    for (const name of ["update", "error", "queued", "processed"]) memory.on(name, poke);

    h.fund(40);
    poke();
    await memory.observe("t1", turn("I drink green tea every morning", "Noted."));
    await memory.inject(turn("tea?"));
    await memory.explain(turn("tea?"));
    await memory.flush().catch(() => {});
    await memory.addFact({ content: "Likes oolong" });
    // Let every promise the callbacks started settle (they start more until the budget ends).
    await eventually(async () => {
      await memory.flush().catch(() => {});
      return h.pending() === 0;
    }, "the calls started by the callbacks to settle");
    assert.deepEqual(h.failures, [], "no wasm trap");
    h.fund(0);
    await works(memory, "re-entrant calls");
    assert.ok(
      (await memory.get()).facts.some((f) => f.content === "Drinks green tea"),
      "the extraction was applied",
    );

    const fresh = await openMemory({ agent: freshAgent("fresh"), storage: "memory", llm: async () => reply });
    await works(fresh, "the hostile instance");
    await fresh.close();
  },
);

test("countTokens calling observe(), inject() or explain() is served, not a panic", async () => {
  let memory = null;
  const seen = [];
  memory = await openMemory({
    agent: freshAgent("count-reenter"),
    storage: "memory",
    autoProcess: false,
    llm: async () => "{}",
    countTokens: (text) => {
      // observe() inside countTokens used to trap the module (the cached document was borrowed).
      seen.push(memory.observe("t-count", turn("I play the cello", "Nice.")));
      // inject() inside countTokens counts with the built-in estimate instead of recursing.
      seen.push(memory.inject(turn("cello")));
      return Math.ceil(text.length / 4);
    },
  });
  await memory.addFact({ content: "Plays the cello" });
  const block = await memory.inject(turn("cello"));
  assert.match(block, /Plays the cello/);
  const explained = await memory.explain(turn("cello"));
  assert.equal(explained.facts[0].content, "Plays the cello");
  const results = await Promise.all(seen);
  assert.ok(results.includes(true), "the re-entrant observe() was queued");
  assert.ok(
    results.some((r) => typeof r === "string" && r.includes("Plays the cello")),
    "the re-entrant inject() was served",
  );
  assert.deepEqual(memory.status().pending, ["t-count"]);
  await works(memory, "countTokens re-entry");
});

test("a listener that keeps calling back is stopped at a depth limit with INVALID_INPUT", async () => {
  const memory = await openMemory({
    agent: freshAgent("deep"),
    storage: "memory",
    autoProcess: false,
    llm: async () => "{}",
  });
  let depth = 0;
  const errors = [];
  memory.on("queued", () => {
    depth++;
    try {
      memory.observe(`t${depth}`, turn(`message ${depth}`, "ok"));
    } catch (e) {
      errors.push(e);
    }
  });
  memory.observe("t0", turn("first", "ok"));
  assert.ok(depth >= 2 && depth <= 32, `nested ${depth} deep`);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].code, "INVALID_INPUT");
  assert.match(errors[0].message, /nested/);
  await works(memory, "a runaway listener");
});

test("close() and free() from inside callbacks and while a call is running end the instance cleanly", async () => {
  const h = harness();
  let memory = null;
  const poke = () => h.poke(memory, { ending: true });
  // Not through openMemory(): after free() the object is gone (its methods throw
  // wasm-bindgen's "null pointer passed to rust", a plain Error), so nothing may close it.
  memory = await UserMemory.open({
    agent: freshAgent("ending"),
    storage: "memory",
    autoProcess: false,
    countTokens: (text) => {
      poke();
      return text.length;
    },
    llm: async () => {
      poke();
      return "{}";
    },
  });
  memory.on("queued", poke);
  h.fund(3);
  for (const call of [
    () => memory.observe("t1", turn("I sail on weekends", "Fun.")),
    () => memory.inject(turn("sail")),
  ]) {
    try {
      await call();
    } catch (e) {
      assert.ok(!TRAP.test(e.message), e.message);
    }
  }
  await eventually(() => {
    try {
      memory.status();
      return false;
    } catch (e) {
      return /null pointer/.test(e.message);
    }
  }, "free() inside a callback to end the instance");
  assert.deepEqual(h.failures, [], "no wasm trap");
  const fresh = await openMemory({ agent: freshAgent("after-free"), storage: "memory", llm: async () => "{}" });
  await works(fresh, "close() and free() inside callbacks");
});

test("hostile values thrown or returned by callbacks become errors with a code", async () => {
  const thrown = [throwingProxy(), revoked(), new HostileError("x"), Symbol("s"), 10n, { then: boom }];
  for (const value of thrown) {
    const adapter = {
      get: async () => {
        throw value;
      },
      set: async () => {},
      delete: async () => {},
    };
    await assert.rejects(
      UserMemory.open({ storage: adapter, llm: async () => "{}" }),
      (e) => typeof e.code === "string" && !TRAP.test(e.message),
    );
    const memory = await openMemory({
      agent: freshAgent("thrown"),
      storage: "memory",
      autoProcess: false,
      llm: async () => {
        throw value;
      },
    });
    memory.on("update", () => {
      throw value;
    });
    await memory.observe("t", turn("I knit", "Cool."));
    await assert.rejects(memory.flush(), (e) => e.code === "LLM_FAILED" && !TRAP.test(e.message));
    const returning = await openMemory({
      agent: freshAgent("returned"),
      storage: "memory",
      autoProcess: false,
      llm: async () => value,
    });
    await returning.observe("t", turn("I knit", "Cool."));
    await assert.rejects(returning.flush(), (e) => typeof e.code === "string" && !TRAP.test(e.message));
    await works(memory, `throwing ${typeof value}`);
  }
  const keysLie = {
    ...callingAdapter(() => {}),
    keys: async () => new Proxy([], { get: (t, k) => (k === "length" ? 2 ** 32 - 1 : boom()) }),
  };
  const memory = await openMemory({ agent: freshAgent("keys"), storage: keysLie, llm: async () => "{}" });
  await works(memory, "keys() returning a hostile array");
});

test("the embedder and its abort signal calling back (switching the embedder, ranking, observing) never trap the module", async () => {
  let memory = null;
  const calls = [];
  let aborted = 0;
  const errors = [];
  const guard = (f) => {
    try {
      const r = f();
      if (r && typeof r.then === "function") r.catch((e) => TRAP.test(String(e?.message)) && errors.push(e));
    } catch (e) {
      if (TRAP.test(String(e?.message))) errors.push(e);
    }
  };
  const vector = (t) => [t.length % 7, 1, (t.charCodeAt(0) || 0) % 5];
  // A model whose calls never answer, and whose abort listener calls back into the memory.
  const hanging = {
    model: "hanging",
    function: (texts, { signal }) => {
      calls.push(texts.length);
      signal.addEventListener("abort", () => {
        aborted++;
        guard(() => memory.configure({ embed: { model: "third", function: (ts) => ts.map(vector) } }));
        guard(() => memory.inject(turn("tea")));
        guard(() => memory.search("tea"));
        guard(() => memory.status());
      });
      guard(() => memory.inject(turn("tea")));
      guard(() => memory.observe("t-embed", turn("I drink tea", "ok")));
      return new Promise(() => {});
    },
  };
  memory = await openMemory({
    agent: freshAgent("embed-reenter"),
    storage: "memory",
    autoProcess: false,
    llm: async () => "{}",
    embed: hanging,
  });
  await memory.addFact({ content: "Drinks green tea" });
  await eventually(() => calls.length > 0, "the hanging model to be called");
  // Switching the model aborts its calls: the listener runs inside configure().
  memory.configure({ embed: { model: "second", function: (ts) => ts.map(vector) } });
  await eventually(() => aborted > 0, "the hanging call to be aborted");
  assert.deepEqual(errors, [], "no wasm trap");
  await works(memory, "an embedder calling back");
});
