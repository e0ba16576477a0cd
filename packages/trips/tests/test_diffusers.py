"""The diffusers adapters on a tiny random-init SD3 transformer (no hub, no network)."""

import pytest
import torch

diffusers = pytest.importorskip("diffusers")
pytest.importorskip("transformers")  # StableDiffusion3Pipeline imports the text-encoder classes

from diffusers import (  # noqa: E402
    AutoencoderKL,
    FlowMatchEulerDiscreteScheduler,
    SD3Transformer2DModel,
    StableDiffusion3Pipeline,
)
from icml26_trips import Inpainting, TriadicSchedule, make_template  # noqa: E402
from icml26_trips.diffusers_integration import SD3TriPSSampler, TriPSGuidanceCallback  # noqa: E402

B, C, H = 2, 4, 8


@pytest.fixture(scope="module")
def pipe():
    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(
        sample_size=H, patch_size=2, in_channels=C, num_layers=1, attention_head_dim=8,
        num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=16,
        pooled_projection_dim=8, out_channels=C, pos_embed_max_size=8,
    ).eval()  # fmt: skip
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=C, block_out_channels=(8,), layers_per_block=1,
        norm_num_groups=4, down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
        sample_size=H,
    ).eval()  # fmt: skip
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    return StableDiffusion3Pipeline(
        transformer=transformer, scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None,
        text_encoder_2=None, tokenizer_2=None, text_encoder_3=None, tokenizer_3=None,
    )  # fmt: skip


def embeds(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 5, 16, generator=g), torch.randn(B, 8, generator=g)


def run_pipeline(pipe, latents, guidance, callback=None, nfe=6):
    (pe, pp), (ne, npool) = embeds(1), embeds(2)
    return pipe(
        prompt_embeds=pe, pooled_prompt_embeds=pp, negative_prompt_embeds=ne,
        negative_pooled_prompt_embeds=npool, latents=latents.clone(), num_inference_steps=nfe,
        guidance_scale=guidance, output_type="latent", height=H, width=H,
        callback_on_step_end=callback,
    ).images  # fmt: skip


def run_sampler(pipe, latents, schedule):
    (pe, pp), (ne, npool) = embeds(1), embeds(2)
    sampler = SD3TriPSSampler.from_pipeline(pipe, None, decode=False)
    return sampler.sample(
        None, schedule, prompt_embeds=pe, pooled_prompt_embeds=pp, negative_prompt_embeds=ne,
        negative_pooled_prompt_embeds=npool, latents=latents,
    )  # fmt: skip


def test_wrapper_equals_the_sd3_pipeline_at_constant_guidance(pipe):
    """lambda const, beta = eta = 0: TriPS over the SD3 transformer is the pipeline's CFG Euler loop."""
    latents = torch.randn(B, C, H, H, generator=torch.Generator().manual_seed(3))
    ref = run_pipeline(pipe, latents, 4.0)
    ours = run_sampler(pipe, latents, TriadicSchedule.constant(6, cfg=4.0))
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)


def test_callback_sets_per_step_guidance(pipe):
    """Pipeline + TriPSGuidanceCallback == our sampler with the same (varying) CFG schedule."""
    latents = torch.randn(B, C, H, H, generator=torch.Generator().manual_seed(4))
    sched = make_template(
        cfg="exponential", cfg_range=(1.0, 7.0), dc_range=(0.0, 0.0), eta_range=(0.0, 0.0), nfe=6
    )
    cb = TriPSGuidanceCallback(sched)
    assert cb.initial_guidance_scale == pytest.approx(1.0, abs=1e-5)
    ref = run_pipeline(pipe, latents, cb.initial_guidance_scale, callback=cb)
    ours = run_sampler(pipe, latents, sched)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)
    # and the schedule matters: a constant scale gives a different answer
    const = run_pipeline(pipe, latents, 4.0)
    assert float((const - ref).abs().max()) > 1e-3


def test_callback_rejects_a_schedule_of_the_wrong_length(pipe):
    latents = torch.randn(B, C, H, H, generator=torch.Generator().manual_seed(5))
    cb = TriPSGuidanceCallback(TriadicSchedule.constant(4, cfg=2.0))
    with pytest.raises(ValueError, match="nfe=4"):
        run_pipeline(pipe, latents, 2.0, callback=cb, nfe=6)
    with pytest.raises(ValueError, match="cfg must be >= 1"):
        TriPSGuidanceCallback(TriadicSchedule.constant(4, cfg=0.5))


def test_dc_through_the_vae_reduces_the_residual(pipe):
    """Pixel-space inpainting through the tiny VAE: DC (beta > 0) fits y better than beta = 0."""
    mask = torch.zeros(3, H, H)
    mask[:, : H // 2] = 1
    op = Inpainting(mask)
    y = op(torch.rand(B, 3, H, H, generator=torch.Generator().manual_seed(6)) * 2 - 1)
    (pe, pp) = embeds(1)
    latents = torch.randn(B, C, H, H, generator=torch.Generator().manual_seed(7))
    sampler = SD3TriPSSampler.from_pipeline(pipe, op, sigma_y=0.03, inner_steps=2)
    residual = {}
    for beta in (0.0, 30.0):
        sched = make_template(
            dc_range=(beta, beta / 3), cfg_range=(1.0, 1.0), eta_range=(0.5, 0.0), nfe=6
        )
        z = sampler.sample(
            y,
            sched,
            prompt_embeds=pe,
            pooled_prompt_embeds=pp,
            latents=latents,
            generator=torch.Generator().manual_seed(8),
        )
        with torch.no_grad():
            residual[beta] = float((op(sampler.decode(z)) - y).norm())
    assert residual[30.0] < 0.8 * residual[0.0], residual


def test_callback_refuses_a_call_with_cfg_off(pipe):
    """guidance_scale=1 turns diffusers' CFG batching off; a schedule that later exceeds 1 would
    then run with mismatched batches, so the callback raises at step 0."""
    latents = torch.randn(B, C, H, H, generator=torch.Generator().manual_seed(9))
    cb = TriPSGuidanceCallback(make_template(dc_range=(0.0, 0.0), eta_range=(0.0, 0.0), nfe=6))
    with pytest.raises(ValueError, match="CFG off"):
        run_pipeline(pipe, latents, 1.0, callback=cb)
    with pytest.raises(ValueError, match="step 0 ran at guidance_scale=5.0"):
        run_pipeline(pipe, latents, 5.0, callback=cb)


def test_flow_sigmas_equal_the_sd35_scheduler_and_config_shift_is_a_no_op():
    """The official runs set ``scheduler.config.shift = 4.0`` on SD3.5-M's built scheduler
    (shift 3): that leaves the sigmas at shift 3, which ``flow_sigmas(nfe)`` reproduces."""
    from icml26_trips import flow_sigmas

    sched = FlowMatchEulerDiscreteScheduler(shift=3.0)
    sched.config.shift = 4.0  # what the official sampler does
    sched.set_timesteps(28)
    got = sched.sigmas.to(torch.float64)  # float32 inside diffusers
    torch.testing.assert_close(
        flow_sigmas(28), got, rtol=0, atol=8 * torch.finfo(torch.float32).eps
    )
    assert abs(float(flow_sigmas(28, 4.0)[1]) - float(got[1])) > 1e-3
