// The Responses API through accord serve, from Node, with the clients unchanged: the official
// openai package's responses.parse and responses.stream, and the Vercel AI SDK's generateObject
// with its default provider, openai("model"), which speaks the Responses API. Run by
// tests/test_serve_node.py with OPENAI_BASE_URL and OPENAI_API_KEY pointing at the proxy (the
// AI SDK's default provider reads them) and ACCORD_SERVE_PROMPT set (its "{which}" names each
// call); prints one JSON object.
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { generateObject } from "ai";
import { openai } from "@ai-sdk/openai";

const client = new OpenAI({ maxRetries: 0 }); // baseURL and apiKey from OPENAI_BASE_URL and OPENAI_API_KEY
const prompt = (which) => process.env.ACCORD_SERVE_PROMPT.replace("{which}", which);
const Review = z.object({ stars: z.number().int(), sentiment: z.enum(["positive", "negative", "neutral"]) });
const out = {};

const parsed = await client.responses.parse({
  model: "fake-model",
  input: prompt("parse"),
  text: { format: zodTextFormat(Review, "Review") },
});
out.parse = { parsed: parsed.output_parsed, text: parsed.output_text, object: parsed.object, id: parsed.id, status: parsed.status,
              usage: parsed.usage, accord: parsed.accord };

const stream = client.responses.stream({
  model: "fake-model",
  input: prompt("stream"),
  text: { format: zodTextFormat(Review, "Review") },
});
const types = [];
for await (const event of stream) types.push(event.type);
const final = await stream.finalResponse();
out.stream = { types, parsed: final.output_parsed };

const generated = await generateObject({ model: openai("fake-model"), schema: Review, prompt: prompt("ai-sdk") });
out.aiSdk = { object: generated.object, usage: generated.usage, finishReason: generated.finishReason, modelId: generated.response.modelId,
              accord: generated.response.body?.accord ?? null };

console.log(JSON.stringify(out));
