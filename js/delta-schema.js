// The JSON schema of the memory delta the extraction LLM answers with (OpenAI strict mode:
// every property required, optional ones nullable). Generated from src/llm/schema.rs;
// `UPDATE_DELTA_SCHEMA=1 cargo test --lib schema` rewrites it.
export const DELTA_SCHEMA = {
  type: "object",
  properties: {
    newFacts: {
      anyOf: [
        {
          type: "array",
          items: {
            type: "object",
            properties: {
              content: { type: "string" },
              category: {
                type: "string",
                enum: ["preference", "knowledge", "context", "behavior", "goal", "correction"],
              },
              confidence: { type: "number" },
              scope: { $ref: "#/$defs/scope" },
              durability: { $ref: "#/$defs/durability" },
              authority: { $ref: "#/$defs/authority" },
              expected_valid_days: { type: ["integer", "null"] },
              sourceError: { type: ["string", "null"] },
            },
            required: [
              "content",
              "category",
              "confidence",
              "scope",
              "durability",
              "authority",
              "expected_valid_days",
              "sourceError",
            ],
            additionalProperties: false,
          },
        },
        { type: "null" },
      ],
    },
    factsToRemove: {
      anyOf: [
        {
          type: "array",
          items: {
            anyOf: [
              { type: "string" },
              {
                type: "object",
                properties: {
                  id: { type: "string" },
                  reason: { type: ["string", "null"] },
                  scope: { $ref: "#/$defs/scope" },
                  replacementFactIndex: { type: ["integer", "null"] },
                },
                required: ["id", "reason", "scope", "replacementFactIndex"],
                additionalProperties: false,
              },
            ],
          },
        },
        { type: "null" },
      ],
    },
    factsToReinforce: { anyOf: [{ type: "array", items: { type: "string" } }, { type: "null" }] },
    user: {
      anyOf: [
        {
          type: "object",
          properties: {
            workContext: { $ref: "#/$defs/section" },
            personalContext: { $ref: "#/$defs/section" },
            topOfMind: { $ref: "#/$defs/section" },
          },
          required: ["workContext", "personalContext", "topOfMind"],
          additionalProperties: false,
        },
        { type: "null" },
      ],
    },
    history: {
      anyOf: [
        {
          type: "object",
          properties: {
            recentMonths: { $ref: "#/$defs/section" },
            earlierContext: { $ref: "#/$defs/section" },
            longTermBackground: { $ref: "#/$defs/section" },
          },
          required: ["recentMonths", "earlierContext", "longTermBackground"],
          additionalProperties: false,
        },
        { type: "null" },
      ],
    },
  },
  required: ["newFacts", "factsToRemove", "factsToReinforce", "user", "history"],
  additionalProperties: false,
  $defs: {
    section: {
      anyOf: [
        {
          type: "object",
          properties: {
            summary: { type: "string" },
            shouldUpdate: { type: "boolean" },
            scope: { $ref: "#/$defs/scope" },
            durability: { $ref: "#/$defs/durability" },
            authority: { $ref: "#/$defs/authority" },
          },
          required: ["summary", "shouldUpdate", "scope", "durability", "authority"],
          additionalProperties: false,
        },
        { type: "null" },
      ],
    },
    scope: { type: ["string", "null"], enum: ["user", "thread", "project", null] },
    durability: { type: ["string", "null"], enum: ["durable", "temporary", null] },
    authority: { type: ["string", "null"], enum: ["descriptive", "transactional", null] },
  },
};
