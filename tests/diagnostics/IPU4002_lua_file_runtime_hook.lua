-- Counts steps, but adds a string to a number on the first one.
function on_step(ctx)
  local total = ctx.step + "many"
  return total
end
