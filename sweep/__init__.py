"""grpo-sweep's door: the CLI, sweep configs, search spaces and the Ray Tune wiring."""
