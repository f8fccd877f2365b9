// End-to-end tests of `pinfer serve` through the official openai client
// and, for its ollama API, the official ollama client, against the built-in Shakespeare model on loopback. PINFER_BIN names a
// built binary (server/e2e_test.go passes one); otherwise it is built here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Ollama } from 'ollama';

const here = dirname(fileURLToPath(import.meta.url));
const KEY = 'e2e-key';
let server, client, ollama, baseURL, model, tmp;

// shared/models sits beside the checkout: look for it above this directory.
function sharedModels() {
  for (let d = here; ; d = dirname(d)) {
    const p = join(d, 'shared', 'models');
    if (existsSync(p)) return p;
    if (dirname(d) === d) throw new Error('shared/models not found above ' + here);
  }
}

const reference = JSON.parse(readFileSync(join(sharedModels(), 'shakespeare-relu-6m', 'reference.json'), 'utf8'));
const romeo = reference.prompts.find((p) => p.text === 'ROMEO:');

// Starts the server on a free port (--port 0) and reads the address it prints.
function startServer(bin) {
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', '-np', '4', '-t', '2', '--api-key', KEY],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (s) => {
      err += s;
      const m = err.match(/serving (\S+) on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolve({ proc, model: m[1], url: m[2] });
    });
    proc.on('exit', (code) => reject(new Error(`pinfer serve exited with ${code}: ${err}`)));
    proc.on('error', reject);
  });
}

before(async () => {
  let bin = process.env.PINFER_BIN;
  if (!bin) {
    tmp = mkdtempSync(join(tmpdir(), 'pinfer-e2e-'));
    bin = join(tmp, 'pinfer');
    execFileSync('go', ['build', '-o', bin, '../../cmd/pinfer'], { cwd: here, stdio: 'inherit' });
  }
  const s = await startServer(bin);
  server = s.proc;
  model = s.model;
  baseURL = s.url;
  client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  ollama = new Ollama({ host: baseURL, headers: { Authorization: `Bearer ${KEY}` } });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.on('exit', (code, sig) => resolve([code, sig])));
    server.kill('SIGTERM');
    const [code, sig] = await exited;
    assert.equal(code, 0, `exit code ${code}, signal ${sig}`);
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const chatRequest = {
  messages: [{ role: 'system', content: 'Thou art a player.' }, { role: 'user', content: 'Who goes there?' }],
  max_tokens: 40,
  temperature: 0,
};

async function collect(stream) {
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta?.content ?? c.text ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

test('non-streaming chat', async () => {
  const r = await client.chat.completions.create({ model, ...chatRequest });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 40);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 40);
  assert.ok(r.timings.predicted_per_second > 0);
});

test('streaming chat deltas join to the non-streaming text', async () => {
  const whole = await client.chat.completions.create({ model, ...chatRequest });
  const stream = await client.chat.completions.create({ model, ...chatRequest, stream: true, stream_options: { include_usage: true } });
  let usage = null;
  let text = '';
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(chunks > 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, whole.usage);
});

