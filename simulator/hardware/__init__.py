"""Hardware: cluster specs (``spec``), kernel-level cost formulas (``formulas``), the simpy hardware model
(``model``), closed-form collectives."""
