import { expect } from "vitest";
import { toThrowWithCode } from "./matchers.js";

expect.extend({ toThrowWithCode });
