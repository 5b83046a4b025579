// History entry sizes: a typical extraction (one summary, two facts) and an addFact.
//   node bench/history-size.mjs
import { UserMemory } from "user-memory";
const reply = JSON.stringify({
  user: {
    topOfMind: {
      summary: "Migrating the billing service from Python to Go; evaluating Kafka vs NATS for events",
      shouldUpdate: true,
    },
  },
  newFacts: [
    { content: "Works as a backend engineer at a fintech startup", category: "context", confidence: 0.9 },
    { content: "Prefers Go over Python for services", category: "preference", confidence: 0.85 },
  ],
  factsToRemove: [],
});
const memory = await UserMemory.open({ agent: "size", storage: "memory", autoProcess: false, llm: async () => reply });
for (let i = 0; i < 50; i++)
  await memory.addFact({ content: `Existing fact number ${i} about the user and their work` });
await memory.observe("t1", [
  { role: "user", content: "I'm moving our billing service to Go, deciding between Kafka and NATS" },
  { role: "assistant", content: "Sounds good" },
]);
await memory.flush();
const [e] = await memory.history({ limit: 1 });
console.log(e.reason, JSON.stringify(e).length, "bytes");
const add = (await memory.history({ limit: 2 }))[1];
console.log(add.reason, JSON.stringify(add).length, "bytes");
await memory.close();
