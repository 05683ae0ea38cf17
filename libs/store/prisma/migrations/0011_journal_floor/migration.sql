-- The lowest journal step number the run's records may still be written at. A checkpoint
-- rebuilt from the journal (Redis lost it) sets it, in the statement that locks the row before
-- the journal is read, past every step number written before (the rebuild numbers its own steps
-- from there); the journal statement reads it under the lock its foreign key takes and refuses a
-- batch with a record numbered below it: a step of the lost checkpoint, whose executor stalled
-- before its records, can no longer land after the rebuild and announce the step again
-- (docs/adr/004-durable-engine.md, amended 2026-11-27: chaos seed 603). NULL: never rebuilt.
ALTER TABLE "agent_workflow_executions" ADD COLUMN "journalFloor" INTEGER;
