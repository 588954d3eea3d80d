import { createEngine } from '../../src/index.js';

const engine = createEngine({
  threads: 2,
  schedulers: { count: new URL('./scheduler.js', import.meta.url) },
  tables: ['words'],
});
await engine.start();
const texts = { a: 'to be or not to be', b: 'all is well', c: 'that ends well' };
let left = Object.keys(texts).length;
const allAcked = new Promise((done) => engine.broker.events.on('broker:ack', () => --left === 0 && done(true)));
for (const [jobId, text] of Object.entries(texts)) engine.enqueue({ id: `eval-${jobId}`, jobId, type: 'count', priority: 50, payload: text });
await allAcked;
for (const { key, value } of engine.state.snapshot().list('words')) console.log(key, value); // a 6, b 3, c 3
await engine.stop();
