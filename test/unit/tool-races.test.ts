import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildIndex } from "../../src/indexer/index.js";
import { createReadTools } from "../../src/tools/read-tools.js";
import { holdsSecrets, mayHoldSecrets } from "../../src/indexer/skip.js";
import { createWriteTools } from "../../src/tools/write-tools.js";
import type { ExecutableTool } from "../../src/llm/types.js";

/*
 * A real race: a shell loop swaps the working copy's directory `sub` for a link to a folder
 * outside it (and back) as fast as it can, while the tools write, edit, delete and read
 * under `sub` many times. Nothing outside may be written, deleted or shown.
 */

let root: string;
let outside: string;
let racer: ChildProcess | undefined;

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-race-root-"));
  outside = await mkdtemp(path.join(os.tmpdir(), "foreman-race-outside-"));
  await mkdir(path.join(root, "sub"));
  await writeFile(path.join(root, "sub", "f.txt"), "inside\n");
  await writeFile(path.join(outside, "f.txt"), "OUTSIDE-SECRET\n");
  await writeFile(path.join(outside, "keep.txt"), "OUTSIDE-KEEP\n");
});

afterEach(async () => {
  racer?.kill("SIGKILL");
  racer = undefined;
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

/** Starts the swapping loop; resolves once it has swapped at least once. */
async function startRacer(): Promise<void> {
  racer = spawn(
    "sh",
    [
      "-c",
      `cd '${root}' && while :; do mv sub sub.real && ln -s '${outside}' sub && echo swapped && rm sub && mv sub.real sub; done`,
    ],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  await new Promise<void>((resolve) => racer!.stdout!.once("data", () => resolve()));
}

function tool(tools: ExecutableTool[], name: string): ExecutableTool {
  return tools.find((t) => t.name === name)!;
}

describe("the file tools against a directory swapped for a link", () => {
  it("never write, delete or read outside the working copy", async () => {
    const writes = createWriteTools(root);
    const index = await buildIndex(root);
    const reads = createReadTools(root, () => index);
    await startRacer();
    const outcomes = { ok: 0, refused: 0 };
    for (let i = 0; i < 400; i++) {
      const results = await Promise.all([
        tool(writes, "write_file").execute({ path: `sub/w${i % 7}.txt`, content: `n${i}\n` }),
        tool(writes, "write_file").execute({ path: "sub/f.txt", content: `w${i}\n` }),
        tool(writes, "edit_file").execute({
          path: "sub/keep.txt",
          old_text: "KEEP",
          new_text: "X",
        }),
        tool(writes, "delete_file").execute({ path: "sub/keep.txt" }),
        tool(reads, "read_file").execute({ path: "sub/f.txt" }),
      ]);
      for (const result of results) {
        expect(result).not.toContain("OUTSIDE-SECRET");
        if (result.startsWith("Error")) outcomes.refused++;
        else outcomes.ok++;
      }
    }
    racer!.kill("SIGKILL");
    // Both states were hit: some calls went through, some were refused.
    expect(outcomes.ok).toBeGreaterThan(0);
    expect(outcomes.refused).toBeGreaterThan(0);
    // The folder outside is exactly as it was.
    expect((await readdir(outside)).sort()).toEqual(["f.txt", "keep.txt"]);
    expect(await readFile(path.join(outside, "f.txt"), "utf8")).toBe("OUTSIDE-SECRET\n");
    expect(await readFile(path.join(outside, "keep.txt"), "utf8")).toBe("OUTSIDE-KEEP\n");
  }, 120_000);
});

describe("the credential-file list", () => {
  it("covers the usual credential files by name", () => {
    for (const p of [
      ".git-credentials",
      "home/.netrc",
      "_netrc",
      ".aws/credentials",
      "deploy/.aws/config",
      ".npmrc",
      ".pypirc",
      ".docker/config.json",
      ".kube/config",
      "ci/kubeconfig",
      ".config/gcloud/application_default_credentials.json",
      "gcloud/application_default_credentials.json",
      "keys/id_rsa",
      "id_ed25519",
      "id_ecdsa_sk",
      ".ssh/deploy_key",
      "server.pem",
      "tls.key",
      "store.p12",
      "putty.ppk",
      ".env",
      ".env.production",
      ".envrc",
      ".pgpass",
      ".vault-token",
    ])
      expect(mayHoldSecrets(p), p).toBe(true);
    for (const p of [
      ".env.example",
      "src/env.ts",
      ".ssh/known_hosts",
      ".ssh/id_rsa.pub",
      "docs/aws.md",
      "docker/config.ts",
      "kube/config.md",
    ])
      expect(mayHoldSecrets(p), p).toBe(false);
  });

  it("recognises private keys and registry tokens by content", () => {
    const yes = [
      "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n",
      "-----BEGIN RSA PRIVATE KEY-----\n",
      "-----BEGIN PRIVATE KEY-----\n",
      'npmRegistryServer: "https://r"\nnpmAuthToken: "npm_abcdefgh12345678"\n',
      "//registry.npmjs.org/:_authToken=npm_abcdefgh12345678\n",
      "[default]\naws_secret_access_key = abcdEFGH1234abcdEFGH\n",
    ];
    const no = [
      "-----BEGIN PUBLIC KEY-----\n",
      'npmAuthToken: "${NPM_TOKEN}"\n',
      "nodeLinker: node-modules\n",
    ];
    for (const text of yes) expect(holdsSecrets(Buffer.from(text)), text).toBe(true);
    for (const text of no) expect(holdsSecrets(Buffer.from(text)), text).toBe(false);
  });

  it("refuses to read or write them, and to show a file holding a private key", async () => {
    await writeFile(path.join(root, ".yarnrc.yml"), 'npmAuthToken: "npm_abcdefgh12345678"\n');
    await writeFile(
      path.join(root, "fixture.txt"),
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n",
    );
    await mkdir(path.join(root, ".aws"));
    await writeFile(path.join(root, ".aws", "credentials"), "[default]\nkey=1\n");
    const index = await buildIndex(root);
    const read = tool(
      createReadTools(root, () => index),
      "read_file",
    );
    const write = tool(createWriteTools(root), "write_file");
    expect(await read.execute({ path: ".yarnrc.yml" })).toMatch(/^Error: .*credentials/);
    expect(await read.execute({ path: "fixture.txt" })).toMatch(/^Error: .*credentials/);
    expect(await read.execute({ path: ".aws/credentials" })).toMatch(/^Error: .*credentials/);
    for (const p of [".git-credentials", ".aws/credentials", ".docker/config.json", ".netrc"])
      expect(await write.execute({ path: p, content: "x" }), p).toMatch(/credentials/);
    // And nothing under .git, whatever the case.
    for (const p of [".git/config", ".GIT/hooks/pre-commit", "sub/../.git/x"])
      expect(await write.execute({ path: p, content: "x" }), p).toMatch(/\.git/);
    expect(await read.execute({ path: ".git/config" })).toMatch(/\.git/);
  });
});
