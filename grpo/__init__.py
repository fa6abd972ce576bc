"""The GRPO trainer, usable without Tune: config, math, episodes, policy, the step loop."""
