import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { ContractsError } from "./errors.js";
import { findHostOwnedFields } from "./host-owned.js";
import { isSchemaName, type SchemaName, type SchemaTypes, schemaDocument } from "./registry.js";

const addFormats = addFormatsModule.default;

/** One validation error: where (RFC 6901 pointer into the value) and what. */
export interface ValidationError {
  readonly pointer: string;
  readonly message: string;
}

/** Result of every validator: never an exception. */
export type ValidationResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly errors: ReadonlyArray<ValidationError> };

/** At most this many errors are reported for one value. */
export const MAX_REPORTED_ERRORS = 50;

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
const compiled = new Map<SchemaName, ValidateFunction>();

function validatorFor(name: SchemaName): ValidateFunction {
  let fn = compiled.get(name);
  if (fn === undefined) {
    fn = ajv.compile(schemaDocument(name));
    compiled.set(name, fn);
  }
  return fn;
}

const escapePointer = (token: string): string => token.replace(/~/g, "~0").replace(/\//g, "~1");

function toError(e: ErrorObject): ValidationError {
  const params = e.params as Record<string, unknown>;
  if (e.keyword === "required") {
    return { pointer: `${e.instancePath}/${escapePointer(String(params.missingProperty))}`, message: "is required" };
  }
  if (e.keyword === "additionalProperties") {
    return {
      pointer: `${e.instancePath}/${escapePointer(String(params.additionalProperty))}`,
      message: "is not an allowed property",
    };
  }
  if (e.keyword === "enum") {
    return { pointer: e.instancePath, message: `must be one of ${(params.allowedValues as unknown[]).join(", ")}` };
  }
  return { pointer: e.instancePath, message: e.message ?? e.keyword };
}

/**
 * Validate `value` against the named schema. Schemas compile once, on first use, with ajv in
 * strict mode. Never throws on any value.
 *
 * @throws ContractsError `ASP_CONTRACTS_UNKNOWN_SCHEMA` when `name` is not a published schema.
 * @example
 * ```ts
 * const r = validate("policy", JSON.parse(text));
 * if (!r.ok) for (const e of r.errors) console.error(`${e.pointer}: ${e.message}`);
 * ```
 */
export function validate<N extends SchemaName>(name: N, value: unknown): ValidationResult<SchemaTypes[N]> {
  if (!isSchemaName(name)) {
    throw new ContractsError("ASP_CONTRACTS_UNKNOWN_SCHEMA", `no schema named ${JSON.stringify(name)}`, {
      category: "internal",
      data: { name },
    });
  }
  const fn = validatorFor(name);
  try {
    if (fn(value)) return { ok: true, value: value as SchemaTypes[N] };
    const errors = (fn.errors ?? []).filter((e) => e.keyword !== "if").map(toError);
    const unique = [...new Map(errors.map((e) => [`${e.pointer}\u0000${e.message}`, e])).values()];
    return { ok: false, errors: unique.slice(0, MAX_REPORTED_ERRORS) };
  } catch (error) {
    // e.g. a value whose getters throw; not reachable for parsed JSON.
    return { ok: false, errors: [{ pointer: "", message: `value could not be validated: ${String(error)}` }] };
  }
}

function withoutHostOwned<N extends "assessment" | "edit-plan">(
  name: N,
  value: unknown,
): ValidationResult<SchemaTypes[N]> {
  const hits = findHostOwnedFields(value);
  const result = validate(name, value);
  if (hits.length === 0) return result;
  const hostErrors = hits.map((h) => ({
    pointer: h.pointer,
    message: `host-owned field ${h.field} is not allowed in a provider response`,
  }));
  const schemaErrors = result.ok ? [] : result.errors.filter((e) => !hits.some((h) => h.pointer === e.pointer));
  return { ok: false, errors: [...hostErrors, ...schemaErrors].slice(0, MAX_REPORTED_ERRORS) };
}

/**
 * Validate a provider's Assessment: its schema AND the absence of host-owned fields anywhere
 * (host §1: such a response is malformed).
 */
export function validateAssessment(value: unknown): ValidationResult<SchemaTypes["assessment"]> {
  return withoutHostOwned("assessment", value);
}

/** Validate a provider's EditPlan: schema and no host-owned fields (host §6). */
export function validateEditPlan(value: unknown): ValidationResult<SchemaTypes["edit-plan"]> {
  return withoutHostOwned("edit-plan", value);
}

/**
 * Validate and return the typed value, or throw.
 *
 * @throws ContractsError `ASP_CONTRACTS_INVALID` with `data.errors` listing every pointer.
 */
export function assertValid<N extends SchemaName>(name: N, value: unknown, what: string = name): SchemaTypes[N] {
  const result = validate(name, value);
  if (result.ok) return result.value;
  const first = result.errors[0];
  throw new ContractsError(
    "ASP_CONTRACTS_INVALID",
    `${what} is not a valid ${name}: ${first?.pointer || "/"} ${first?.message ?? ""}`.trim(),
    { data: { schema: name, errors: result.errors } },
  );
}
