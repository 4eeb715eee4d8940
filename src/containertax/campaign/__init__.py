"""Campaign definition: the config, its schedule, progress and the optimisation study."""
