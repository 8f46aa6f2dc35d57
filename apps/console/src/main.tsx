import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { setToken, token } from "./api.js";
import { DecisionPage, DecisionsPage, ProvidersPage, RunPage, RunsPage } from "./pages.js";
import "./style.css";

/** The page the location's hash names: `#/decisions`, `#/decisions/ID`, `#/providers`, `#/runs`, `#/runs/ID`. */
const readRoute = (): string[] =>
  window.location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);

function useRoute(): string[] {
  const [route, setRoute] = useState(readRoute);
  useEffect(() => {
    const onHash = () => setRoute(readRoute());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  return route;
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [value, setValue] = useState("");
  return (
    <main className="signin">
      <h1>ASP trusted host</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setToken(value.trim());
          onSignedIn();
        }}
      >
        <label htmlFor="token">Bearer token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          required
        />
        <button type="submit">Sign in</button>
        <p className="hint">The token stays in this browser tab only. A token with the read scope shows everything.</p>
      </form>
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(token() !== null);
  const [page, id] = useRoute();
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const current = page ?? "decisions";
  const link = (to: string, text: string) => (
    <a href={`#/${to}`} aria-current={current === to ? "page" : undefined}>
      {text}
    </a>
  );
  return (
    <>
      <header>
        <nav aria-label="Console">
          <strong>ASP host</strong>
          {link("decisions", "Decisions")}
          {link("providers", "Provider health")}
          {link("runs", "Auto Runs")}
          <button
            type="button"
            onClick={() => {
              setToken(null);
              setSignedIn(false);
            }}
          >
            Sign out
          </button>
        </nav>
      </header>
      <main>
        {current === "decisions" && id === undefined && <DecisionsPage />}
        {current === "decisions" && id !== undefined && <DecisionPage id={id} />}
        {current === "providers" && <ProvidersPage />}
        {current === "runs" && id === undefined && <RunsPage />}
        {current === "runs" && id !== undefined && <RunPage id={id} />}
      </main>
    </>
  );
}

const root = document.getElementById("root");
if (root !== null)
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
