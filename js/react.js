// `user-memory/react`: the live memory of a UserMemory in a React component.
//
//   import { useUserMemory } from "user-memory/react";
//   function MemoryPanel({ memory }) {
//     const { facts, status, error } = useUserMemory(memory);
//     return <ul>{facts.map((f) => <li key={f.id}>{f.content}</li>)}</ul>;
//   }
//
// The hook subscribes to the instance's `update`, `queued`, `processed` and `error` events
// (and unsubscribes when the component unmounts or the instance changes), re-reads the
// document after each `update` and the queue status after every event. React is an
// optional peer dependency: only this subpath imports it.
import { useEffect, useState } from "react";

/**
 * The state before an instance is there (or while its `open()` promise is pending).
 * @type {import("./react.js").UserMemoryState}
 */
const EMPTY = Object.freeze({ document: null, facts: Object.freeze([]), status: null, error: null });

/**
 * @param {import("./react.js").MemoryLike} memory
 * @returns {import("./react.js").UserMemoryState}
 */
export function useUserMemory(memory) {
  const [state, setState] = useState(EMPTY);
  useEffect(() => {
    setState(EMPTY);
    if (!memory) return undefined;
    let live = true;
    let reads = 0;
    /** @type {Array<() => void>} */
    const unsubscribe = [];
    /** @param {Partial<import("./react.js").UserMemoryState>} p */
    const patch = (p) => live && setState((s) => ({ ...s, ...p }));
    Promise.resolve(memory).then(
      (m) => {
        if (!live) return;
        const status = () => patch({ status: m.status() });
        /** Re-reads the document; only the newest of overlapping reads is applied. */
        const reload = async () => {
          const mine = ++reads;
          try {
            const document = await m.get();
            if (mine === reads) patch({ document, facts: document.facts, status: m.status() });
          } catch (error) {
            // what get() rejects with is always a UserMemoryError
            if (mine === reads) patch({ error: /** @type {import("./index.js").UserMemoryError} */ (error) });
          }
        };
        unsubscribe.push(
          m.on("update", reload),
          m.on("queued", status),
          // A finished extraction clears the last failure: memory is healthy again.
          m.on("processed", () => patch({ status: m.status(), error: null })),
          m.on("error", (e) => patch({ status: m.status(), error: e.error })),
        );
        status();
        reload();
      },
      (error) => patch({ error }),
    );
    return () => {
      live = false;
      for (const off of unsubscribe) off();
    };
  }, [memory]);
  return state;
}
