-- The step (its journal step number) whose patch last wrote the row. A patch of an earlier step
-- that lands later (another replica redoing the same step's records, slowly) is left out, as it
-- is when the journal holds a row of a later step; but a step that writes no journal row (a
-- pause in a sub-run) left nothing in the journal to tell, and the late patch wrote the row back
-- (docs/adr/002-executor-durability.md, amended 2026-11-27: chaos seed 501). NULL: no step
-- patched the row since this column came.
ALTER TABLE "agent_workflow_executions" ADD COLUMN "patchedStep" INTEGER;
