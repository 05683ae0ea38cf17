-- The step whose write began the row's attempt: a write with status running or paused, which
-- the engine makes only when it begins an attempt. A later step writes the row again (the
-- attempt's end) and its stepVersion with it; this keeps the beginning's step, so that a
-- checkpoint rebuilt from the journal can tell a beginning whose events never went out under the
-- ids its step gave them, and a late copy of them is dropped as a repeat
-- (docs/adr/004-durable-engine.md, amended in session 30: chaos seed 1147). NULL: not known
-- (written before this column came, or without a step number).
ALTER TABLE "agent_workflow_node_executions" ADD COLUMN "beganStep" INTEGER;
