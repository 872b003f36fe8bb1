"""Questions asked of a policy without deciding a call: previews, explanations, simulations."""
