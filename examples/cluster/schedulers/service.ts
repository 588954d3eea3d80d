/** Service jobs: bin-pack, spreading a job's allocations across nodes (anti-affinity). */
import { placementScheduler } from './placement.js';

export default placementScheduler({ antiAffinity: 0.5, pickAmong: 32 });
