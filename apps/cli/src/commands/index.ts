import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { registerApply, registerEdit, registerServe } from "./apply.js";
import { registerAuto } from "./auto.js";
import { registerConfig } from "./config.js";
import { registerConformance } from "./conformance.js";
import { registerDogfood } from "./dogfood.js";
import { registerCheck, registerGate, registerReceipts, registerSweep } from "./host.js";
import { registerPlugin } from "./plugin.js";
import { registerPolicy } from "./policy.js";
import { registerWorker } from "./queue.js";
import { registerQuarantine, registerStatus } from "./status.js";
import { registerStore } from "./store.js";

/** Every `asp` subcommand, in help order. A new command adds one line here. */
export const COMMANDS: ReadonlyArray<(program: Command, ctx: CliContext) => void> = [
  registerStatus,
  registerQuarantine,
  registerCheck,
  registerGate,
  registerSweep,
  registerWorker,
  registerEdit,
  registerApply,
  registerServe,
  registerReceipts,
  registerDogfood,
  registerStore,
  registerConfig,
  registerAuto,
  registerPolicy,
  registerPlugin,
  registerConformance,
];
