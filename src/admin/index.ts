// `tickpool/admin`: the types of `engine.admin`, what an operator sees of an engine and may do to it (the dashboard,
// `tickpool/dashboard`, is built on it). The API itself is on every engine: `engine.admin`.
export type {
  AdminEvaluationState,
  DeliveryRecord,
  ErrorView,
  EvaluationDetail,
  EvaluationPage,
  EvaluationQuery,
  EvaluationSummary,
  QueueDepths,
} from '../broker/admin-types.js';
export { ADMIN_EVALUATION_STATES, MAX_PAGE_SIZE } from '../broker/admin-types.js';
export type { ActorOptions, AdminEvents, ProcessView, TaskDetail, TaskView, ThreadView } from '../engine/admin-types.js';
export { EngineAdmin, MAX_BULK } from '../engine/engine-admin.js';
