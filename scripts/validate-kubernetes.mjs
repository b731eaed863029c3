#!/usr/bin/env node
// Validates Kubernetes manifests offline (scripts/container-check.sh runs it on
// deploy/kubernetes/*.yaml). kubeconform and `kubectl --dry-run` need schemas from the network
// or an API server; here the schemas come from the npm package `kubernetes-models` (generated
// from the Kubernetes OpenAPI document), checked two ways:
//   1. its JSON Schema validators (ajv, compiled): required fields, types, enums, formats;
//   2. its TypeScript types, with each document written as an object literal and type-checked
//      by tsc: an unknown field (a typo such as `securityContex`) is an excess-property error,
//      which the JSON Schema of Kubernetes (open objects) lets through. kubeconform -strict
//      checks the same;
//   3. the pod rules the API server enforces in code, which no schema carries
//      (scripts/kubernetes-rules.mjs: `procMount: Unmasked` needs `hostUsers: false`).
//
//   node scripts/validate-kubernetes.mjs <dir with node_modules/kubernetes-models> file.yaml...
// Exits 1 with each problem printed when a document is invalid.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseAllDocuments } from "yaml";
import { podRuleProblems } from "./kubernetes-rules.mjs";

const [modelsDir, ...files] = process.argv.slice(2);
if (!modelsDir || files.length === 0) {
  console.error("usage: validate-kubernetes.mjs <dir with kubernetes-models> file.yaml...");
  process.exit(2);
}
// The package exports its models for `import` only: they are loaded by their file.
const models = path.join(path.resolve(modelsDir), "node_modules", "kubernetes-models");
const version = JSON.parse(readFileSync(path.join(models, "package.json"), "utf8")).version;

/** `apps/v1` + `Deployment` → `…/kubernetes-models/apps/v1/Deployment.js` (core: `v1/…`). */
const modulePath = (apiVersion, kind) => path.join(models, apiVersion, `${kind}.js`);

let problems = 0;
const literals = [];
for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const [i, doc] of docs.entries()) {
    const where = `${file} #${i + 1}`;
    if (doc.errors.length) {
      console.log(`${where}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      problems++;
      continue;
    }
    const obj = doc.toJS();
    if (!obj) continue;
    const { apiVersion, kind } = obj;
    const name = `${kind}/${obj.metadata?.name ?? "?"}`;
    let Model;
    try {
      const mod = await import(pathToFileURL(modulePath(apiVersion, kind)).href);
      Model = mod[kind];
    } catch {
      console.log(`${where} ${name}: no schema for ${apiVersion} ${kind}`);
      problems++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`${where} ${name}: schema ok`);
    } catch (err) {
      console.log(`${where} ${name}: ${err.message}`);
      problems++;
    }
    for (const problem of podRuleProblems(obj)) {
      console.log(`${where} ${name}: ${problem}`);
      problems++;
    }
    literals.push({ where: `${where} ${name}`, apiVersion, kind, obj });
  }
}

// 2. Unknown fields: one object literal per document, typed with its interface.
const source = literals
  .map(
    ({ apiVersion, kind, obj, where }, i) =>
      `import type { I${kind} as T${i} } from ${JSON.stringify(modulePath(apiVersion, kind))};\n` +
      `// ${where}\nexport const doc${i}: T${i} = ${JSON.stringify(obj, null, 2)};\n`,
  )
  .join("\n");
const check = path.join(path.resolve(modelsDir), "manifests-check.ts");
writeFileSync(check, source);
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
try {
  execFileSync(
    process.execPath,
    [
      tsc,
      "--noEmit",
      "--strict",
      "--skipLibCheck",
      "--target",
      "es2022",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      check,
    ],
    { stdio: "pipe", encoding: "utf8" },
  );
  console.log(`no unknown fields (tsc on ${literals.length} documents)`);
} catch (err) {
  // tsc names the line in the generated file; its comment above names the document.
  const lines = source.split("\n");
  for (const line of String(err.stdout).split("\n").filter(Boolean)) {
    const at = /\((\d+),\d+\)/.exec(line);
    const n = at ? Number(at[1]) : 0;
    let doc = "";
    for (let k = n - 1; k >= 0; k--)
      if (lines[k]?.startsWith("// ")) {
        doc = lines[k].slice(3);
        break;
      }
    console.log(`${doc}: ${line.replace(/^.*?error /, "")}`);
    problems++;
  }
}
console.log(
  `kubernetes-models ${version}: ${literals.length} documents, ${problems} problem(s) in ${files.join(", ")}`,
);
process.exit(problems ? 1 : 0);
