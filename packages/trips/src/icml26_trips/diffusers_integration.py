"""diffusers adapters (extra ``diffusers``): a step-end CFG-schedule callback and an SD3 sampler.

* ``TriPSGuidanceCallback`` is a ``diffusers.callbacks.PipelineCallback``: pass it as
  ``callback_on_step_end`` to any pipeline that reads ``pipeline._guidance_scale`` each step
  (SD3 / SD3.5, Flux-style CFG pipelines, SDXL...) and the CFG scale follows ``schedule.cfg``.
  It changes guidance only: DC and re-noising need the velocity, which a step-end callback does
  not see, so they live in ``SD3TriPSSampler``.
* ``SD3TriPSSampler`` runs the full TriPS step (``FlowDPSSampler``) over an SD3-family
  ``SD3Transformer2DModel`` with the pipeline's ``FlowMatchEulerDiscreteScheduler`` noise levels,
  optional VAE decoding inside the data-consistency loss, and pre-computed prompt embeddings.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.callbacks import PipelineCallback

from .operators import LinearOperator
from .sampler import FlowDPSSampler
from .schedules import TriadicSchedule

# diffusers batches the CFG branches only when the scale is > 1 at the first step, so a
# scale of exactly 1 is sent as 1 + CFG_FLOOR (a 1e-6 relative change of the update).
CFG_FLOOR = 1e-6


class TriPSGuidanceCallback(PipelineCallback):
    """Sets ``pipeline._guidance_scale`` to ``schedule.cfg[i + 1]`` at the end of step ``i``.

    Call the pipeline with ``guidance_scale=callback.initial_guidance_scale`` (step 0 runs
    before any callback) and ``num_inference_steps=schedule.nfe``::

        cb = TriPSGuidanceCallback(make_template(nfe=28))
        pipe(prompt, num_inference_steps=28, guidance_scale=cb.initial_guidance_scale,
             callback_on_step_end=cb)
    """

    @property
    def tensor_inputs(self) -> list[str]:
        return []  # reads no tensors: only the guidance scale changes

    def __init__(self, schedule: TriadicSchedule):
        super().__init__(cutoff_step_ratio=1.0)
        if schedule.cfg.ndim != 1:
            raise ValueError(
                "schedule must hold one schedule (arrays of shape (nfe,)) for a pipeline"
            )
        if bool((schedule.cfg < 1).any()):
            raise ValueError(
                "schedule.cfg must be >= 1 for a diffusers pipeline (scale 1 = conditional only)"
            )
        self.schedule = schedule
        self.scales = [max(float(v), 1.0 + CFG_FLOOR) for v in schedule.cfg]

    @property
    def initial_guidance_scale(self) -> float:
        return self.scales[0]

    def _check_first_step(self, pipeline) -> None:
        """Raise when the call cannot follow the schedule (checked once, after step 0).

        The pipeline decides whether to batch the CFG branches from ``guidance_scale`` before
        the loop; called with CFG off (scale <= 1) it would run the later steps (all > 1 here)
        with mismatched batches, so that call is refused.
        """
        total = getattr(pipeline, "num_timesteps", None)
        if total is not None and total != self.schedule.nfe:
            raise ValueError(
                f"the pipeline runs {total} steps but the schedule has nfe={self.schedule.nfe}; "
                "pass num_inference_steps=schedule.nfe"
            )
        scale = getattr(pipeline, "_guidance_scale", None)
        cfg_on = getattr(pipeline, "do_classifier_free_guidance", None)
        if cfg_on is None and scale is not None:
            cfg_on = float(scale) > 1
        if cfg_on is False:
            raise ValueError(
                f"the pipeline was called with guidance_scale={scale} (CFG off), but the schedule "
                f"later uses scales up to {max(self.scales):.4g}: pass "
                f"guidance_scale=callback.initial_guidance_scale ({self.initial_guidance_scale!r})"
            )
        if scale is not None and abs(float(scale) - self.initial_guidance_scale) > 1e-6 * max(
            1.0, abs(self.initial_guidance_scale)
        ):
            raise ValueError(
                f"step 0 ran at guidance_scale={scale} but the schedule starts at "
                f"{float(self.schedule.cfg[0]):.6g}: pass guidance_scale=callback.initial_guidance_scale"
            )

    def callback_fn(
        self, pipeline, step_index: int, timestep, callback_kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        if step_index == 0:
            self._check_first_step(pipeline)
        if step_index + 1 < len(self.scales):
            pipeline._guidance_scale = self.scales[step_index + 1]
        return callback_kwargs


class SD3TriPSSampler:
    """TriPS posterior sampling with an SD3-family transformer (latent space).

    Args:
        transformer: an ``SD3Transformer2DModel`` (velocity = noise - data, as TriPS assumes).
        scheduler: a ``FlowMatchEulerDiscreteScheduler``; its ``sigmas`` for ``nfe`` steps are
            used. Leave SD3.5-M's scheduler as built (shift 3) for parity with the official runs:
            their ``scheduler.config.shift = 4.0`` does not change a built scheduler's sigmas.
        operator: ``A`` acting on decoded images (or on latents when ``vae`` is ``None``).
        vae: optional ``AutoencoderKL``; ``D(z) = vae.decode(z / scaling + shift)``.
        **sampler_kwargs: ``sigma_y``, ``pinv_weight``, ``phi``, ``inner_steps`` of ``FlowDPSSampler``.
    """

    def __init__(
        self, transformer, scheduler, operator: LinearOperator | None, *, vae=None, **sampler_kwargs
    ):
        self.transformer = transformer
        self.scheduler = scheduler
        self.operator = operator
        self.vae = vae
        self.sampler_kwargs = sampler_kwargs

    @classmethod
    def from_pipeline(
        cls, pipe, operator: LinearOperator | None, *, decode: bool = True, **sampler_kwargs
    ):
        """Take the transformer, scheduler and (if ``decode``) VAE of a ``StableDiffusion3Pipeline``."""
        return cls(
            pipe.transformer,
            pipe.scheduler,
            operator,
            vae=pipe.vae if decode else None,
            **sampler_kwargs,
        )

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        cfg = self.vae.config
        z = z / cfg.scaling_factor + (getattr(cfg, "shift_factor", None) or 0.0)
        return self.vae.decode(z, return_dict=False)[0]

    def sigmas(self, nfe: int, device=None) -> torch.Tensor:
        self.scheduler.set_timesteps(nfe, device=device)
        return self.scheduler.sigmas.to(torch.float64).cpu()  # (nfe + 1,), last = 0

    @torch.no_grad()
    def sample(
        self,
        y: torch.Tensor | None,
        schedule: TriadicSchedule,
        *,
        prompt_embeds: torch.Tensor,
        pooled_prompt_embeds: torch.Tensor,
        negative_prompt_embeds: torch.Tensor | None = None,
        negative_pooled_prompt_embeds: torch.Tensor | None = None,
        latents: torch.Tensor | None = None,
        shape: tuple[int, ...] | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Return final latents ``(B, C, h, w)``; embeddings ``(B, T, D)`` and ``(B, P)``.

        Negative embeddings default to zeros (SD3's empty-prompt convention differs: pass the
        encoded empty prompt for parity with the pipeline).
        """
        neg = (
            negative_prompt_embeds
            if negative_prompt_embeds is not None
            else torch.zeros_like(prompt_embeds)
        )
        neg_pooled = (
            negative_pooled_prompt_embeds
            if negative_pooled_prompt_embeds is not None
            else torch.zeros_like(pooled_prompt_embeds)
        )

        def velocity(z: torch.Tensor, sigma: torch.Tensor, cond: Any) -> torch.Tensor:
            emb, pooled = (neg, neg_pooled) if cond is None else cond
            out = self.transformer(
                hidden_states=z.to(self.transformer.dtype),
                timestep=(sigma * self.scheduler.config.num_train_timesteps).to(
                    self.transformer.dtype
                ),
                encoder_hidden_states=emb,
                pooled_projections=pooled,
                return_dict=False,
            )[0]
            return out.to(z.dtype)

        sampler = FlowDPSSampler(
            velocity,
            self.operator,
            decode=self.decode if self.vae is not None else None,
            sigmas=self.sigmas(schedule.nfe),
            **self.sampler_kwargs,
        )
        if latents is None and shape is None:
            raise ValueError("give latents (initial noise) or shape (B, C, h, w)")
        return sampler.sample(
            y,
            schedule,
            generator,
            cond=(prompt_embeds, pooled_prompt_embeds),
            z_init=latents,
            shape=shape,
        )
