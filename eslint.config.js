import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", ".data/", "coverage/", "fixtures/"] },
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
