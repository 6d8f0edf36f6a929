-- Argo CD health of a msgbench.dev server kind: JetStreamCluster, MqttBroker and PubSubServer
-- share one status shape (ServerStatus in crds/src/common.rs: conditions Ready, Progressing and
-- Degraded, each with reason, message and observedGeneration) and so this one script.
--
-- Decisions, in the order they are checked:
-- 1. No status or no conditions: Progressing. The operator has not reported yet.
-- 2. The status describes an older spec (status.observedGeneration, or when it is absent the
--    Ready condition's observedGeneration, below metadata.generation): Progressing. Conditions
--    of an old generation say nothing about the new spec, not even a Degraded one.
-- 3. Degraded=True: Degraded, with the condition's reason and message (kubelet refusals,
--    forbidden sysctls, spec violations, image pulls, crash loops). It wins over Ready: the
--    operator reports Degraded only for a problem it observes now, which can exist while every
--    replica is still ready.
-- 4. Ready=True and Progressing not True: Healthy. Ready=True with Progressing=True means the
--    pods are being replaced with a new template: Progressing, as Argo CD judges a Deployment
--    in the middle of a rollout, so a sync wave waits for the rollout to end.
-- 5. Anything else (Ready False, Unknown or missing): Progressing with Ready's reason and
--    message, e.g. "ReplicasNotReady: 1/3 replicas ready". Not-ready pods alone are never
--    Degraded: the operator says Degraded itself when something will not fix itself.
local hs = {}

{{helpers}}

local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  local text = join(c.reason, c.message)
  if text == "" then
    return fallback
  end
  return text
end

local status = obj.status
if status == nil or status.conditions == nil or #status.conditions == 0 then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
if generation ~= nil then
  local observed = status.observedGeneration
  if observed == nil then
    local ready = condition(status.conditions, "Ready")
    observed = ready and ready.observedGeneration
  end
  if observed ~= nil and observed < generation then
    hs.status = "Progressing"
    hs.message = string.format(
      "Waiting for the operator to observe generation %d (status is of %d)", generation, observed)
    return hs
  end
end

local degraded = condition(status.conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded, "Degraded")
  return hs
end

local ready = condition(status.conditions, "Ready")
local progressing = condition(status.conditions, "Progressing")
if ready ~= nil and ready.status == "True" then
  if progressing ~= nil and progressing.status == "True" then
    hs.status = "Progressing"
    hs.message = describe(progressing, "Rolling out")
    return hs
  end
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Waiting for the Ready condition")
return hs
