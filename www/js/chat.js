// The chat pane: the conversation, the composer, and the model call with memory.
// Before each call: inject(messages) → the system prompt. After the answer:
// observe(threadId, messages).
import { h, icon, replace } from "./dom.js";
import { plural } from "./format.js";
import { chat, splitThinking } from "./llm.js";
import { toast } from "./ui.js";

const SYSTEM_PROMPT =
  "You are a friendly, concise assistant. The memory block below (if any) holds what you remember " +
  "about the user from earlier conversations; it may be incomplete or out of date. Use it when it " +
  "helps, and do not recite it unless asked.";

const SUGGESTIONS = [
  "Hi! I'm Mia, a backend engineer at Acme. We write Go microservices on Kubernetes.",
  "I'm learning Rust in the evenings. I prefer short answers with code examples.",
  "I'm vegetarian and I cook for two. Any idea for a quick dinner tonight?",
];

const $ = (id) => document.getElementById(id);

function newThreadId() {
  const rand = crypto.getRandomValues(new Uint32Array(1))[0].toString(36);
  return `chat-${Date.now().toString(36)}-${rand}`;
}

// ---- a small, safe Markdown subset (fenced code, lists, inline code, bold) -----------

function inline(text) {
  const out = [];
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    out.push(t.startsWith("`") ? h("code", null, t.slice(1, -1)) : h("strong", null, t.slice(2, -2)));
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function markdown(text) {
  const nodes = [];
  const parts = text.split(/^```[^\n]*\n?/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      nodes.push(h("pre", { class: "code" }, h("code", null, part.replace(/\n$/, ""))));
      return;
    }
    for (const raw of part.split(/\n{2,}/)) {
      const para = raw.replace(/^\s*\n|\n\s*$/g, "");
      if (!para.trim()) continue;
      const lines = para.split("\n");
      const bullet = /^\s*(?:[-*•]|\d+[.)])\s+/;
      if (lines.every((l) => bullet.test(l) || !l.trim())) {
        const ordered = /^\s*\d/.test(lines[0]);
        nodes.push(
          h(
            ordered ? "ol" : "ul",
            null,
            lines.filter((l) => l.trim()).map((l) => h("li", null, inline(l.replace(bullet, "")))),
          ),
        );
      } else {
        nodes.push(
          h(
            "p",
            null,
            lines.flatMap((l, k) => (k ? [h("br"), ...inline(l)] : inline(l))),
          ),
        );
      }
    }
  });
  return nodes;
}

/**
 * `app` provides: memory (getter), config, agent, onDraftChange(), onConversationChange().
 */
export function createChat(app) {
  const key = `um-demo:chat:${app.agent}`;
  let conv = load();
  let controller = null;

  function load() {
    try {
      const c = JSON.parse(localStorage.getItem(key));
      if (c && typeof c.threadId === "string" && Array.isArray(c.messages)) return c;
    } catch {}
    return { threadId: newThreadId(), messages: [] };
  }

  function save() {
    try {
      localStorage.setItem(
        key,
        JSON.stringify({ threadId: conv.threadId, messages: conv.messages.filter((m) => !m.pending) }),
      );
    } catch {}
  }

  /** The conversation as the model and the memory see it (no errors, no reasoning). */
  function messages() {
    return conv.messages
      .filter((m) => (m.role === "user" || m.role === "assistant") && !m.error && m.content)
      .map((m) => ({ role: m.role, content: m.role === "assistant" ? splitThinking(m.content).answer : m.content }));
  }

  function draft() {
    return $("input").value.trim();
  }

  /** The conversation plus the draft: what the next prompt will be about. */
  function query() {
    const d = draft();
    return d ? [...messages(), { role: "user", content: d }] : messages();
  }

  // ---- rendering --------------------------------------------------------------------

  function memoryNote(m) {
    if (!m.memory) return h("div", { class: "msg-meta muted" }, "No memory in this prompt");
    return h(
      "details",
      { class: "msg-meta msg-memory" },
      h(
        "summary",
        null,
        icon("brain"),
        `Memory: ${plural(m.memory.facts, "fact")} · ${plural(m.memory.tokens, "token")}`,
      ),
      h("pre", { class: "block" }, m.memory.block),
    );
  }

  function messageNode(m, i) {
    if (m.role === "user") {
      return h("li", { class: "msg msg-user" }, h("div", { class: "bubble" }, m.content));
    }
    if (m.error) {
      return h(
        "li",
        { class: "msg msg-error", role: "alert" },
        h("div", { class: "bubble" }, h("strong", null, "The model call failed: "), m.error),
        i === conv.messages.length - 1
          ? h("button", { type: "button", class: "btn btn-small", onclick: retry }, "Retry")
          : null,
      );
    }
    const { thinking, answer, open } = splitThinking(m.content);
    return h(
      "li",
      { class: `msg msg-assistant${m.pending ? " pending" : ""}` },
      h("div", { class: "avatar", "aria-hidden": "true" }, icon("bolt")),
      h(
        "div",
        { class: "msg-body" },
        thinking
          ? h(
              "details",
              { class: "thinking", open: m.pending && open },
              h("summary", null, m.pending && open ? "Thinking…" : "Reasoning"),
              h("p", null, thinking),
            )
          : null,
        h(
          "div",
          { class: "bubble" },
          answer
            ? markdown(answer)
            : m.pending
              ? h("span", { class: "typing", "aria-label": "The assistant is typing" }, h("i"), h("i"), h("i"))
              : m.stopped
                ? h("em", { class: "muted" }, "Stopped.")
                : "",
        ),
        m.pending ? null : memoryNote(m),
      ),
    );
  }

  function emptyState() {
    return h(
      "li",
      { class: "chat-empty" },
      h("div", { class: "chat-empty-icon", "aria-hidden": "true" }, icon("brain")),
      h("h2", null, "Tell the assistant about yourself"),
      h(
        "p",
        null,
        "After a short pause the conversation is turned into a profile and facts, shown under Memory. ",
        "Start a new chat and the assistant still knows you: the most relevant facts go into every prompt.",
      ),
      h(
        "div",
        { class: "suggestions", role: "group", "aria-label": "Example messages" },
        SUGGESTIONS.map((s) =>
          h("button", { type: "button", class: "suggestion", onclick: () => useSuggestion(s) }, s),
        ),
      ),
    );
  }

  function useSuggestion(s) {
    const input = $("input");
    input.value = s;
    autosize();
    input.focus();
    renderComposer();
    app.onDraftChange();
  }

  function render() {
    const list = $("messages");
    const nearBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
    replace(list, conv.messages.length ? conv.messages.map(messageNode) : emptyState());
    if (!conv.messages.length) list.scrollTop = 0;
    else if (nearBottom || conv.messages.at(-1)?.pending) list.scrollTop = list.scrollHeight;
    // Screen readers announce the answer once it is complete, not every streamed piece.
    list.setAttribute("aria-busy", String(Boolean(conv.messages.at(-1)?.pending)));
    $("thread-id").textContent = conv.messages.length ? conv.threadId : "";
    renderComposer();
  }

  /** Re-renders only the last message (streaming). */
  let frame = 0;
  function renderLast() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      const list = $("messages");
      const i = conv.messages.length - 1;
      const node = messageNode(conv.messages[i], i);
      list.lastElementChild?.replaceWith(node);
      list.scrollTop = list.scrollHeight;
    });
  }

  function renderComposer() {
    const busy = Boolean(controller);
    const send = $("send");
    send.replaceChildren(icon(busy ? "stop" : "send"), busy ? "Stop" : "Send");
    send.setAttribute("aria-label", busy ? "Stop the answer" : "Send message");
    send.classList.toggle("btn-stop", busy);
    send.disabled = !busy && (!app.config.configured || !app.memory || !draft());
  }

  function autosize() {
    const input = $("input");
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
  }

  // ---- sending ----------------------------------------------------------------------

  async function send(text) {
    if (controller || !text.trim() || !app.config.configured || !app.memory) return;
    conv.messages.push({ role: "user", content: text.trim() });
    $("input").value = "";
    autosize();
    save();
    await answer();
  }

  async function retry() {
    if (conv.messages.at(-1)?.error) conv.messages.pop();
    await answer();
  }

  async function answer() {
    const memory = app.memory;
    // "New chat" while this answer is being prepared or streamed replaces `conv`: from then
    // on this answer belongs to a conversation that is gone, and must not touch the new one.
    const mine = conv;
    const history = messages();
    let block = "";
    let used = null;
    try {
      block = await memory.inject(history);
      if (block) {
        const ex = await memory.explain(history);
        used = { block, tokens: ex.tokens, facts: ex.facts.filter((f) => f.included).length };
      }
    } catch (e) {
      toast(`Could not read memory for this prompt: ${e.message}`, { kind: "error" });
    }
    if (conv !== mine) return;
    const system = block ? `${SYSTEM_PROMPT}\n\n${block}` : SYSTEM_PROMPT;
    const reply = { role: "assistant", content: "", memory: used, pending: true };
    mine.messages.push(reply);
    const ctl = new AbortController();
    controller = ctl;
    render();
    app.onConversationChange();
    try {
      await chat({
        messages: [{ role: "system", content: system }, ...history],
        model: app.config.model,
        signal: ctl.signal,
        onText: (t) => {
          reply.content = t;
          if (conv === mine) renderLast();
        },
      });
      app.onEndpoint(true);
    } catch (e) {
      if (ctl.signal.aborted) {
        reply.stopped = true;
      } else {
        app.onEndpoint(false, e.message);
        mine.messages[mine.messages.indexOf(reply)] = { role: "assistant", error: e.message, content: "" };
      }
    } finally {
      reply.pending = false;
      if (conv === mine) controller = null;
    }
    if (conv !== mine) return;
    if (!reply.content && reply.stopped)
      mine.messages.splice(mine.messages.indexOf(reply), 1, { role: "assistant", content: "", stopped: true });
    save();
    render();
    app.onConversationChange();
    // Remember the conversation (debounced by the library).
    const seen = messages();
    if (seen.at(-1)?.role === "assistant") {
      try {
        memory.observe(conv.threadId, seen);
      } catch (e) {
        toast(`Memory did not take this conversation: ${e.message}`, { kind: "error" });
      }
    }
  }

  function newChat() {
    if (controller) controller.abort();
    controller = null; // the abandoned answer no longer owns the composer
    conv = { threadId: newThreadId(), messages: [] };
    save();
    render();
    app.onConversationChange();
    $("input").focus();
  }

  // ---- wiring -----------------------------------------------------------------------

  const input = $("input");
  input.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey || e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    if (!controller) send(input.value);
  });
  input.addEventListener("input", () => {
    autosize();
    renderComposer();
    app.onDraftChange();
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    if (controller) controller.abort();
    else send(input.value);
  });
  $("new-chat").addEventListener("click", newChat);

  render();
  return { messages, query, render, renderComposer, hasDraft: () => Boolean(draft()) };
}
