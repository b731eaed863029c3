import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

/*
 * A local Python package index for the setup step's tests: PyPI is not reachable from CI,
 * so this serves PEP 503 "simple" pages on 127.0.0.1 and real wheels built here (a zip with
 * the METADATA, WHEEL and RECORD files a wheel needs, written by Python's own zipfile), and
 * counts what it served. pip reaches it through the setup proxy like any index, with the
 * index in PIP_INDEX_URL.
 */

const execFileAsync = promisify(execFile);

/** Writes a pure-Python wheel of `name` `version` with `module`.py holding `source`. */
const WHEEL_SCRIPT = String.raw`
import base64, hashlib, sys, zipfile
out, name, version, module, source = sys.argv[1:6]
dist = name.replace("-", "_")
info = f"{dist}-{version}.dist-info"
files = {
    f"{module}.py": source,
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: foreman-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{info}/top_level.txt": module + "\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(text.encode())}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\n".join(record) + "\n"
wheel = f"{out}/{dist}-{version}-py3-none-any.whl"
with zipfile.ZipFile(wheel, "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
print(wheel)
`;

export interface FakePackage {
  /** The project name, e.g. "foreman-dep". */
  name: string;
  version: string;
  /** The module it installs (`<module>.py`) and that module's source. */
  module: string;
  source: string;
}

export interface FakePypi {
  /** http://127.0.0.1:<port>/simple/ (PIP_INDEX_URL). */
  indexUrl: string;
  port: number;
  /** Paths served so far, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** PEP 503's normalized name. */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/** Builds the packages' wheels and serves them on 127.0.0.1 until close(). */
export async function startFakePypi(packages: FakePackage[]): Promise<FakePypi> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-pypi-fake-"));
  const wheels = new Map<string, { file: string; bytes: Buffer; sha256: string }[]>();
  for (const pkg of packages) {
    const { stdout } = await execFileAsync("python3", [
      "-c",
      WHEEL_SCRIPT,
      dir,
      pkg.name,
      pkg.version,
      pkg.module,
      pkg.source,
    ]);
    const bytes = await readFile(stdout.trim());
    const list = wheels.get(normalize(pkg.name)) ?? [];
    list.push({
      file: path.basename(stdout.trim()),
      bytes,
      sha256: createHash("sha256").update(bytes).digest("hex"),
    });
    wheels.set(normalize(pkg.name), list);
  }
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const url = req.url ?? "/";
    requests.push(url);
    const page = /^\/simple\/([^/]+)\/?$/.exec(url);
    if (page) {
      const list = wheels.get(normalize(decodeURIComponent(page[1]!)));
      if (!list) return void res.writeHead(404).end("not found");
      const links = list
        .map((w) => `<a href="/files/${w.file}#sha256=${w.sha256}">${w.file}</a><br/>`)
        .join("\n");
      res.writeHead(200, { "content-type": "text/html" });
      return void res.end(`<!DOCTYPE html><html><body>\n${links}\n</body></html>\n`);
    }
    const file = /^\/files\/([^/]+)$/.exec(url)?.[1];
    const wheel = [...wheels.values()].flat().find((w) => w.file === file);
    if (wheel) {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      return void res.end(wheel.bytes);
    }
    res.writeHead(404).end("not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    indexUrl: `http://127.0.0.1:${port}/simple/`,
    port,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
