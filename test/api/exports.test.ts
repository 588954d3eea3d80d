/**
 * The public API is pinned: for every entry point of package.json's `exports`, the names its types export and the
 * kind of each (class, function, const, interface, type) equal the snapshot below, and its runtime exports are
 * exactly the value names among them. A change to the public surface must change this file too: deliberately.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

type Kind = 'class' | 'function' | 'const' | 'interface' | 'type' | 'enum';

const EXPECTED: Readonly<Record<string, Readonly<Record<string, Kind>>>> = {
  '.': {
    AbortedError: 'class',
    BackoffOptions: 'interface',
    CanceledError: 'class',
    Clock: 'interface',
    createEngine: 'function',
    DeliveryLimitError: 'class',
    DuplicateRunError: 'class',
    Engine: 'class',
    EngineEvents: 'interface',
    EngineOptions: 'interface',
    EngineStats: 'interface',
    ErrorCode: 'type',
    EvaluatePlan: 'type',
    EvaluationHandle: 'interface',
    EvaluationInput: 'interface',
    EvaluationOutcome: 'interface',
    InvalidArgumentError: 'class',
    InvalidEvaluationError: 'class',
    InvalidOptionError: 'class',
    InvalidPlanError: 'class',
    InvalidStateError: 'class',
    InvalidTaskError: 'class',
    ManualClock: 'class',
    memoryBackend: 'function',
    ModuleLoadError: 'class',
    PayloadTooLargeError: 'class',
    Plan: 'interface',
    PlanAttemptsExhaustedError: 'class',
    PlanWrite: 'interface',
    RemoteError: 'class',
    ReplicaGapError: 'class',
    ResourceLimitError: 'class',
    RunCanceledError: 'class',
    RunNotFoundError: 'class',
    RunRecord: 'interface',
    RunResult: 'interface',
    Scheduler: 'type',
    SchedulerEvaluation: 'type',
    SchedulerResult: 'type',
    Snapshot: 'interface',
    StoredRecord: 'interface',
    SupersededError: 'class',
    SyncLimitError: 'class',
    systemClock: 'const',
    TaskAlreadyClaimedError: 'class',
    TaskHandler: 'type',
    TaskInput: 'interface',
    TaskNotClaimedError: 'class',
    TaskRunInput: 'type',
    ThreadExitedError: 'class',
    TickpoolError: 'class',
    UnknownHandlerError: 'class',
    UnknownSchedulerError: 'class',
    UnknownTableError: 'class',
    UserCodeError: 'class',
    WorkContext: 'interface',
  },
  './broker': {
    AckResult: 'interface',
    BrokerDisabledError: 'class',
    BrokerEvents: 'interface',
    BrokerStats: 'interface',
    DEFAULT_NAMESPACE: 'const',
    Delivery: 'interface',
    EvalBroker: 'class',
    evalBrokerDefaults: 'const',
    EvalBrokerOptions: 'interface',
    EvalNotOutstandingError: 'class',
    Evaluation: 'interface',
    evaluationDefaults: 'const',
    EvaluationHandle: 'interface',
    EvaluationInfo: 'interface',
    EvaluationInput: 'interface',
    EvaluationOutcome: 'interface',
    EvaluationState: 'type',
    FAILED_QUEUE: 'const',
    NackTimeoutReachedError: 'class',
    SchedulerStats: 'interface',
    TokenMismatchError: 'class',
  },
  './postgres': {
    BackendUnavailableError: 'class',
    PostgresBackend: 'interface',
    postgresBackend: 'function',
    PostgresBackendOptions: 'interface',
    SchemaVersionError: 'class',
  },
  './admin': {
    ActorOptions: 'interface',
    ADMIN_EVALUATION_STATES: 'const',
    AdminEvaluationState: 'type',
    AdminEvents: 'interface',
    DeliveryRecord: 'interface',
    EngineAdmin: 'class',
    ErrorView: 'interface',
    EvaluationDetail: 'interface',
    EvaluationPage: 'interface',
    EvaluationQuery: 'interface',
    EvaluationSummary: 'interface',
    MAX_BULK: 'const',
    MAX_PAGE_SIZE: 'const',
    ProcessView: 'interface',
    QueueDepths: 'interface',
    TaskDetail: 'interface',
    TaskView: 'interface',
    ThreadView: 'interface',
  },
  './dashboard': {
    createDashboard: 'function',
    DashboardHandler: 'interface',
    DashboardOptions: 'interface',
  },
  './tasks': {
    CatchUpPolicy: 'type',
    DesiredState: 'interface',
    DuplicateRunError: 'class',
    ExecuteContext: 'interface',
    Executor: 'interface',
    FinalRunStatus: 'type',
    ForcedRun: 'interface',
    isFinalStatus: 'function',
    LogWriter: 'interface',
    MaybePromise: 'type',
    MemoryDesiredState: 'class',
    MemoryDesiredStateOptions: 'interface',
    MemoryRunLog: 'class',
    memoryRunLogDefaults: 'const',
    MemoryRunLogOptions: 'interface',
    parseEvery: 'function',
    parseSchedule: 'function',
    QueuedRun: 'interface',
    RunCanceledError: 'class',
    RunCreation: 'interface',
    RunNotFoundError: 'class',
    RunNotYetDueError: 'class',
    RunPromise: 'interface',
    RunRecord: 'interface',
    RunResult: 'interface',
    RunSlot: 'interface',
    RunStateChange: 'interface',
    RunStateDetails: 'interface',
    RunStatus: 'const',
    Schedule: 'interface',
    SchedulerState: 'const',
    SchedulerStateValue: 'type',
    ScheduleSpec: 'interface',
    Task: 'interface',
    TaskAlreadyClaimedError: 'class',
    TaskInput: 'interface',
    TaskMeta: 'interface',
    TaskNotClaimedError: 'class',
    TaskNotFoundError: 'class',
    TaskProgress: 'interface',
    TaskScheduler: 'class',
    taskSchedulerDefaults: 'const',
    TaskSchedulerEvents: 'interface',
    TaskSchedulerOptions: 'interface',
    TaskSchedulerStats: 'interface',
    TaskStats: 'interface',
  },
};

// Compiled tests live in <root>/dist/test/api/.
const root = new URL('../../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  name: string;
  exports: Record<string, { types: string; default: string }>;
};

function kindOf(symbol: ts.Symbol, checker: ts.TypeChecker): Kind {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const f = target.flags;
  if (f & ts.SymbolFlags.Class) return 'class';
  if (f & ts.SymbolFlags.Function) return 'function';
  if (f & ts.SymbolFlags.Enum) return 'enum';
  if (f & ts.SymbolFlags.Variable) return 'const';
  if (f & ts.SymbolFlags.Interface) return 'interface';
  if (f & ts.SymbolFlags.TypeAlias) return 'type';
  throw new Error(`unexpected export kind of ${symbol.name}: flags ${f}`);
}

/** Every entry point's exports, read from its declaration file by the TypeScript checker. */
function declaredExports(): Record<string, Record<string, Kind>> {
  const files = Object.values(pkg.exports).map((entry) => fileURLToPath(new URL(entry.types, root)));
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const out: Record<string, Record<string, Kind>> = {};
  for (const [entry, { types }] of Object.entries(pkg.exports)) {
    const source = program.getSourceFile(fileURLToPath(new URL(types, root)));
    assert.ok(source !== undefined, `${entry}: ${types} was built`);
    const module = checker.getSymbolAtLocation(source)!;
    const names: Record<string, Kind> = {};
    for (const symbol of checker.getExportsOfModule(module).sort((a, b) => a.name.localeCompare(b.name))) names[symbol.name] = kindOf(symbol, checker);
    out[entry] = names;
  }
  return out;
}

