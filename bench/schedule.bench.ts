/**
 * Schedule math: what one `next()` costs, raw cron-parser against the shared, memoized Schedule, and `every`.
 *
 * Each tinybench iteration runs a batch of BATCH calls (one call is close to the cost of the timestamps around it);
 * ops/s is calls per second derived from the mean batch time.
 *
 *   node dist/bench/schedule.bench.js [--quick] [--json]
 */
import { pathToFileURL } from 'node:url';
import { CronExpressionParser } from 'cron-parser';
import { runBatchScenarios } from './lib/batch-bench.js';
import { CronSchedule } from '../src/tasks/schedule/cron.js';
import { parseSchedule, ScheduleCache } from '../src/tasks/schedule/index.js';

export interface ScheduleBenchResult {
  readonly name: string;
  readonly opsPerSec: number;
  readonly notes?: string;
}

const BATCH = 1000;
const START = Date.UTC(2026, 0, 1);
const NY = 'America/New_York';
const EXPRESSION = '*/15 * * * *';

interface Scenario {
  readonly name: string;
  readonly notes: string;
  /** Calls per batch, when not BATCH. */
  readonly calls?: number;
  setup(): () => void;
}

/** A fresh schedule per batch, walking forward: every `next` is a memo miss, i.e. a full evaluation. */
function missChain(timezone: string): () => void {
  let t = START;
  return () => {
    const schedule = new CronSchedule(EXPRESSION, timezone);
    for (let i = 0; i < BATCH; i++) t = schedule.next(t);
  };
}

const scenarios: Scenario[] = [
  {
    name: 'cron-parser next(), UTC',
    notes: 'one parsed CronExpression, reset(after) + next() per call (the floor of any cron-parser use)',
    setup() {
      const expression = CronExpressionParser.parse(EXPRESSION, { tz: 'UTC' });
      let t = START;
      return () => {
        for (let i = 0; i < BATCH; i++) {
          expression.reset(new Date(t));
          t = expression.next().getTime();
        }
      };
    },
  },
  {
    name: 'cron-parser next(), America/New_York',
    notes: 'as above in the zone (not DST-correct)',
    setup() {
      const expression = CronExpressionParser.parse(EXPRESSION, { tz: NY });
      let t = START;
      return () => {
        for (let i = 0; i < BATCH; i++) {
          expression.reset(new Date(t));
          t = expression.next().getTime();
        }
      };
    },
  },
  {
    name: 'cron-parser parse + next(), America/New_York',
    notes: 'a naive per-task evaluation: parse the expression for every question',
    setup() {
      let t = START;
      return () => {
        for (let i = 0; i < BATCH; i++) t = CronExpressionParser.parse(EXPRESSION, { tz: NY, currentDate: new Date(t) }).next().getTime();
      };
    },
  },
  {
    name: 'Schedule.next() miss, UTC',
    notes: 'memo miss every call: cron-parser in UTC, no zone work',
    setup: () => missChain('UTC'),
  },
  {
    name: 'Schedule.next() miss, America/New_York',
    notes: 'memo miss every call: cron-parser on wall times + Intl mapping to instants (DST-correct)',
    setup: () => missChain(NY),
  },
  {
    name: 'Schedule.next() shared, 1000 tasks per scheduled time, America/New_York',
    notes: '1000 tasks ask next(scheduledFor) of the same time, then time moves on: 1 miss + 999 hits per batch',
    setup() {
      const schedule = parseSchedule({ cron: EXPRESSION, timezone: NY });
      let t = START;
      return () => {
        let next = t;
        for (let i = 0; i < BATCH; i++) next = schedule.next(t);
        t = next;
      };
    },
  },
  {
    name: 'Schedule.next() hit, ticks inside a known interval, America/New_York',
    notes: 'after values moving 1 s at a time inside [prev, next): binary search in the memo',
    setup() {
      const schedule = parseSchedule({ cron: EXPRESSION, timezone: NY });
      let t = START;
      return () => {
        for (let i = 0; i < BATCH; i++) {
          schedule.next(t);
          t += 1000;
        }
      };
    },
  },
  {
    name: 'every next()',
    notes: "every: '10s', plain arithmetic",
    setup() {
      const schedule = parseSchedule({ every: '10s' });
      let t = START + 1;
      return () => {
        for (let i = 0; i < BATCH; i++) t = schedule.next(t) + 1;
      };
    },
  },
  {
    name: 'ScheduleCache.get() hit, cron + zone',
    notes: 'the claim path: validate the spec and find the shared Schedule',
    setup() {
      const cache = new ScheduleCache();
      const keep = cache.get({ cron: EXPRESSION, timezone: NY });
      return () => {
        for (let i = 0; i < BATCH; i++) if (cache.get({ cron: EXPRESSION, timezone: NY }) !== keep) throw new Error('not shared');
      };
    },
  },
];

export async function runScheduleBench(options: { quick?: boolean } = {}): Promise<ScheduleBenchResult[]> {
  const quick = options.quick === true;
  return runBatchScenarios(
    scenarios.map((scenario) => ({ ...scenario, calls: scenario.calls ?? BATCH })),
    { time: quick ? 150 : 1000, warmupIterations: quick ? 2 : 10, iterations: 5 },
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const results = await runScheduleBench({ quick: process.argv.includes('--quick') });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else {
    console.table(
      results.map((r) => ({ name: r.name, 'calls/s': r.opsPerSec.toLocaleString('en-US'), 'µs/call': Math.round(1e8 / r.opsPerSec) / 100 })),
    );
  }
}
