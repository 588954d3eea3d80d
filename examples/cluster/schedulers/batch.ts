/** Batch jobs: bin-pack, preferring compute-class nodes; no spreading between a job's allocations. */
import { placementScheduler } from './placement.js';

export default placementScheduler({ antiAffinity: 0, preferClass: { nodeClass: 'compute', bonus: 0.2 }, pickAmong: 32 });
