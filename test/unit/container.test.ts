import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bwrapFix, containerRuntime, HOST_BWRAP_FIX } from "../../src/sandbox/container.js";
import { checkSandbox, configureSandbox } from "../../src/sandbox/index.js";

/*
 * A worker started in a container without the options bubblewrap needs says which options
 * and where the docs are, not the host's packages and sysctls (issue 43).
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-container-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function root(name: string, files: Record<string, string>): Promise<string> {
  const top = path.join(dir, name);
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(top, file)), { recursive: true });
    await writeFile(path.join(top, file), text);
  }
  await mkdir(top, { recursive: true });
  return top;
}

describe("containerRuntime", () => {
  it("tells Docker, podman, Kubernetes and a runtime named by the cgroup from a host", async () => {
    expect(containerRuntime(await root("host", { "proc/1/cgroup": "0::/\n" }), {})).toBeUndefined();
    expect(containerRuntime(await root("docker", { ".dockerenv": "" }), {})).toBe("docker");
    expect(
      containerRuntime(await root("podman", { "run/.containerenv": "engine=podman\n" }), {}),
    ).toBe("podman");
    expect(
      containerRuntime(await root("k8s-env", {}), { KUBERNETES_SERVICE_HOST: "10.0.0.1" }),
    ).toBe("kubernetes");
    expect(
      containerRuntime(
        await root("k8s-cgroup", { "proc/1/cgroup": "4:memory:/kubepods/besteffort/pod1/abc\n" }),
        {},
      ),
    ).toBe("kubernetes");
    expect(
      containerRuntime(await root("lxc", { "proc/1/cgroup": "1:name=systemd:/lxc/box\n" }), {}),
    ).toBe("lxc");
    expect(containerRuntime(await root("env", {}), { container: "oci" })).toBe("oci");
  });
});

describe("the fix the start-up check names", () => {
  it("names the container's options and the docs in a container, the host's packages on a host", () => {
    const inside = bwrapFix("podman");
    expect(inside).toContain("runs in a container (podman)");
    expect(inside).toContain(
      "--security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined",
    );
    expect(inside).toContain('docs/operations.md, "In a container: bubblewrap"');
    expect(inside).not.toContain("apt-get");
    expect(HOST_BWRAP_FIX).toContain("apt-get install bubblewrap");
  });

  it("is the one checkSandbox gives when bwrap cannot make its namespaces here", async () => {
    // A bwrap that fails as Docker's default seccomp profile makes it fail.
    const bin = path.join(dir, "bin");
    await mkdir(bin, { recursive: true });
    await writeFile(
      path.join(bin, "bwrap"),
      '#!/bin/sh\necho "bwrap: Can\'t set hostname to sandbox: Operation not permitted" >&2\nexit 1\n',
    );
    await chmod(path.join(bin, "bwrap"), 0o755);
    const saved = process.env.PATH;
    process.env.PATH = `${bin}:${saved}`;
    configureSandbox({ engine: "bwrap", diskLimitMb: 0 });
    try {
      const error = (await checkSandbox().catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toBe(
        "SANDBOX=bwrap does not work on this machine (bwrap: Can't set hostname to sandbox: Operation not permitted): " +
          `${bwrapFix(containerRuntime())}.`,
      );
      // This machine: the suite's CI runs in a container, so that is the case checked here.
      if (containerRuntime()) expect(error.message).toContain("--security-opt seccomp=unconfined");
    } finally {
      process.env.PATH = saved;
      configureSandbox({});
    }
  });
});
