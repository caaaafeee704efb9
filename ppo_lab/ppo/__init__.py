"""Pure PPO: GAE, losses, schedules, auto-scaling and the jitted chunked trainer."""
