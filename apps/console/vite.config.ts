import { defineConfig } from "vite";

// The console is served by `asp serve --http` under /console/ from this build's dist folder.
// Vite 8 (Oxc) compiles the TSX with React's automatic runtime; nothing is fetched at run time
// from anywhere but the server the page came from.
export default defineConfig({
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "react" } },
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, assetsInlineLimit: 0 },
});
