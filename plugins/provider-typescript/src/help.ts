/** The public explanation page of a TypeScript error code. */
export function codeHref(code: number): string {
  return `https://typescript.tv/errors/#ts${code}`;
}

// Next steps for the codes people meet most; anything else gets the generic text.
const HELP: Readonly<Record<number, string>> = {
  1005: "Fix the syntax near this position: a token is missing (often a bracket, comma or semicolon).",
  2304: "Declare or import the name, or fix its spelling.",
  2305: "Import a name the module actually exports, or export it from that module.",
  2307: "Check the import path (relative imports need the file to exist in the change) or add the dependency and its types.",
  2322: "Make the assigned value match the declared type, or change the declaration if the new type is intended.",
  2339: "Use a property the type declares, or add it to the type.",
  2345: "Pass an argument of the parameter's type, or widen the parameter type if the call is right.",
  2355: "Return a value on every path, or change the declared return type.",
  2551: "Use the property name the type declares (a close spelling is suggested in the message).",
  2554: "Call with the number of arguments the signature expects.",
  2741: "Add the missing property to the object, or make it optional in the type.",
  6133: "Remove the unused declaration, or use it.",
  7006: "Annotate the parameter with a type (noImplicitAny is on).",
  18048: "Check the value for undefined before using it (narrow it), or give it a non-optional type.",
};

/** A next step for a TypeScript error code, worded for the person who made the change. */
export function helpFor(code: number): string {
  return (
    HELP[code] ??
    `Fix the TypeScript error TS${code} reported here (the linked page explains it), then check the change again.`
  );
}
