/**
 * Prisma CLI configuration (Prisma 7). Only `prisma generate` is used in Baton: the
 * schema engine is not shipped with the repo, so migrations are hand-written SQL
 * applied by `migrate()` from `@baton/store`.
 */
import { defineConfig } from "prisma/config";

export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: {
    // Read lazily by the CLI; generation itself never connects.
    url: process.env.BATON_DATABASE_URL ?? process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/baton",
  },
});
