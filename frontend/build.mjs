// Builds the web UI into dist/: one hashed app-*.js and app-*.css (KaTeX fonts as hashed
// files beside them) and an index.html that names them. Relative URLs throughout, so the UI
// works behind a path prefix. Run by the Makefile (`npm ci && node build.mjs`); `node build.mjs
// DIR` builds into DIR instead, emptied first (a checkout whose dist/ is not its own).
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ? resolve(process.argv[2]) : join(here, "dist");
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.js") },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: "esm",
  target: ["es2020"],
  outdir: join(out, "assets"),
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  loader: { ".woff2": "file", ".woff": "file", ".ttf": "file" },
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});

const names = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = names.find((n) => /^app-.*\.js$/.test(n));
const css = names.find((n) => /^app-.*\.css$/.test(n));
const html = readFileSync(join(here, "index.html"), "utf8")
  .replace("%APP_JS%", `assets/${js}`)
  .replace("%APP_CSS%", `assets/${css}`);
writeFileSync(join(out, "index.html"), html);
copyFileSync(join(here, "favicon.svg"), join(out, "favicon.svg"));
console.log(`frontend built: ${out}/assets/${js}, ${out}/assets/${css}`);
