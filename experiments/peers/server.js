// sweetspot's routes in Node's plain idiom, for the `node` preset (study 004 for real):
//
//   node server.js http PORT          one process, one event loop
//   node server.js cluster PORT N     N processes (node:cluster), each a loop, sharing the port
//   node server.js cluster PORT       as many as os.availableParallelism(), Node's own idiom
//                                     (the CPUs this process may run on; not a CPU quota)
//   node server.js pool PORT N        one loop, and /fib on a pool of N worker threads
//
// Routes: /hello, /fib?n=N (naive recursion, N <= 40), /sleep?ms=M (a timer of the loop).
// Anything else is 404; a bad number is 400. Node's standard library only.
'use strict';
const cluster = require('node:cluster');
const http = require('node:http');
const { Worker, isMainThread, parentPort } = require('node:worker_threads');

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

if (!isMainThread) {
  parentPort.on('message', ({ id, n }) => parentPort.postMessage({ id, value: fib(n) }));
  return;
}

const [mode, portText, countText] = process.argv.slice(2);
const port = Number(portText);
const count = Number(countText || (mode === 'cluster' ? require('node:os').availableParallelism() : 1));

// A fixed pool of worker threads; a job waits in a queue for a free one.
function makePool(size) {
  const idle = [];
  const queue = [];
  const pending = new Map();
  let next = 0;
  const run = (worker) => {
    const job = queue.shift();
    if (!job) return idle.push(worker);
    pending.set(job.id, job.done);
    worker.postMessage({ id: job.id, n: job.n });
  };
  for (let i = 0; i < size; i++) {
    const worker = new Worker(__filename);
    worker.on('message', ({ id, value }) => {
      const done = pending.get(id);
      pending.delete(id);
      done(value);
      run(worker);
    });
    idle.push(worker);
  }
  return (n, done) => {
    queue.push({ id: next++, n, done });
    const worker = idle.pop();
    if (worker) run(worker);
  };
}

const pool = mode === 'pool' ? makePool(count) : null;

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function handle(req, res) {
  const url = new URL(req.url, 'http://x');
  const number = (name, top) => {
    const text = url.searchParams.get(name);
    const value = Number(text);
    return text !== null && Number.isInteger(value) && value >= 0 && value <= top ? value : null;
  };
  if (url.pathname === '/hello') return reply(res, 200, 'Hello, World!');
  if (url.pathname === '/fib') {
    const n = number('n', 40);
    if (n === null) return reply(res, 400, 'bad n\n');
    if (pool) return pool(n, (value) => reply(res, 200, String(value)));
    return reply(res, 200, String(fib(n)));
  }
  if (url.pathname === '/sleep') {
    const ms = number('ms', 60000);
    if (ms === null) return reply(res, 400, 'bad ms\n');
    return setTimeout(() => reply(res, 200, 'slept'), ms);
  }
  reply(res, 404, 'not found\n');
}

function serve() {
  const server = http.createServer(handle);
  server.keepAliveTimeout = 60000;
  server.listen(port, '127.0.0.1');
}

if (!['http', 'cluster', 'pool'].includes(mode) || !(port > 0) || !(count >= 1)) {
  console.error('usage: node server.js http|cluster|pool PORT [N]');
  process.exit(2);
}
if (mode === 'cluster' && cluster.isPrimary) {
  for (let i = 0; i < count; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const worker of Object.values(cluster.workers)) worker.kill('SIGTERM');
    process.exit(0);
  });
} else {
  serve();
}
