// `tickpool/broker`: Nomad's evaluation broker as a building block, for those who run their own workers. The engine
// (`tickpool`) wires one up; this entry point is for using one without it.
export { EvalBroker, type BrokerStats, type Delivery, type EvaluationInfo, type SchedulerStats } from './eval-broker.js';
export type { EvaluationState } from './evaluation.js';
export { evalBrokerDefaults, type EvalBrokerOptions } from './broker-options.js';
export type { BrokerEvents } from './broker-events.js';
export { DEFAULT_NAMESPACE, evaluationDefaults, FAILED_QUEUE, type Evaluation, type EvaluationInput } from './evaluation.js';
export type { AckResult, EvaluationHandle, EvaluationOutcome } from './outcome-waiters.js';
// What only direct callers of ack, nack, fail and remove meet.
export { BrokerDisabledError, EvalNotOutstandingError, NackTimeoutReachedError, TokenMismatchError } from '../errors.js';
