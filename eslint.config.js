import tseslint from "typescript-eslint";
import importX from "eslint-plugin-import-x";

export default tseslint.config(
  { ignores: ["**/node_modules/**", ".tooling/**", "**/generated/**", "libs/contracts/src/gen/**", "coverage/**", "*.config.js", "examples/**/*.js"] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { "import-x": importX },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
      "import-x/no-cycle": ["error", { maxDepth: 10 }],
      "no-restricted-imports": ["error", { patterns: [{ group: ["@baton/*/src/*", "@baton/*/src"], message: "Import a package through its entry point, not its files." }] }],
    },
  },
  {
    files: ["libs/engine/src/**/*.ts"],
    ignores: ["libs/engine/src/**/*.test.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [
        { group: ["node:*", "@baton/bus", "@baton/store", "@baton/checkpoints", "@nats-io/*", "ioredis", "@prisma/*", "pg", "fastify"], message: "The engine is pure: no I/O imports." },
      ] }],
    },
  },
  {
    files: ["**/*.test.ts", "test/**/*.ts"],
    rules: { "@typescript-eslint/no-non-null-assertion": "off", "@typescript-eslint/unbound-method": "off" },
  },
);
