import { configureSandbox } from "../src/sandbox/index.js";
import { configureSandboxCaches } from "../src/sandbox/cache.js";
import { configureWorkdirVolumes } from "../src/workcopy/volume.js";

/*
 * The setup of every test file (vitest.config.ts). A worker's modules are shared between its
 * files, so what a service start writes into them (src/context.ts: the sandbox's settings,
 * where package caches live, whether working copies get volumes) would reach the next file:
 * the sandbox cache of one file's deleted DATA_DIR made a later file build Go's standard
 * library from nothing. Each file starts from the defaults, as in a worker of its own.
 */
configureSandbox({});
configureSandboxCaches({});
configureWorkdirVolumes("auto");
