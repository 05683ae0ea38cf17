# syntax=docker/dockerfile:1
# Baton: one image for every module. BATON_TARGET (or `--target=`) picks what a
# container runs: all (default), or gateway, executor, worker, planner, learner,
# memory, review — comma-separated for several. `migrate` applies the database
# migrations and exits:
#   docker run --rm -e BATON_DATABASE_URL=… baton migrate
# Node 24 runs the TypeScript sources directly (type stripping): there is no build step
# besides installing dependencies and generating the Prisma client.

# Only the package manifests, so the dependency layer is rebuilt only when they change.
FROM node:24-slim AS manifests
WORKDIR /src
COPY libs libs
COPY services services
RUN mkdir -p /out \
 && find libs services -name package.json -not -path "*/node_modules/*" -exec cp --parents {} /out/ \;

FROM node:24-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
COPY --from=manifests /out/ ./
RUN npm install --no-audit --no-fund --loglevel=error
COPY . .
RUN node scripts/generate.ts prisma

FROM node:24-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build --chown=node:node /app /app
# Containers get their NATS, Redis and Postgres from outside: never start local servers.
ENV NODE_ENV=production \
    BATON_TARGET=all \
    BATON_EMBEDDED=false \
    BATON_HOST=0.0.0.0 \
    BATON_PORT=3000 \
    BATON_HEALTH_PORT=9464 \
    BATON_DATA_DIR=/app/.baton
USER node
# 3000: gateway (REST, /docs, /healthz, /readyz); 9464: /healthz and /readyz of targets without the gateway.
EXPOSE 3000 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/baton.ts"]
