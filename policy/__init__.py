"""CrossGuard policy pack for the inference platform (rules in `policy.rules`, pack in `policy.pack`)."""
