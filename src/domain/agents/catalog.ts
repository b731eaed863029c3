import { AGENT_CATEGORIES, type AgentCategory, type AgentDefinition } from "./types.js";

/*
 * The twenty built-in agents (docs/api.md, "Agents") as data. Each template is the
 * description of the task an agent run creates, so it is written to a coding model: what to
 * look for, what to change, how to verify, and what not to touch. Every template ends the
 * same way when there is nothing to do, so an agent run on a clean repository changes
 * nothing (the task then ends DONE without a pull request).
 */

const NOTHING_TO_DO =
  "If you find nothing that fits, change nothing and say so in the plan summary.";

/** One template from its four parts, each a list of short lines. */
function template(parts: {
  goal: string;
  lookFor: string[];
  change: string[];
  verify: string[];
  dontTouch: string[];
}): string {
  const list = (lines: string[]) => lines.map((l) => `- ${l}`).join("\n");
  return [
    parts.goal,
    `Look for:\n${list(parts.lookFor)}`,
    `Change:\n${list(parts.change)}`,
    `Verify:\n${list(parts.verify)}`,
    `Do not touch:\n${list(parts.dontTouch)}`,
    NOTHING_TO_DO,
  ].join("\n");
}

export const AGENT_CATALOG: readonly AgentDefinition[] = [
  // security
  {
    name: "dependency-vulnerability-fixer",
    category: "security",
    description:
      "Upgrades dependencies with known vulnerabilities to the nearest fixed version, lockfile included.",
    task_template: template({
      goal: "Fix known vulnerabilities in this repository's declared dependencies with the smallest safe upgrades.",
      lookFor: [
        "Manifests and lockfiles: package.json with its lockfile, requirements*.txt, pyproject.toml, go.mod, Cargo.toml, Gemfile, pom.xml, build.gradle.",
        "Pinned versions in ranges with published advisories (GitHub Advisory Database, OSV), including transitive ones pinned by overrides or resolutions.",
      ],
      change: [
        "Raise each vulnerable package to the lowest version that fixes the advisory, within the same major version where one exists.",
        "Regenerate the lockfile with the repository's own package manager (run_command), never by hand-editing it.",
        "Adapt call sites only where the upgrade changed an API; list each advisory id and the version moved to in the plan.",
      ],
      verify: [
        "Install from the updated lockfile and run the repository's tests and build.",
        "Run the ecosystem's audit command (npm audit, pip-audit, govulncheck, cargo audit) when it is available offline, and report what remains.",
      ],
      dontTouch: [
        "Dependencies without an advisory, and major-version upgrades unless no fixed version exists in the current major (then explain).",
        "Application behaviour, formatting and unrelated configuration.",
      ],
    }),
  },
  {
    name: "secret-scanner",
    category: "security",
    description:
      "Finds credentials committed to the code and moves them to configuration read from the environment.",
    task_template: template({
      goal: "Find secrets committed to the repository and replace them with configuration read at run time.",
      lookFor: [
        "Literal API keys, tokens, passwords, private keys and connection strings with credentials: prefixes such as AKIA, ghp_, xox, sk-, -----BEGIN, and variables named *secret*, *token*, *password*, *key*.",
        "Committed .env files, credentials in CI workflows, Docker files, test fixtures and example configuration.",
      ],
      change: [
        "Read each secret from an environment variable (or the repository's existing configuration mechanism), with a clear error when it is missing.",
        "Add the variable to .env.example or the configuration docs with a placeholder value; add secret-bearing files to .gitignore.",
        "In the plan, list every secret found (file and line, never the value) and say that it must be rotated: removing it from the code does not remove it from git history.",
      ],
      verify: [
        "search_code for the old literal values and the key prefixes: nothing may remain outside .env.example placeholders.",
        "Run the tests with the variables set to dummy values.",
      ],
      dontTouch: [
        "Obvious test dummies (e.g. 'test-token', 'changeme') used only by tests; note them instead.",
        "Git history: do not try to rewrite it; never print a real secret value in the plan, a commit or a log.",
      ],
    }),
  },
  {
    name: "injection-hardener",
    category: "security",
    description:
      "Replaces string-built SQL, shell commands, HTML and paths with parameterised, escaped or validated forms.",
    task_template: template({
      goal: "Close injection holes where untrusted input reaches an interpreter.",
      lookFor: [
        "SQL or NoSQL queries built by string concatenation or interpolation; ORM raw-query calls with user input; query objects built from request bodies (operator injection such as $where, $ne).",
        "Shell commands built from input (exec, system, child_process with shell: true, subprocess with shell=True).",
        "HTML rendered from input without escaping (innerHTML, dangerouslySetInnerHTML, |safe), file paths joined from input without confinement, unvalidated redirects.",
      ],
      change: [
        "Use parameterised queries or the query builder; pass commands as argument arrays without a shell; escape output with the template engine; confine paths to a base folder after resolving them.",
        "Validate input at the boundary with the repository's validation library where one exists.",
        "Add a test per fixed sink that sends a malicious value and asserts it is treated as data.",
      ],
      verify: [
        "Run the new tests and the existing suite; each new test must fail on the old code.",
      ],
      dontTouch: [
        "Queries and commands built only from constants; the database schema; public function signatures beyond what the fix needs.",
      ],
    }),
  },
  // quality
  {
    name: "lint-debt-fixer",
    category: "quality",
    description:
      "Fixes the warnings of the linters the repository already runs, without silencing them.",
    task_template: template({
      goal: "Reduce lint debt: fix the findings of the linters and type checkers the repository already configures.",
      lookFor: [
        "The configured tools (eslint, ruff, flake8, golangci-lint, clippy, rubocop, tsc) and how the repository runs them (package scripts, Makefile, CI workflow).",
        "Their current findings: run them with run_command and group the results by rule.",
      ],
      change: [
        "Fix findings in the code, rule by rule, starting with the ones that point at real bugs (unused results, floating promises, shadowing, unreachable code).",
        "Prefer the linter's own safe autofix where it has one, then review its changes.",
        "Keep the change reviewable: at most about 30 files; list the rules left for a later run in the plan.",
      ],
      verify: ["Rerun the linters: fewer findings and no new ones; the tests still pass."],
      dontTouch: [
        "The linter configuration: do not disable rules, raise thresholds or add ignore comments to make findings disappear.",
        "Behaviour: no functional change hidden inside a lint fix.",
      ],
    }),
  },
  {
    name: "dead-code-remover",
    category: "quality",
    description:
      "Removes unused functions, exports, files, feature flags and dependencies that nothing reaches.",
    task_template: template({
      goal: "Remove code that nothing uses, so the rest is easier to read and change.",
      lookFor: [
        "Exported functions, classes and constants with no reference anywhere in the repository (search_code for each name, including string references and dynamic imports).",
        "Files nothing imports, commented-out blocks, branches behind flags that are always on or off, declared dependencies that no file imports.",
      ],
      change: [
        "Delete what is provably unused, with its tests and its dependency entry; update the lockfile with the package manager.",
        "List each removal with the evidence that it is unused in the plan.",
      ],
      verify: ["Run the build, type checker and tests: all pass after the removals."],
      dontTouch: [
        "Public API of a published library (exports in the package entry point), entry points named in configuration, CLI commands, migrations, and code loaded by reflection or by name.",
        "Anything whose only use might be outside this repository; when unsure, keep it and mention it.",
      ],
    }),
  },
  {
    name: "type-safety-tightener",
    category: "quality",
    description:
      "Replaces any/unknown casts and missing annotations with real types, and tightens the type checker where it is cheap.",
    task_template: template({
      goal: "Make the type checker catch more mistakes in this repository.",
      lookFor: [
        "Explicit any, unchecked casts (as X, # type: ignore, interface{}), non-null assertions and untyped public functions.",
        "Data entering from outside (HTTP bodies, JSON files, environment) used without validation or a declared type.",
      ],
      change: [
        "Replace each loose type with the precise one; add type guards or schema validation at the boundary where data enters.",
        "Annotate public functions' parameters and return types.",
        "Turn on one stricter compiler option (e.g. noImplicitAny, strictNullChecks, mypy --strict for one package) only when its errors are few enough to fix in this change.",
      ],
      verify: ["The type checker passes with zero new suppressions, and the tests pass."],
      dontTouch: [
        "Runtime behaviour; generated code and vendored files; third-party type definitions.",
      ],
    }),
  },
  // testing
  {
    name: "unit-test-writer",
    category: "testing",
    description:
      "Writes focused unit tests for the least-tested important module, using the repository's test framework.",
    task_template: template({
      goal: "Add unit tests for an important module that has few or none.",
      lookFor: [
        "The test framework, layout and naming the repository already uses (read two existing tests first).",
        "Modules with logic (branches, parsing, calculations, state) and no matching test file; prefer the ones other code depends on most.",
      ],
      change: [
        "Write tests for one or two such modules: the normal case, each branch, edge values (empty, zero, limits, unicode) and each error path.",
        "Name each test after the behaviour it checks; keep them deterministic: no network, no sleeps, fixed clocks and seeds.",
        "Use fakes only at real boundaries (network, clock); do not mock the module under test.",
      ],
      verify: [
        "Run the new tests: they pass, and each would fail if the behaviour it names broke (check one by breaking the code temporarily, then restore it).",
      ],
      dontTouch: [
        "Production code, except a minimal change for testability that the plan names.",
        "Existing tests, apart from sharing a helper they already need.",
      ],
    }),
  },
  {
    name: "flaky-test-fixer",
    category: "testing",
    description:
      "Finds tests that pass or fail by chance and removes the cause: timing, order, shared state, randomness.",
    task_template: template({
      goal: "Make intermittently failing tests deterministic by fixing their cause.",
      lookFor: [
        "Sleeps and fixed timeouts waiting for async work, real clocks and dates, unseeded randomness, network access, shared state between tests (globals, files, databases, ports), dependence on test order or map/set iteration order.",
        "Tests marked as flaky, skipped, retried or quarantined, and CI configuration that retries tests.",
      ],
      change: [
        "Replace sleeps with waiting on the event or condition; inject or fake the clock; seed randomness; give each test its own temporary state and free port; reset globals in setup/teardown.",
        "Fix the production code instead when the flakiness is a real race, and say so in the plan.",
      ],
      verify: [
        "Run each fixed test repeatedly (e.g. 20 times, and in random order where the runner supports it): it passes every time.",
      ],
      dontTouch: [
        "What the tests assert: do not loosen an assertion, widen a timeout or add retries to hide the problem.",
      ],
    }),
  },
  {
    name: "coverage-gap-filler",
    category: "testing",
    description:
      "Measures coverage and adds tests for the untested branches and error paths of core modules.",
    task_template: template({
      goal: "Raise test coverage where it matters: untested branches and error handling of important code.",
      lookFor: [
        "The repository's coverage tool (vitest/jest --coverage, pytest-cov, go test -cover, cargo llvm-cov); run it to get the uncovered lines.",
        "Uncovered error paths, input validation and branches in core modules; ignore generated code and trivial getters.",
      ],
      change: [
        "Add tests that exercise the uncovered branches through the public interface of the module, following the existing test style.",
        "Report coverage of the touched files before and after in the plan summary.",
      ],
      verify: ["Rerun coverage: the touched files' branch coverage rises and the suite passes."],
      dontTouch: [
        "Coverage thresholds and exclusions in the configuration; production code; tests that only call code without asserting its result.",
      ],
    }),
  },
  // docs
  {
    name: "readme-refresher",
    category: "docs",
    description:
      "Brings the README up to date with how the project is actually installed, configured, run and tested.",
    task_template: template({
      goal: "Make the README true and useful for a new contributor today.",
      lookFor: [
        "Commands in the README that no longer exist (compare with package scripts, Makefile, CI workflows), outdated version requirements, missing or renamed environment variables (search the code for where configuration is read).",
        "Missing sections a newcomer needs: what the project does, prerequisites, install, configure, run, test, where to find more docs.",
      ],
      change: [
        "Correct what is wrong and add what is missing, with commands copied from the real scripts; document every configuration variable with its default.",
        "Keep the existing voice and structure; keep badges and links that still work.",
      ],
      verify: [
        "Run the documented install, build and test commands: each works as written.",
        "Check that every relative link and referenced file exists.",
      ],
      dontTouch: [
        "Code, licence text, and other documentation files except where the README links to them.",
      ],
    }),
  },
  {
    name: "api-docs-writer",
    category: "docs",
    description:
      "Documents public functions and HTTP endpoints from the code: parameters, results, errors and examples.",
    task_template: template({
      goal: "Document the public interface of this repository where it is undocumented.",
      lookFor: [
        "Exported functions, classes and modules without doc comments; HTTP routes without an entry in the API docs or OpenAPI description.",
        "The documentation conventions in use (JSDoc/TSDoc, Python docstring style, godoc, an OpenAPI file, docs/ folder).",
      ],
      change: [
        "Write doc comments that say what each public item does, its parameters, result, errors raised and one example where usage is not obvious.",
        "For HTTP endpoints: method, path, parameters, request body, each response status with its body, derived from the route's validation and handlers.",
      ],
      verify: [
        "Every statement matches the code (types, defaults, status codes); the docs build or lint step passes if the repository has one.",
      ],
      dontTouch: [
        "Code behaviour and signatures; private helpers (no comment noise on obvious internals).",
      ],
    }),
  },
  {
    name: "changelog-writer",
    category: "docs",
    description:
      "Writes the changelog entry for the changes since the last release from the git history.",
    task_template: template({
      goal: "Bring the changelog up to date with the changes since the last release.",
      lookFor: [
        "The changelog file and its format (Keep a Changelog, conventional-changelog, release notes folder), and the last released version (tags, package version).",
        "Commits since that release: run git log <last-tag>..HEAD --oneline and read the merged changes that matter to users.",
      ],
      change: [
        "Add an Unreleased (or next version) section grouped as the file already groups (Added, Changed, Fixed, Removed, Security), one line per user-visible change.",
        "Call out breaking changes and migrations first.",
      ],
      verify: [
        "Every entry corresponds to a commit in the range; the file still follows its format (and its lint step, if any).",
      ],
      dontTouch: [
        "Earlier released sections, version numbers in manifests, tags; internal refactors and CI chores unless they affect users.",
      ],
    }),
  },
  // performance
  {
    name: "n-plus-one-query-fixer",
    category: "performance",
    description:
      "Finds database or HTTP calls made once per item in a loop and batches them into one query.",
    task_template: template({
      goal: "Remove N+1 access patterns: one query or request per item where one batched call would do.",
      lookFor: [
        "Database queries, ORM lazy-loaded relations or HTTP calls inside loops, map callbacks and per-item resolvers (GraphQL).",
        "Repeated lookups of the same record within one request.",
      ],
      change: [
        "Load what the loop needs up front with one batched query (IN, joins, eager loading, a DataLoader), then index the results by key.",
        "Keep result order and missing-item behaviour identical; keep transactions where they were.",
      ],
      verify: [
        "Add or extend a test that counts queries or calls for N items and asserts it no longer grows with N; the existing tests pass.",
      ],
      dontTouch: [
        "The schema and indexes (suggest them in the plan instead); loops over a small constant number of items; code paths without a measurable cost.",
      ],
    }),
  },
  {
    name: "bundle-size-reducer",
    category: "performance",
    description:
      "Shrinks the JavaScript shipped to browsers: heavy imports, missing code splitting, duplicated libraries.",
    task_template: template({
      goal: "Reduce the size of the browser bundles this repository builds.",
      lookFor: [
        "The bundler (vite, webpack, rollup, esbuild, next) and the size of its output: build once and note the sizes of the largest chunks.",
        "Whole-library imports where a subpath or named import would do (lodash, date libraries, icon sets), large dependencies used for one small function, routes or heavy components loaded eagerly that could be split, duplicated versions of one library.",
      ],
      change: [
        "Switch to tree-shakeable or subpath imports, lazy-load heavy routes and components, replace a heavy dependency with a few lines or a platform API when that is simple and safe.",
      ],
      verify: [
        "Build again and report the size of each changed chunk before and after in the plan summary; the tests pass.",
      ],
      dontTouch: [
        "Server-only code, behaviour and styling, and the bundler's target browsers. If the repository ships no browser bundle, change nothing.",
      ],
    }),
  },
  {
    name: "memory-leak-hunter",
    category: "performance",
    description:
      "Finds memory that grows without bound in long-running processes: caches, listeners, timers, global collections.",
    task_template: template({
      goal: "Fix memory that grows without bound in long-running code (servers, workers, UI sessions).",
      lookFor: [
        "Caches and maps without a size limit or expiry; module-level arrays that only grow.",
        "Event listeners, subscriptions and intervals added per request, connection or component and never removed; closures holding large objects; streams and handles not closed on error paths.",
      ],
      change: [
        "Bound caches (LRU or TTL), remove listeners and clear timers in the matching teardown, close resources in finally blocks, and drop references once work ends.",
      ],
      verify: [
        "Add a test that repeats the operation many times and asserts the collection size, listener count or handle count stays bounded; the existing tests pass.",
      ],
      dontTouch: [
        "Intentional process-lifetime singletons, and cache sizes that configuration sets; keep public behaviour unchanged.",
      ],
    }),
  },
  // infra
  {
    name: "ci-workflow-doctor",
    category: "infra",
    description:
      "Fixes and speeds up CI workflows: failing steps, missing caches, unpinned actions, excess permissions.",
    task_template: template({
      goal: "Make the continuous-integration workflows correct, fast and safe.",
      lookFor: [
        "Workflow files (.github/workflows/*.yml, .gitlab-ci.yml, other CI configuration) and the commands they run; compare with the repository's real scripts.",
        "Steps that call missing scripts, runtime versions that differ from the project's, no dependency cache, jobs that could run in parallel, actions pinned to a moving branch, default or write-all token permissions, secrets passed to pull requests from forks.",
      ],
      change: [
        "Fix broken steps, add the package manager's cache, set the runtime version from the project's file (.nvmrc, engines, go.mod), add a concurrency group that cancels superseded runs, set least-privilege permissions: read by default, write only where a job needs it.",
        "Pin third-party actions to a release tag or commit sha.",
      ],
      verify: [
        "Validate the YAML; run every command the workflow runs locally with run_command where possible.",
      ],
      dontTouch: [
        "Deployment and release jobs, required-check names branch protection may rely on, and secrets' names.",
      ],
    }),
  },
  {
    name: "dockerfile-optimizer",
    category: "infra",
    description:
      "Makes container images smaller, faster to build and safer: multi-stage builds, layer caching, non-root user.",
    task_template: template({
      goal: "Improve the repository's Dockerfiles: smaller images, better layer caching, safer defaults.",
      lookFor: [
        "Single-stage builds that ship compilers and dev dependencies, COPY . before installing dependencies (cache busting), unpinned or latest base images, processes running as root, missing .dockerignore, package-manager caches left in layers, secrets passed as build arguments.",
      ],
      change: [
        "Use a multi-stage build with a slim runtime stage; copy manifests and install dependencies before copying the source; pin the base image to a version tag; add a .dockerignore; run as a non-root user; clean caches in the same layer that creates them.",
      ],
      verify: [
        "Build the image with docker build when docker is available and compare sizes; otherwise check each instruction against the project's build and start commands.",
        "The container still starts with the same command, port and environment variables.",
      ],
      dontTouch: [
        "The application code, the exposed ports and entrypoint contract, and compose or orchestration files beyond matching the changes.",
      ],
    }),
  },
  // architecture
  {
    name: "circular-dependency-breaker",
    category: "architecture",
    description:
      "Finds import cycles between modules and breaks them by moving shared code or inverting a dependency.",
    task_template: template({
      goal: "Remove circular imports between modules so the dependency graph flows one way.",
      lookFor: [
        "Import cycles: use a tool the ecosystem has (madge, dpdm, import-linter, go vet reports) when available offline, otherwise follow imports with search_code.",
        "Signs of cycles: imports inside functions to dodge load-order errors, undefined-at-import bugs, barrel files re-exporting everything.",
      ],
      change: [
        "Break each cycle the cheapest way: move the shared types or helpers to a lower-level module, pass a dependency in instead of importing it, or split a module along the cycle.",
        "Keep every public import path working (re-export from the old place when outside code may use it).",
      ],
      verify: [
        "Rerun the cycle check: the cycles addressed are gone and no new one appears; build and tests pass.",
      ],
      dontTouch: ["Behaviour, public names, and modules that are not part of a cycle."],
    }),
  },
  {
    name: "large-module-splitter",
    category: "architecture",
    description:
      "Splits an oversized file or class with several responsibilities into cohesive modules.",
    task_template: template({
      goal: "Split the largest file or class that mixes several responsibilities into cohesive modules.",
      lookFor: [
        "Files far above the repository's typical size, and classes or modules whose functions fall into groups that do not call each other (for example parsing, storage and formatting in one file).",
        "How the rest of the code imports from it.",
      ],
      change: [
        "Pick one such file; move each group to its own module named after its responsibility, next to the original.",
        "Keep the original path as a thin re-export so importers keep working, or update every importer in the same change.",
        "Move code verbatim: no renames or rewrites mixed into the split.",
      ],
      verify: ["Build, type checker and tests pass; no import cycle is introduced."],
      dontTouch: ["Behaviour, public names and signatures; other large files (one split per run)."],
    }),
  },
  {
    name: "deprecated-api-migrator",
    category: "architecture",
    description:
      "Moves code off deprecated APIs of its language, framework and libraries to their documented replacements.",
    task_template: template({
      goal: "Replace uses of deprecated APIs with their documented replacements before they are removed.",
      lookFor: [
        "Deprecation warnings in the build, test or lint output (run them), @deprecated markers on functions the code calls, and APIs the installed versions' changelogs mark as deprecated.",
        "The repository's own @deprecated functions that are still called internally.",
      ],
      change: [
        "Migrate each call site to the replacement the deprecation notice names, one API at a time, keeping behaviour identical.",
        "List each migrated API with its replacement in the plan.",
      ],
      verify: ["The deprecation warnings addressed no longer appear; the build and tests pass."],
      dontTouch: [
        "Dependency versions (no upgrades in this change); deprecated APIs without a stable replacement yet (note them).",
      ],
    }),
  },
];

/** The catalogue in listing order: by category (the order above), then as written. */
export const BUILTIN_AGENTS: readonly AgentDefinition[] = [...AGENT_CATALOG].sort(
  (a, b) => AGENT_CATEGORIES.indexOf(a.category) - AGENT_CATEGORIES.indexOf(b.category),
);

const BY_NAME = new Map(BUILTIN_AGENTS.map((a) => [a.name, a]));

/** A built-in agent by name, or undefined. */
export function findAgent(name: string): AgentDefinition | undefined {
  return BY_NAME.get(name);
}

/** The agents of one category, or all of them. */
export function listAgents(category?: AgentCategory): AgentDefinition[] {
  return BUILTIN_AGENTS.filter((a) => !category || a.category === category);
}
