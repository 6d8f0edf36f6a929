-- Argo CD health of a msgbench.dev BenchmarkRun (BenchmarkRunStatus in
-- crds/src/benchmark_run_status.rs; the conditions' rules are
-- operator-core/src/run/conditions.rs).
--
-- Decisions, in the order they are checked:
-- 1. No status: Progressing. The operator has not accepted the run yet.
-- 2. status.observedGeneration below metadata.generation: Progressing. A spec change starts a
--    new run, so the verdict in status (even Failed) belongs to the old spec.
-- 3. The run ended: phase Succeeded is Passed, phase Failed is Failed; without a terminal
--    phase, the Succeeded condition (True: Passed, False: Failed). The reason and message are
--    the verdict's, else the Succeeded condition's, else the phase.
--    - Passed: Healthy, with the verdict's message. Thresholds of severity warn that did not
--      hold are listed in the message but do not change the health: the operator's verdict
--      is Passed, and warn means "report only".
--    - Failed: Degraded with "<reason>: <message>", for every failure reason alike. It stays
--      Degraded until the spec changes or the run is deleted: a failed benchmark is a result
--      someone has to look at, not a transient state. The reasons (RunFailureReason in
--      crds/src/run_failure_reason.rs):
--      {{failure_reasons}}.
-- 4. Anything else (Pending, WaitingForTarget, Starting, Running, Merging): Progressing, with
--    the phase and where it is: the first of TargetReady and RunnersReady that is not True
--    (unless it only says Pending), or the trial and seconds while running. A run that waits
--    too long fails by its own deadlines, so the script never turns waiting into Degraded.
-- Suspended is never reported: a BenchmarkRun cannot be suspended.
local hs = {}

{{helpers}}

-- "latencyP99Ms le 50 (observed 73.1)" for every warn threshold that did not hold.
local function unmet_warnings(thresholds)
  local out = {}
  for _, t in ipairs(thresholds or {}) do
    if t.passed == false and t.severity == "warn" then
      local observed = "none"
      if t.observed ~= nil then
        observed = string.format("%g", t.observed)
      end
      local s = string.format("%s %s %g (observed %s)", tostring(t.metric), tostring(t.op),
        t.value or 0, observed)
      if t.variant ~= nil then
        s = t.variant .. ": " .. s
      end
      table.insert(out, s)
    end
  end
  return out
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to accept the run"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for the operator to start generation %d (status is of %d)",
    generation, observed)
  return hs
end

local verdict = status.verdict
local succeeded = condition(status.conditions, "Succeeded")
if succeeded ~= nil and succeeded.status ~= "True" and succeeded.status ~= "False" then
  succeeded = nil
end
local passed -- true or false once the run ended, nil before
if status.phase == "Succeeded" then
  passed = true
elseif status.phase == "Failed" then
  passed = false
elseif succeeded ~= nil then
  passed = succeeded.status == "True"
end
local reason, message
if verdict ~= nil then
  reason, message = verdict.reason, verdict.message
elseif succeeded ~= nil then
  reason, message = succeeded.reason, succeeded.message
else
  reason = status.phase
end

if passed == true then
  hs.status = "Healthy"
  hs.message = join("Passed", message)
  local warnings = unmet_warnings(status.thresholds)
  if #warnings > 0 then
    hs.message = hs.message .. "; warn thresholds not met: " .. table.concat(warnings, ", ")
  end
  return hs
end
if passed == false then
  hs.status = "Degraded"
  hs.message = join(reason, message)
  if hs.message == "" then
    hs.message = "Failed"
  end
  return hs
end

local phase = status.phase or "Pending"
local detail = ""
local progress = status.progress
if (phase == "Running" or phase == "Merging") and progress ~= nil then
  detail = string.format("trial %d/%d, %ds", progress.trial or 0, progress.trials or 0,
    progress.elapsedSeconds or 0)
  if progress.expectedSeconds ~= nil then
    detail = detail .. string.format(" of %ds", progress.expectedSeconds)
  end
else
  for _, type_ in ipairs({ "TargetReady", "RunnersReady" }) do
    local c = condition(status.conditions, type_)
    if c ~= nil and c.status ~= "True" then
      if c.reason ~= "Pending" then
        detail = join(c.reason, c.message)
      end
      break
    end
  end
end
hs.status = "Progressing"
hs.message = join(phase, detail)
return hs
