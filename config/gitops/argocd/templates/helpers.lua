local function condition(conditions, type_)
  for _, c in ipairs(conditions or {}) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

-- "<reason>: <message>", or whichever of the two is not empty ("" when both are).
local function join(reason, message)
  reason = reason or ""
  message = message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  if reason ~= "" then
    return reason
  end
  return message
end
