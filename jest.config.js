/**
 * Jest runs the TypeScript sources as native ESM (swc strips the types).
 * Integration tests (*.int.test.ts) talk to the real NATS, Redis and Postgres.
 * @type {import('jest').Config}
 */
export default {
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  transform: {
    "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2024" }, module: { type: "es6" } }],
  },
  testMatch: ["<rootDir>/{libs,services,test,scripts,bin,infra,bench}/**/*.test.ts"],
  testPathIgnorePatterns: ["/node_modules/", "/.tooling/"],
  testTimeout: 30000,
  maxWorkers: 2,
  detectOpenHandles: false,
};
