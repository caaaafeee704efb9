"""Auto-scaling of minibatches and epochs for batches larger than the reference.

A batch k times the reference (`ppo.auto_scale_reference_batch`, by default 256 envs x 128
steps) is split into k times more minibatches (at most 64), so each gradient step sees a
reference-sized minibatch, and trained for fewer epochs (`ppo.auto_scale_epoch_floor`, 2 by
default), since each epoch already takes k times more gradient steps. A smaller reference
exercises the rule at a batch a CPU can afford (`ppo.auto_scale_reference_batch`).
"""

from __future__ import annotations

import dataclasses
import logging

from ppo_lab.config import PPOConfig

log = logging.getLogger(__name__)

REFERENCE_BATCH = 256 * 128  # the default of ppo.auto_scale_reference_batch
MAX_MINIBATCHES = 64


def scaled_minibatches_and_epochs(
    batch_size: int, num_minibatches: int, update_epochs: int, epoch_floor: int = 2, max_minibatches: int = MAX_MINIBATCHES,
    reference_batch: int = REFERENCE_BATCH,
) -> tuple[int, int]:
    """The rule: scale = batch // reference; applies only when scale >= 2."""
    scale = batch_size // reference_batch
    if scale < 2:
        return num_minibatches, update_epochs
    minibatches = min(num_minibatches * scale, max_minibatches)
    # Keep the split exact: the largest minibatch count <= the target that divides the batch.
    while batch_size % minibatches:
        minibatches -= 1
    return max(minibatches, num_minibatches), max(epoch_floor, update_epochs // scale)


def apply_auto_scale(ppo: PPOConfig) -> PPOConfig:
    """Return `ppo` with auto-scaling applied (when on), logging any change it makes."""
    if not ppo.auto_scale:
        return ppo
    reference = ppo.auto_scale_reference_batch
    minibatches, epochs = scaled_minibatches_and_epochs(
        ppo.batch_size, ppo.num_minibatches, ppo.update_epochs, ppo.auto_scale_epoch_floor, reference_batch=reference
    )
    if (minibatches, epochs) != (ppo.num_minibatches, ppo.update_epochs):
        log.info(
            "auto_scale: batch %d = %dx the reference %d: num_minibatches %d -> %d, update_epochs %d -> %d "
            "(ppo.auto_scale=false turns this off)",
            ppo.batch_size, ppo.batch_size // reference, reference,
            ppo.num_minibatches, minibatches, ppo.update_epochs, epochs,
        )
    return dataclasses.replace(ppo, num_minibatches=minibatches, update_epochs=epochs)