test('a completion continues the prompt as PyTorch does', async () => {
  const r = await client.completions.create({ model, prompt: romeo.text, max_tokens: romeo.greedy_ids.length, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, romeo.greedy_text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, romeo.ids.length);
});

test('8 concurrent streaming clients each get the lone text', async () => {
  const req = { model, ...chatRequest, max_tokens: 48 };
  const lone = (await client.chat.completions.create(req)).choices[0].message.content;
  const results = await Promise.all(Array.from({ length: 8 }, async () =>
    collect(await client.chat.completions.create({ ...req, stream: true }))));
  for (const r of results) {
    assert.equal(r.text, lone);
    assert.equal(r.finish, 'length');
  }
});

test('a client that aborts mid-stream leaves the server answering', async () => {
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt: romeo.text, max_tokens: 400, stream: true }, { signal: controller.signal });
  let got = 0;
  try {
    for await (const chunk of stream) {
      if (++got === 3) controller.abort();
    }
  } catch (e) {
    // Depending on timing the client ends the loop quietly or throws this.
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  assert.ok(got >= 3 && got < 50, `read ${got} chunks`);

  // The slot frees at once: the metrics say so, and the server answers.
  const headers = { Authorization: `Bearer ${KEY}` };
  let busy = -1;
  for (let i = 0; i < 100 && busy !== 0; i++) {
    const m = await (await fetch(baseURL + '/metrics', { headers })).text();
    busy = Number(m.match(/^pinfer_slots_busy (\d+)$/m)[1]);
    if (busy !== 0) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(busy, 0);
  const r = await client.completions.create({ model, prompt: romeo.text, max_tokens: 16, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 16);
  assert.ok(romeo.greedy_text.startsWith(r.choices[0].text));
});

test('a wrong API key is refused with 401', async () => {
  const bad = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model, prompt: 'x', max_tokens: 2 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === 'invalid_api_key');
});

test('an unknown model is refused with 404', async () => {
  await assert.rejects(client.chat.completions.create({ ...chatRequest, model: 'gpt-4o' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && e.param === 'model');
});

// The ollama API, through ollama's own client: the same greedy text as the
// OpenAI endpoints, streamed or not, the counts, the model listings, and
// errors as the client reports them.

test('ollama chat gives the OpenAI chat text', async () => {
  const whole = await client.chat.completions.create({ model, ...chatRequest });
  const options = { temperature: 0, num_predict: chatRequest.max_tokens };
  const r = await ollama.chat({ model, messages: chatRequest.messages, options });
  assert.equal(r.model, model);
  assert.equal(r.message.role, 'assistant');
  assert.equal(r.message.content, whole.choices[0].message.content);
  assert.equal(r.done, true);
  assert.equal(r.done_reason, 'length');
  assert.equal(r.prompt_eval_count, whole.usage.prompt_tokens);
  assert.equal(r.eval_count, whole.usage.completion_tokens);
  assert.ok(r.eval_duration > 0 && r.total_duration >= r.eval_duration);

  let text = '';
  let last = null;
  let parts = 0;
  for await (const part of await ollama.chat({ model, messages: chatRequest.messages, options, stream: true })) {
    text += part.message.content;
    parts++;
    last = part;
  }
  assert.ok(parts > 3);
  assert.equal(text, r.message.content);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, r.eval_count);
});

test('ollama raw generate continues the prompt as PyTorch does', async () => {
  const options = { temperature: 0, num_predict: romeo.greedy_ids.length };
  const r = await ollama.generate({ model, prompt: romeo.text, raw: true, options });
  assert.equal(r.response, romeo.greedy_text);
  assert.equal(r.prompt_eval_count, romeo.ids.length);
  assert.equal(r.eval_count, romeo.greedy_ids.length);
  let text = '';
  let last = null;
  for await (const part of await ollama.generate({ model, prompt: romeo.text, raw: true, options, stream: true })) {
    text += part.response;
    last = part;
  }
  assert.equal(text, romeo.greedy_text);
  assert.equal(last.done_reason, 'length');
});

test('ollama list, ps, show and version describe the model', async () => {
  const { models } = await ollama.list();
  assert.equal(models.length, 1);
  assert.equal(models[0].name, model + ':latest');
  assert.equal(models[0].details.format, 'gguf');
  const ps = await ollama.ps();
  assert.equal(ps.models[0].model, model + ':latest');
  const show = await ollama.show({ model: models[0].name });
  assert.equal(show.model_info['general.architecture'], 'llama');
  assert.ok(show.template.length > 0);
  assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+$/);
  // The listed name generates too.
  const r = await ollama.generate({ model: models[0].name, prompt: 'ROMEO:', options: { num_predict: 2 } });
  assert.equal(r.eval_count, 2);
});

test('structured output: both clients get JSON of the schema', async () => {
  const schema = {
    type: 'object',
    properties: { mood: { enum: ['merry', 'sad'] }, armed: { type: 'boolean' }, lines: { type: 'array', items: { enum: ['ay', 'nay'] }, maxItems: 3 } },
    required: ['mood', 'armed', 'lines'],
    additionalProperties: false,
  };
  const check = (text) => {
    const v = JSON.parse(text);
    assert.deepEqual(Object.keys(v), ['mood', 'armed', 'lines']);
    assert.ok(['merry', 'sad'].includes(v.mood));
    assert.equal(typeof v.armed, 'boolean');
    assert.ok(v.lines.length <= 3 && v.lines.every((l) => l === 'ay' || l === 'nay'));
  };
  const c = await client.chat.completions.create({
    model, messages: chatRequest.messages, max_tokens: 400, seed: 1,
    response_format: { type: 'json_schema', json_schema: { name: 'scene', strict: true, schema } },
  });
  assert.equal(c.choices[0].finish_reason, 'stop');
  check(c.choices[0].message.content);
  const o = await ollama.chat({ model, messages: chatRequest.messages, format: schema, options: { num_predict: 400, seed: 2 } });
  assert.equal(o.done_reason, 'stop');
  check(o.message.content);
});

test('ollama errors reach the client with their status', async () => {
  const isError = (status, text) => (e) => e.name === 'ResponseError' && e.status_code === status && e.error.includes(text);
  const bad = new Ollama({ host: baseURL, headers: { Authorization: 'Bearer wrong' } });
  await assert.rejects(bad.chat({ model, messages: chatRequest.messages }), isError(401, 'unauthorized'));
  await assert.rejects(ollama.generate({ model: 'llama3.2', prompt: 'x' }), isError(404, 'not found'));
  await assert.rejects(ollama.generate({ model, prompt: 'x', format: 'yaml' }), isError(400, 'format'));
  await assert.rejects(ollama.chat({ model, messages: chatRequest.messages, tools: [{ type: 'retrieval', function: { name: 'f' } }] }),
    isError(400, 'tools[0].type must be "function"'));
});

// Tool calling: both clients read the calls the server parses out of the
// reply (held by a grammar to the tool's parameters schema).
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city'],
    },
  },
};

