// The official openai npm client against `rwkvd http` (run by tests/python/test_http_openai.py).
// Env: BASE_URL (http://127.0.0.1:PORT/v1), API_KEY, OUT (where the results go as JSON for the
// Python side to compare with the worker's own answers). Asserts what the client alone can tell:
// the shapes it parses, streaming equal to non-streaming, float equal to base64, error classes.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
assert.equal(out.models.length, 1);
const model = out.models[0];
const retrieved = await client.models.retrieve(model);
assert.equal(retrieved.id, model);

const params = { model, prompt: 'The capital of France', max_tokens: 12, temperature: 0 };
const completion = await client.completions.create(params);
assert.equal(completion.object, 'text_completion');
assert.equal(completion.choices.length, 1);
assert.equal(completion.usage.completion_tokens + completion.usage.prompt_tokens, completion.usage.total_tokens);
out.completion = completion.choices[0].text;
out.completion_finish = completion.choices[0].finish_reason;

let streamed = '';
let finish = null;
let usage = null;
const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
assert.equal(streamed, out.completion);
assert.equal(finish, out.completion_finish);
assert.deepEqual(usage, completion.usage);

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name a colour.' },
];
const chatParams = { model, messages, max_tokens: 10, temperature: 0 };
const chat = await client.chat.completions.create(chatParams);
assert.equal(chat.object, 'chat.completion');
assert.equal(chat.choices[0].message.role, 'assistant');
out.chat = chat.choices[0].message.content;
out.chat_finish = chat.choices[0].finish_reason;

let chatStreamed = '';
let role = null;
let chatFinish = null;
for await (const chunk of await client.chat.completions.create({ ...chatParams, stream: true })) {
  assert.equal(chunk.object, 'chat.completion.chunk');
  const c = chunk.choices[0];
  if (c.delta.role) role = c.delta.role;
  if (c.delta.content) chatStreamed += c.delta.content;
  if (c.finish_reason) chatFinish = c.finish_reason;
}
assert.equal(role, 'assistant');
assert.equal(chatStreamed, out.chat);
assert.equal(chatFinish, out.chat_finish);

const texts = ['hello world', 'a second, longer input'];
const floats = await client.embeddings.create({ model, input: texts, encoding_format: 'float' });
const b64 = await client.embeddings.create({ model, input: texts });  // the client asks base64
assert.equal(floats.data.length, 2);
out.embeddings_float = floats.data.map((d) => d.embedding);
out.embeddings_base64 = b64.data.map((d) => Array.from(d.embedding));
assert.deepEqual(out.embeddings_base64, out.embeddings_float.map((r) => Array.from(Float32Array.from(r))));
out.embedding_tokens = floats.usage.prompt_tokens;

// Errors come as the client's error classes, with OpenAI's fields.
await assert.rejects(client.completions.create({ ...params, model: 'no-such-model' }), (e) => {
  assert.ok(e instanceof OpenAI.NotFoundError, String(e));
  assert.equal(e.code, 'model_not_found');
  return true;
});
await assert.rejects(client.chat.completions.create({ ...chatParams, temperature: 7 }), (e) => {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.param, 'temperature');
  return true;
});
const wrongKey = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(wrongKey.models.list(), (e) => {
  assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
  assert.equal(e.status, 401);
  return true;
});

writeFileSync(process.env.OUT, JSON.stringify(out));
console.log('openai client: all checks passed');
