// The console's one way to the host: the server's /api/v1 routes on the page's own origin, with
// the bearer token the user typed in (kept for this browser tab only, in sessionStorage).

const TOKEN_KEY = "asp.console.token";

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/** A failed call: the server's `{ code, message }`, or the network's. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(method: string, path: string): Promise<T> {
  const response = await fetch(`/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token() ?? ""}` },
  });
  const body = (await response.json().catch(() => null)) as { code?: string; message?: string } | null;
  if (!response.ok) {
    throw new ApiError(response.status, body?.code ?? "ASP_CONSOLE_NETWORK", body?.message ?? response.statusText);
  }
  return body as T;
}

export const get = <T>(path: string): Promise<T> => call<T>("GET", path);
export const post = <T>(path: string): Promise<T> => call<T>("POST", path);

/**
 * Follow the server's event stream (committed facts only) and call `onEvent` with each event's
 * type; reconnect from the last id seen after a drop. Returns a function that stops it.
 */
export function follow(query: string, onEvent: (type: string, data: unknown) => void): () => void {
  const abort = new AbortController();
  let last: string | null = null;
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const response = await fetch(`/api/v1/events${query}`, {
          headers: {
            authorization: `Bearer ${token() ?? ""}`,
            ...(last === null ? {} : { "last-event-id": last }),
          },
          signal: abort.signal,
        });
        if (!response.ok || response.body === null) throw new Error(`stream ${response.status}`);
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            end = buffer.indexOf("\n\n");
            let id: string | null = null;
            let type = "message";
            let data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4);
              else if (line.startsWith("event: ")) type = line.slice(7);
              else if (line.startsWith("data: ")) data = line.slice(6);
            }
            if (data === "") continue;
            if (id !== null) last = id;
            onEvent(type, JSON.parse(data));
          }
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      // Dropped: try again shortly, from the last event seen.
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  void run();
  return () => abort.abort();
}
