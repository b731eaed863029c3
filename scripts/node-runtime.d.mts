/** Types of scripts/node-runtime.mjs (a plain script: node runs it without a build). */
export function satisfies(version: string, range: string): boolean;
export function enginesRange(): string;
export function providedMajor(): string;
export function nodePrefix(env?: Record<string, string | undefined>): string;
export function cachedNodePath(env?: Record<string, string | undefined>): string;