// The arguments match the schema (checked by hand: no validator here).
function checkWeatherArgs(args) {
  assert.equal(typeof args, 'object');
  assert.deepEqual(Object.keys(args).filter((k) => k !== 'city' && k !== 'days'), []);
  assert.equal(typeof args.city, 'string');
  assert.ok([...args.city].length <= 12, args.city);
  if ('days' in args) assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, String(args.days));
}

test('tool calls: the openai client reads tool_calls, whole and streamed', async () => {
  const req = { model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather], tool_choice: 'required', max_tokens: 200, temperature: 0 };
  const r = await client.chat.completions.create(req);
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.match(call.id, /^[A-Za-z0-9]{9}$/);
  assert.equal(call.function.name, 'get_weather');
  checkWeatherArgs(JSON.parse(call.function.arguments));

  // Streamed, the client's stream helper puts the deltas together.
  const stream = client.chat.completions.stream({ ...req, stream: true });
  let deltas = 0;
  stream.on('chunk', (chunk) => { if (chunk.choices[0]?.delta?.tool_calls) deltas++; });
  const final = await stream.finalChatCompletion();
  const f = final.choices[0];
  assert.ok(deltas > 2, `${deltas} tool_calls deltas`);
  assert.equal(f.finish_reason, 'tool_calls');
  assert.equal(f.message.tool_calls.length, 1);
  assert.equal(f.message.tool_calls[0].type, 'function');
  assert.match(f.message.tool_calls[0].id, /^[A-Za-z0-9]{9}$/);
  assert.equal(f.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(f.message.tool_calls[0].function.arguments, call.function.arguments);

  // The conversation goes on with the tool's answer, as an agent's does.
  const next = await client.chat.completions.create({
    ...req, tool_choice: 'none', max_tokens: 8,
    messages: [...req.messages, c.message, { role: 'tool', tool_call_id: call.id, content: '18C, sunny' }],
  });
  assert.equal(typeof next.choices[0].message.content, 'string');
  assert.equal(next.choices[0].message.tool_calls, undefined);
});

test('tool calls: the ollama client reads message.tool_calls', async () => {
  // ollama has no tool_choice: of some seeds, the model calls the tool.
  let called = 0;
  for (let seed = 0; seed < 6; seed++) {
    const r = await ollama.chat({
      model, messages: [{ role: 'user', content: 'Tool! Tool! Tool! toll the bell, toll!' }], tools: [weather],
      options: { seed, temperature: 1.5, num_predict: 120 },
    });
    if (!r.message.tool_calls) continue;
    called++;
    assert.equal(r.done_reason, 'stop');
    assert.equal(r.message.tool_calls.length, 1);
    assert.equal(r.message.tool_calls[0].function.name, 'get_weather');
    checkWeatherArgs(r.message.tool_calls[0].function.arguments);
  }
  assert.ok(called > 0, 'no seed called the tool');
});
