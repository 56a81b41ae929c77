"""Hardware: cluster specs (``spec``), the simpy hardware model (``model``), closed-form collectives."""
