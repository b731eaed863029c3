import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shallowClone } from "../../src/util/git.js";
import { addressProblem, parseRemote, pinnedAddresses } from "../../src/util/remote-url.js";

describe("the clone-URL policy's pieces", () => {
  it("classifies addresses with ipaddr.js ranges", () => {
    expect(addressProblem("140.82.121.3")).toBeNull();
    expect(addressProblem("2606:4700::1111")).toBeNull();
    expect(addressProblem("127.0.0.1")).toMatch(/loopback/);
    expect(addressProblem("::ffff:10.0.0.1")).toMatch(/private/);
    expect(addressProblem("169.254.169.254")).toMatch(/linkLocal/);
    expect(addressProblem("100.64.1.1")).toMatch(/carrierGradeNat/);
    expect(addressProblem("fd00:ec2::254")).toMatch(/uniqueLocal/);
    expect(addressProblem("255.255.255.255")).toMatch(/broadcast/);
  });

  it("reads host and port of each allowed form", () => {
    expect(parseRemote("https://github.com:8443/a/b.git")).toEqual({
      host: "github.com",
      port: 8443,
      scheme: "https",
    });
    expect(parseRemote("git@github.com:a/b.git")).toEqual({
      host: "github.com",
      port: 22,
      scheme: "ssh",
    });
  });

  it("pins https remotes to the checked addresses", () => {
    expect(
      pinnedAddresses("https://git.example.com/a.git", ["93.184.216.34", "2606:2800::1"]),
    ).toEqual(["-c", "http.curloptResolve=git.example.com:443:93.184.216.34,[2606:2800::1]"]);
    expect(pinnedAddresses("git@git.example.com:a.git", ["93.184.216.34"])).toEqual([]);
  });
});

describe("the service's git and http redirects", () => {
  let server: http.Server;
  let url: string;
  let tmp: string;
  const seen: string[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-redirect-"));
    server = http.createServer((req, res) => {
      seen.push(req.url ?? "");
      if (req.url?.startsWith("/moved")) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(302, { location: `${url}/moved${req.url}` }).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(tmp, { recursive: true, force: true });
  });

  it("does not follow a redirect (it could point at a local address)", async () => {
    await expect(shallowClone(`${url}/a.git`, null, path.join(tmp, "c"))).rejects.toThrow(
      /clone failed/,
    );
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((u) => u.startsWith("/moved"))).toEqual([]);
  });
});
