import { createEngine } from '../../src/index.js';

const engine = createEngine({
  threads: 2,
  schedulers: { count: new URL('./scheduler.js', import.meta.url) },
  tables: ['words'],
});
await engine.start();
const texts = { a: 'to be or not to be', b: 'all is well', c: 'that ends well' };
await Promise.all(
  Object.entries(texts).map(async ([jobId, payload]) => {
    // Resolves once the scheduler's plan has committed, with the value it handed back.
    const { value } = await engine.run({ jobId, type: 'count', payload });
    console.log(jobId, value); // a 6, b 3, c 3
  }),
);
await engine.stop();
