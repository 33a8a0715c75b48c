// The official Node openai client against accord serve, unchanged: one create, one parse, one
// stream. Run by tests/test_serve_node.py with ACCORD_SERVE_URL, ACCORD_SERVE_KEY and
// ACCORD_SERVE_PROMPT set; prints one JSON object with what came back.
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

const client = new OpenAI({ baseURL: process.env.ACCORD_SERVE_URL, apiKey: process.env.ACCORD_SERVE_KEY, maxRetries: 0 });
const prompt = process.env.ACCORD_SERVE_PROMPT;
const Review = z.object({ stars: z.number().int(), sentiment: z.enum(["positive", "negative", "neutral"]) });
const format = zodResponseFormat(Review, "Review");
const out = {};

const created = await client.chat.completions.create({
  model: "fake-model",
  messages: [{ role: "user", content: `${prompt} (create)` }],
  response_format: format,
  accord: { k: 5 },
});
out.create = { content: created.choices[0].message.content, accord: created.accord, object: created.object, id: created.id };

const parsed = await client.chat.completions.parse({
  model: "fake-model",
  messages: [{ role: "user", content: `${prompt} (parse)` }],
  response_format: format,
});
out.parse = { parsed: parsed.choices[0].message.parsed, accord: parsed.accord };

const stream = await client.chat.completions.create({
  model: "fake-model",
  messages: [{ role: "user", content: `${prompt} (stream)` }],
  response_format: format,
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.delta?.content ?? "";
    finish = choice.finish_reason ?? finish;
  }
}
out.stream = { text, finish, usage, chunks };

console.log(JSON.stringify(out));
