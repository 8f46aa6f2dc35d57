/**
 * `@asp/rollout`: the Auto Mode rollout and configuration layer.
 *
 * - twelve independent, default-off stage flags ({@link StageFlags.isEnabled} is the only query),
 *   of which only the built ones ({@link BUILT_STAGES}) may be turned on,
 * - strict closed-vocabulary parsing of Auto Mode configuration ({@link parseAutoModeConfig}),
 * - the Stage 2 selection precedence ({@link resolveSelection}) with preset normalization,
 * - the contract's thirteen budget ceilings, which configuration may only tighten
 *   ({@link tightenBudgets}), and admission that counts only while the owning stage is on
 *   ({@link createBudgetMeter}),
 * - Stage 2 persistence of the selection and budget set with the run, through the evidence fact
 *   log, so a reopen never re-resolves differently ({@link createSelectionStore}).
 *
 * @packageDocumentation
 */

export type {
  BudgetCheck,
  BudgetMeterOptions,
  BudgetOverrides,
  BudgetRefusal,
  BudgetSet,
  BudgetSpec,
  Clock,
  ResolvedBudgets,
  RestoreMeterOptions,
} from "./budgets.js";
export {
  BUDGET_TABLE,
  BudgetMeter,
  COUNTER_LIMITS,
  createBudgetMeter,
  DEFAULT_BUDGETS,
  defaultBudgets,
  GUARDIAN_WINDOW_SIZE,
  isBudgetActive,
  parseBudgetValue,
  tightenBudgets,
} from "./budgets.js";
export type { ConfigScope, ParseConfigOptions, ParsedAutoModeConfig, SelectionKey } from "./config.js";
export {
  CONFIG_SCOPES,
  hasExplicitSelection,
  parseAutoModeConfig,
  SELECTION_KEYS,
  toAutoModeConfig,
} from "./config.js";
export type { Environment } from "./env.js";
export { aliasOf, CONTRACT_ENV_PREFIX } from "./env.js";
export type { RolloutErrorCode } from "./errors.js";
export { RolloutError } from "./errors.js";
export type { StageFlagInputs, StageFlagState, StageFlagStates } from "./flags.js";
export {
  BUILT_STAGES,
  createStageFlags,
  isStageBuilt,
  isStageFlags,
  resolveStageFlags,
  STAGE_ENV_VARS,
  StageFlags,
} from "./flags.js";
export type { FrameSettings, FrameSettingsStore, StoredFrameSettings } from "./frames.js";
export {
  checkFrameId,
  createFrameSettingsStore,
  FRAME_INDEX_NAME,
  FRAME_SETTINGS_FACT_KIND,
  patchFrameSettings,
} from "./frames.js";
export type { ValueLocation } from "./parse.js";
export { FALSE_SPELLINGS, parseBoolean, parseEnum, parsePositiveNumber, TRUE_SPELLINGS } from "./parse.js";
export type { PersistedSelection, RunConfiguration, SelectionStoreOptions, StoredSelection } from "./persist.js";
export {
  checkRunIdentity,
  createSelectionStore,
  isPersistedSelection,
  RUN_INDEX_NAME,
  runKey,
  SELECTION_FACT_KIND,
  SelectionStore,
} from "./persist.js";
export type {
  ConfigurationReport,
  RepairAdmission,
  ReportedValue,
  ResolveConfigurationInputs,
  ResolvedConfiguration,
} from "./resolve.js";
export { configurationReport, isResolvedConfiguration, repairAdmission, resolveConfiguration } from "./resolve.js";
export type {
  AutoModeSelection,
  LegacyReviewAuto,
  Normalization,
  ResolvedSelection,
  SelectionInputs,
  SessionState,
  Stated,
} from "./selection.js";
export {
  BUILT_IN_SELECTION,
  legacyReviewAutoKey,
  normalizePreset,
  normalizeSelection,
  resolveSelection,
} from "./selection.js";
export type { ValueSource, ValueSourceKind } from "./sources.js";
export { BUILT_IN, formatSource, sourceOf, VALUE_SOURCE_KINDS } from "./sources.js";
export { ROLLOUT_TOKENS } from "./tokens.js";
