// A separate process using one memory on a store named as the CLI names them (a folder or a
// store URL, pkg/store-url.js), for tests/servers/processes.test.mjs:
//
//   node writer.mjs <store> <agent> add <label> <count>     add <count> facts, print {"added": n}
//   node writer.mjs <store> <agent> loop <label>            add facts until killed, printing "committed <i>" after each
//   node writer.mjs <store> <agent> retry <label> <after>   add facts, retrying each failure, until <after> succeeded since the
//                                                           last failure; print "committed <i>" / "failed <code>", then {"failures", "added"}
//   node writer.mjs <store> <agent> flush <llmBaseUrl>      open, flush() what is queued, print the report
//   node writer.mjs <store> <agent> observe <thread> <text> observe one turn (autoProcess off) and close
//   node writer.mjs <store> <agent> undo                    open, print "ready", undo() once a line arrives on stdin, print {"facts": n}
import { UserMemory } from "user-memory";
import { openStore } from "../../pkg/store-url.js";

const [spec, agent, mode, ...args] = process.argv.slice(2);
const store = await openStore(/^[a-z]+:/.test(spec) ? { url: spec } : { dir: spec });
const llm =
  mode === "flush" ? { baseUrl: args[0], apiKey: "sk-test-key", model: "m", maxRetries: 0 } : async () => "{}";
// MEMORY_PASSPHRASE in the environment: the memory is encrypted with it.
const encryption = process.env.MEMORY_PASSPHRASE ? { encryption: { passphrase: process.env.MEMORY_PASSPHRASE } } : {};
const memory = await UserMemory.open({ agent, storage: store.storage, llm, autoProcess: false, ...encryption });

if (mode === "add") {
  const [label, count] = args;
  for (let i = 0; i < Number(count); i++) await memory.addFact({ content: `fact ${label} ${i}` });
  console.log(JSON.stringify({ added: Number(count) }));
} else if (mode === "loop") {
  for (let i = 0; ; i++) {
    await memory.addFact({ content: `fact ${args[0]} ${i}` });
    process.stdout.write(`committed ${i}\n`);
  }
} else if (mode === "retry") {
  // Commits facts one after another, retrying each failure after a 50 ms backoff, until
  // `after` commits have succeeded since the last failure (or `max` facts are in): the test
  // stops the database when it reads "committed" lines and starts it again when it reads
  // "failed", so the run spans the outage whatever the machine's speed.
  const [label, after, max = "2000"] = args;
  const failures = [];
  let i = 0;
  for (let since = 0; i < Number(max) && !(failures.length > 0 && since >= Number(after)); i++) {
    for (;;) {
      try {
        await memory.addFact({ content: `fact ${label} ${i}` });
        process.stdout.write(`committed ${i}\n`);
        since++;
        break;
      } catch (e) {
        failures.push(e.code);
        since = 0;
        process.stdout.write(`failed ${e.code}\n`);
        // fixed wait: the writer's backoff before retrying, as a client would
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
  console.log(JSON.stringify({ failures, added: i }));
} else if (mode === "flush") {
  const report = await memory.flush();
  console.log(JSON.stringify(report));
} else if (mode === "undo") {
  // Opened and read first, so that both processes of a race undo from the same revision.
  await memory.get();
  process.stdout.write("ready\n");
  await new Promise((resolve) => process.stdin.once("data", resolve));
  process.stdin.pause();
  const doc = await memory.undo();
  console.log(JSON.stringify({ facts: doc.facts.length }));
} else if (mode === "observe") {
  const [thread, text] = args;
  await memory.observe(thread, [
    { role: "user", content: text },
    { role: "assistant", content: "Noted." },
  ]);
}
await memory.close();
await store.close();
