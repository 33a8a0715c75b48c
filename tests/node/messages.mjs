// Anthropic's Messages API through accord serve, from Node, with the official @anthropic-ai/sdk
// unchanged: messages.parse with zodOutputFormat (output_config.format), a forced tool call, and
// messages.stream of each. Run by tests/test_serve_node.py with ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY pointing at the proxy (the SDK reads them) and ACCORD_SERVE_PROMPT set (its
// "{which}" names each call); prints one JSON object.
import Anthropic from "@anthropic-ai/sdk";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { z } from "zod";

const client = new Anthropic({ maxRetries: 0 }); // baseURL and apiKey from ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
const prompt = (which) => process.env.ACCORD_SERVE_PROMPT.replace("{which}", which);
const Review = z.object({ stars: z.number().int(), sentiment: z.enum(["positive", "negative", "neutral"]) });
const tool = {
  name: "Review",
  description: "Record the review's rating.",
  input_schema: { type: "object", properties: { stars: { type: "integer" }, sentiment: { enum: ["positive", "negative", "neutral"] } },
                  required: ["stars", "sentiment"] },
};
const extra = { accord: { k: 5 } }; // a field the types do not know: spread from a variable
const out = {};

const parsed = await client.messages.parse({
  model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: prompt("parse") }],
  output_config: { format: zodOutputFormat(Review) }, ...extra,
});
out.parse = { parsed: parsed.parsed_output, text: parsed.content[0].text, type: parsed.type, id: parsed.id, stop: parsed.stop_reason,
              usage: parsed.usage, accord: parsed.accord };

const called = await client.messages.create({
  model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: prompt("tool") }], tools: [tool],
  tool_choice: { type: "tool", name: "Review" }, ...extra,
});
out.tool = { block: called.content[0], stop: called.stop_reason, accord: called.accord };

const stream = client.messages.stream({
  model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: prompt("stream") }],
  output_config: { format: zodOutputFormat(Review) }, ...extra,
});
const types = [];
for await (const event of stream) types.push(event.type);
const final = await stream.finalMessage();
out.stream = { types, parsed: final.parsed_output, accord: final.accord };

const toolStream = client.messages.stream({
  model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: prompt("tool-stream") }], tools: [tool],
  tool_choice: { type: "tool", name: "Review" }, ...extra,
});
const inputs = [];
toolStream.on("inputJson", (partial) => inputs.push(partial));
const toolFinal = await toolStream.finalMessage();
out.toolStream = { block: toolFinal.content[0], pieces: inputs.length, stop: toolFinal.stop_reason };

console.log(JSON.stringify(out));
