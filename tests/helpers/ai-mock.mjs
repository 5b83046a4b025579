// An AI SDK mock language model that plays a tool-calling agent from a script, for tests of
// the memory tools (tests/js/ai-sdk-tools.test.mjs, and the packaging test against AI SDK 6
// and 7). Works with the SDK's MockLanguageModelV3 and MockLanguageModelV4 (same shapes).
//
//   const model = toolCallingModel(MockLanguageModelV3, [
//     () => ({ tool: "searchMemory", input: { query: "rabbit" } }),      // step 1 calls a tool
//     (call) => ({ text: JSON.stringify(toolResultsOf(call)) }),          // step 2 answers
//   ]);

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A mock model whose call `i` does what `steps[i](callOptions)` says. */
export function toolCallingModel(Mock, steps) {
  let i = 0;
  return new Mock({
    doGenerate: async (call) => {
      const step = steps[i];
      if (!step) throw new Error(`the script has ${steps.length} steps; call ${i + 1} was not expected`);
      i += 1;
      const next = step(call);
      if (next.tool) {
        return {
          content: [
            { type: "tool-call", toolCallId: `call-${i}`, toolName: next.tool, input: JSON.stringify(next.input) },
          ],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: "text", text: next.text }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });
}

/** The tool results in the last message of a model call's prompt (what the tools returned). */
export function toolResultsOf(call) {
  const last = call.prompt.at(-1);
  if (last?.role !== "tool") return [];
  return last.content
    .filter((p) => p.type === "tool-result")
    .map((p) => (p.output?.type === "json" ? p.output.value : p.output));
}
