"""Where the reference-scale experiment's time goes at 1..N seeds.

    python scripts/accel_parts.py hardware=gpu --seeds 1,8 [--precision bf16]

Per seed count, each timed on its own (jit of vmap over seeds):
- env: the rollout loop with random actions (no network);
- rollout: the trainer's rollout (policy forward, sampling, truncation bootstrap);
- chunk: the trainer's chunk of updates (rollout + GAE + epochs);
- net_grad[impl]: value_and_grad of the network on one minibatch per seed, per conv impl;
- net_grad_seq: the same with seeds in a sequential lax.map instead of vmap.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--seeds", default="1,8")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--impls", default="native,im2col")
    parser.add_argument("--parts", default="env,rollout,chunk,net,netseq")
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from ppo_lab.bench.configs import compose
    from ppo_lab.bench.suite import env_only_rollout, timed_calls
    from ppo_lab.hardware import start_jax

    base = ["experiment=goodhart", "reward=ground_truth", "ppo.auto_scale=false", "ppo.num_minibatches=1",
            f"hardware.precision={args.precision}", "benchmark=true"] + args.overrides
    start_jax(compose(base)["hardware"])
    import jax
    import jax.numpy as jnp

    from ppo_lab.config import validate
    from ppo_lab.networks import ActorCritic
    from ppo_lab.ppo.hypers import Hypers
    from ppo_lab.ppo.train import make_trainer
    from ppo_lab.run.build import build

    parts = args.parts.split(",")
    results = []
    for seeds in [int(s) for s in args.seeds.split(",")]:
        cfg = validate(compose(base + [f"num_seeds={seeds}"]))
        comp = build(cfg, 1)
        ppo, env, params = comp.ppo, comp.env, comp.env_params
        n, steps = ppo.num_envs, ppo.num_steps
        trainer = make_trainer(ppo, env, params, comp.network, num_envs=n, chunk_updates=args.updates)
        keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        hypers, num_updates = Hypers.of(ppo), jnp.int32(trainer.num_updates)  # arguments, as a run's programs take them
        states = [jax.jit(trainer.init)(*jax.random.split(k), hypers, num_updates) for k in keys]
        state = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
        num_actions = env.action_space(params).n
        row = {"seeds": seeds, "precision": args.precision, "conv": comp.network.conv}

        def report(name, fn, *fn_args, env_steps):
            compile_s, sps = timed_calls(fn, fn_args, env_steps, 2.0)
            per_call = env_steps / sps
            row[name] = {"s_per_call": per_call, "sps": sps, "compile_s": compile_s}
            print(f"[parts] seeds={seeds} {name}: {per_call * 1e3:.1f} ms/call, {env_steps / per_call:,.0f} steps/s "
                  f"(compile {compile_s:.1f} s)", file=sys.stderr, flush=True)

        if "env" in parts:
            def env_only(state):
                return env_only_rollout(env, params, n, steps, state.env_state, state.obs, state.key).records
            report("env", jax.vmap(env_only), state, env_steps=seeds * n * steps)
        if "rollout" in parts:
            report("rollout", jax.vmap(lambda s: trainer.collect(s, hypers).records), state, env_steps=seeds * n * steps)
        if "chunk" in parts:
            report("chunk", jax.vmap(trainer.chunk, in_axes=(0, None, None, None)), state, jnp.int32(0), hypers, num_updates,
                   env_steps=seeds * n * steps * args.updates)
        batch = n * steps
        obs = jnp.zeros((seeds, batch) + state.obs.shape[2:], state.obs.dtype)
        for impl in args.impls.split(","):
            net = ActorCritic(num_actions, cfg.network, comp.network.actor_obs_channels, conv=impl, precision=args.precision)

            def loss(p, o):
                logits, value = net.apply(p, o)
                return jnp.mean(logits) + jnp.mean(value)

            grad = jax.grad(loss)
            if "net" in parts:
                # one epoch's forward+backward over the whole batch (4 of these per update)
                report(f"net_grad_{impl}", jax.vmap(grad), state.params, obs, env_steps=seeds * batch)
            if "netseq" in parts and seeds > 1:
                report(f"net_grad_seq_{impl}", lambda p, o: jax.lax.map(lambda a: grad(*a), (p, o)), state.params, obs,
                       env_steps=seeds * batch)
            if "fwd" in parts:
                report(f"net_fwd_{impl}", jax.vmap(lambda p, o: net.apply(p, o)), state.params, obs, env_steps=seeds * batch)
        if "layers" in parts:
            from ppo_lab.networks import CONV_FUNCTIONS
            dt = jnp.bfloat16 if args.precision == "bf16" else jnp.float32
            x0 = jnp.zeros((batch, 11, 11, 2), dt)
            for impl in args.impls.split(",") + ["xla"]:
                conv = CONV_FUNCTIONS[impl]
                ks = [jnp.full((3, 3, 2, 32), 0.1, dt), jnp.full((3, 3, 32, 64), 0.1, dt), jnp.full((3, 3, 64, 64), 0.1, dt)]

                def convs(ks, x):
                    for k in ks:
                        x = jax.nn.relu(conv(x, k))
                    return jnp.mean(x.astype(jnp.float32))

                if seeds == 1:
                    report(f"convs_fwd_{impl}", convs, ks, x0, env_steps=batch)
                    report(f"convs_grad_{impl}", jax.grad(convs), ks, x0, env_steps=batch)
                    for i, (c, f) in enumerate([(2, 32), (32, 64), (64, 64)]):
                        xi = jnp.zeros((batch, 11, 11, c), dt)
                        report(f"conv{i}_grad_{impl}", jax.grad(lambda k, x: jnp.mean(conv(x, k).astype(jnp.float32)), argnums=(0, 1)), ks[i], xi, env_steps=batch)
                        report(f"conv{i}_fwd_{impl}", lambda k, x: conv(x, k), ks[i], xi, env_steps=batch)
            w = jnp.zeros((7744, 512), dt)
            h = jnp.zeros((batch, 7744), dt)
            report("dense_grad", jax.grad(lambda w, h: jnp.mean((h @ w).astype(jnp.float32)), argnums=(0, 1)), w, h, env_steps=batch)
        results.append(row)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
