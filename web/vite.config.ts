import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import { compression } from "vite-plugin-compression2";

/*
 * The dashboard is built into dist/dashboard and served by the service itself under
 * /dashboard/ (src/http/dashboard.ts). Precompressed .gz and .br copies let the server send
 * compressed assets without compressing on each request.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/dashboard/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/dashboard", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 300,
  },
  plugins: [compression({ algorithms: ["gzip", "brotliCompress"], threshold: 1024 })],
});
