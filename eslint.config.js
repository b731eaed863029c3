import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** fs's functions that read: the folders handling working copies read through workcopy-fs. */
const FS_READS = [
  "default",
  "promises",
  "readFile",
  "readFileSync",
  "createReadStream",
  "openAsBlob",
  "readdir",
  "readdirSync",
  "opendir",
  "opendirSync",
  "open",
  "openSync",
  "read",
  "readSync",
  "stat",
  "statSync",
  "lstat",
  "lstatSync",
  "exists",
  "existsSync",
  "access",
  "accessSync",
  "readlink",
  "readlinkSync",
  "realpath",
  "realpathSync",
  "glob",
  "globSync",
  "watch",
];
/** fs's functions that change files: see the block for src/ecosystems and src/health. */
const FS_WRITES = [
  "rm",
  "rmSync",
  "rmdir",
  "unlink",
  "unlinkSync",
  "writeFile",
  "writeFileSync",
  "appendFile",
  "mkdir",
  "rename",
  "copyFile",
  "cp",
  "symlink",
  "chmod",
  "truncate",
];
const FS_MODULES = ["node:fs", "fs", "node:fs/promises", "fs/promises"];
const READ_MESSAGE =
  "Read working copies through src/workcopy/fs.ts (it never follows a link out of the working copy).";

export default tseslint.config(
  // test/fixtures/: repositories the tests run real test runners on (CommonJS, jest globals).
  { ignores: ["dist/", "node_modules/", ".data/", "coverage/", "fixtures/", "test/fixtures/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": ["error", { allow: ["error"] }],
    },
  },
  {
    // The doors call the domain, never the database (docs/architecture.md, "Layers").
    // dependency-cruiser lets them import the Models type to pass it on; this rule keeps them
    // from using it: no `models.Task…`, `deps.models.Once…` in a door.
    files: [
      "src/http/**/*.ts",
      "src/github/**/*.ts",
      "src/jobs/**/*.ts",
      "src/integrations/**/*.ts",
      "src/cli/**/*.ts",
    ],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "MemberExpression[property.name=/^[A-Z]/][object.type='Identifier'][object.name='models']",
          message:
            "Doors call domain functions, not the database: move this query into src/domain/.",
        },
        {
          selector:
            "MemberExpression[property.name=/^[A-Z]/][object.type='MemberExpression'][object.property.name='models']",
          message:
            "Doors call domain functions, not the database: move this query into src/domain/.",
        },
      ],
    },
  },
  {
    // Working copies are read through src/workcopy/fs.ts only (docs/architecture.md,
    // "Reading working copies"): a plain fs read of `path.join(root, file)` follows a link
    // the repository or the model put there, to any file the service can read. The folders
    // that handle working copies may not import fs's reading functions; a file that reads
    // only the service's own files says why in an eslint-disable comment.
    files: [
      "src/indexer/**/*.ts",
      "src/tools/**/*.ts",
      "src/pipeline/**/*.ts",
      "src/health/**/*.ts",
      "src/ecosystems/**/*.ts",
      "src/domain/**/*.ts",
      "src/verify/**/*.ts",
      "src/jobs/**/*.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        ...FS_MODULES.map((name) => ({ name, importNames: FS_READS, message: READ_MESSAGE })),
      ],
      "no-restricted-syntax": [
        "error",
        {
          selector: "ImportExpression[source.value=/^(node:)?fs(\\/promises)?$/]",
          message: READ_MESSAGE,
        },
        {
          selector:
            "CallExpression[callee.name='require'][arguments.0.value=/^(node:)?fs(\\/promises)?$/]",
          message: READ_MESSAGE,
        },
      ],
    },
  },
  {
    // The health scan's ecosystems change nothing on the host's side of a working copy but
    // through src/workcopy/fs.ts (removeFile, as kit.ts removeReport does):
    // where a report goes comes from the repository (a `--report-dir`, a committed link), and
    // a plain rm of `path.join(root, dir, file)` removed a file of that name outside it.
    // Repeats the reading functions: this rule's options replace the block above's here.
    files: ["src/ecosystems/**/*.ts", "src/health/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        ...FS_MODULES.map((name) => ({ name, importNames: FS_READS, message: READ_MESSAGE })),
        ...FS_MODULES.map((name) => ({
          name,
          importNames: FS_WRITES,
          message:
            "Change files of a working copy through src/workcopy/fs.ts (removeFile), never by a path the repository can point elsewhere.",
        })),
      ],
    },
  },
  {
    // Plain Node scripts and tool configs (CommonJS for dependency-cruiser).
    files: ["**/*.mjs", "**/*.cjs"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        module: "writable",
        require: "readonly",
      },
    },
  },
  {
    files: ["src/cli/**", "scripts/**", "bench/**"],
    rules: { "no-console": "off" },
  },
);