const declared = declaredExports();

test('every entry point exports exactly the pinned names, each of the pinned kind', () => {
  assert.deepEqual(Object.keys(declared).sort(), Object.keys(EXPECTED).sort(), 'the entry points of package.json exports');
  for (const [entry, names] of Object.entries(EXPECTED)) assert.deepEqual(declared[entry], names, `exports of ${pkg.name}${entry.slice(1)}`);
});

test('at run time each entry point exports exactly its value names (through the package name, as a user imports it)', async () => {
  for (const [entry, names] of Object.entries(EXPECTED)) {
    const specifier = `${pkg.name}${entry.slice(1)}`;
    const runtime = (await import(specifier)) as Record<string, unknown>;
    const values = Object.entries(names).filter(([, kind]) => kind === 'class' || kind === 'function' || kind === 'const' || kind === 'enum');
    assert.deepEqual(Object.keys(runtime).sort(), values.map(([name]) => name).sort(), specifier);
    for (const [name, kind] of values) {
      if (kind === 'const') assert.notEqual(runtime[name], undefined, `${specifier} ${name} is defined`);
      else assert.equal(typeof runtime[name], 'function', `${specifier} ${name} is a ${kind}`);
    }
  }
});

test('the root export stays narrow: the engine and its default backend, the user-function, plan, task-input and run types, time, and errors', () => {
  const names = Object.keys(EXPECTED['.']!);
  const errors = names.filter((n) => n.endsWith('Error'));
  // The error classes are the ones a root API call can meet (and every class of the README's error table that no
  // other entry point has); everything else a service needs fits in 28 names.
  assert.ok(names.length - errors.length <= 28, `${names.length - errors.length} names besides the error classes`);
  assert.ok(errors.length <= 28, `${errors.length} error classes`);
});
