import type {
  Assessment,
  AssessParams,
  EditPlan,
  HostStatus,
  InitializedParams,
  InitializeParams,
  InitializeResult,
  InspectParams,
  InspectResult,
  ProposeParams,
  ReadBlobParams,
  ReadBlobResult,
  ReadTreeParams,
  ReadTreeResult,
} from "@asp/contracts";
import { ErrorCodes } from "vscode-jsonrpc/node";

/** JSON-RPC method names of the wire protocol (DESIGN §5). */
export const METHODS = Object.freeze({
  initialize: "initialize",
  initialized: "initialized",
  hostStatus: "host/status",
  hostCapabilities: "host/capabilities",
  readBlob: "host/readBlob",
  readTree: "host/readTree",
  checkAssess: "check/assess",
  inspectQuery: "inspect/query",
  editPropose: "edit/propose",
  applyProposal: "host/applyProposal",
  cancelRequest: "$/cancelRequest",
  shutdown: "shutdown",
  exit: "exit",
} as const);

/** One of {@link METHODS}. */
export type Method = (typeof METHODS)[keyof typeof METHODS];

/**
 * Every JSON-RPC error code the host, the SDK and the conformance kit send or recognise, in
 * one table. JSON-RPC's own codes come from vscode-jsonrpc; the -328xx range follows LSP
 * (`RequestCancelled` is LSP's code); -320xx are this protocol's.
 */
export const PROTOCOL_ERRORS = Object.freeze({
  /** JSON-RPC: the message is not a valid request. */
  invalidRequest: ErrorCodes.InvalidRequest,
  /** JSON-RPC: the method does not exist (treated like `unsupported`: a capability gap). */
  methodNotFound: ErrorCodes.MethodNotFound,
  /** JSON-RPC: the params fail the method's schema. */
  invalidParams: ErrorCodes.InvalidParams,
  /** JSON-RPC: the receiver failed; an `AspError` travels in `data` as `{ code, data }`. */
  internalError: ErrorCodes.InternalError,
  /** A callback asked for content outside the request's baseline (host §5). */
  outOfBaseline: -32001,
  /** A callback exceeded the request's or session's callback budget (host §8). */
  callbackBudgetExceeded: -32002,
  /** The request named no known, active request id. */
  unknownRequest: -32003,
  /** The provider does not implement the method (capability gap: status "unsupported"). */
  unsupported: -32004,
  /** The request was cancelled (`$/cancelRequest`), LSP's `RequestCancelled`. */
  requestCancelled: -32800,
} as const);

/** One of {@link PROTOCOL_ERRORS}. */
export type ProtocolErrorCode = (typeof PROTOCOL_ERRORS)[keyof typeof PROTOCOL_ERRORS];

/**
 * Params and result of every request, by method. The shapes are `@asp/contracts` types (the
 * schemas are the truth); this map only says which goes with which method. A result from a
 * provider is untrusted until validated: these are the shapes a receiver checks for.
 */
export interface RequestTypes {
  readonly initialize: { readonly params: InitializeParams; readonly result: InitializeResult };
  readonly "check/assess": { readonly params: AssessParams; readonly result: Assessment };
  readonly "inspect/query": { readonly params: InspectParams; readonly result: InspectResult };
  readonly "edit/propose": { readonly params: ProposeParams; readonly result: EditPlan };
  readonly "host/readBlob": { readonly params: ReadBlobParams; readonly result: ReadBlobResult };
  readonly "host/readTree": { readonly params: ReadTreeParams; readonly result: ReadTreeResult };
  readonly "host/status": { readonly params: null; readonly result: HostStatus };
  readonly shutdown: { readonly params: null; readonly result: null };
}

/** Params of every notification, by method. */
export interface NotificationTypes {
  readonly initialized: InitializedParams;
  readonly exit: null;
  readonly "$/cancelRequest": { readonly id: number | string };
}

/** The params of request `M`. */
export type ParamsOf<M extends keyof RequestTypes> = RequestTypes[M]["params"];
/** The result of request `M`. */
export type ResultOf<M extends keyof RequestTypes> = RequestTypes[M]["result"];
