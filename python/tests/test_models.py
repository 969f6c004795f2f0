"""The "flashgen" torch.compile backend on small Hugging Face models (random weights from
configs, no downloads): a Llama-style decoder with grouped K/V heads and a GPT-2, each with
attn_implementation "eager" and "sdpa", in eval mode under torch.no_grad(), with and without a
padding attention mask. The compiled logits match the eager model's (f32) and the report shows
every layer's attention captured (Llama's as GQA: K/V heads read once).
Backend: flashgen/torch/_backend.py.
"""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import flashgen  # noqa: E402
import flashgen.torch  # noqa: E402,F401
from flashgen.torch import last_report  # noqa: E402
from flashgen.torch._backend import reset_report  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compile")

LAYERS, BATCH, SEQ, VOCAB = 2, 2, 24, 128


def llama(impl):
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        attn_implementation=impl)
    return transformers.LlamaForCausalLM(cfg)


def gpt2(impl):
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=LAYERS, n_head=4,
        bos_token_id=0, eos_token_id=0, attn_implementation=impl)
    return transformers.GPT2LMHeadModel(cfg)


def padded_mask():
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, :5] = 0  # left padding of the second sequence
    return mask


@pytest.mark.parametrize("padding", [False, True], ids=["no_mask", "padding_mask"])
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", [llama, gpt2], ids=["llama", "gpt2"])
def test_compiled_model_matches_eager(arch, impl, padding):
    model = arch(impl).eval()
    assert model.config._attn_implementation == impl
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    kwargs = {"attention_mask": padded_mask()} if padding else {}
    with torch.no_grad():
        ref = model(ids, **kwargs).logits
        reset_report()
        out = torch.compile(model, backend="flashgen")(ids, **kwargs).logits
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    report = last_report()
    assert report.left_alone == [], report
    assert len(report.captured) == LAYERS, report
    want = "sdpa" if impl == "sdpa" else "eager chain"
    assert all(c.kind == want for c in report.captured), report
    if arch is llama:  # 4 query heads on 2 K/V heads, whether by enable_gqa or repeat_kv
        assert all(c.gqa and c.shapes["k"][1] == 2 for c in report.captured), report


def big_enough(arch, impl):
    """The same architectures with head dims the CUDA backend's tensor cores take (d = 64)."""
    if arch is llama:
        cfg = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=LAYERS,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            attn_implementation=impl)
        return transformers.LlamaForCausalLM(cfg)
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=512, n_embd=256, n_layer=LAYERS, n_head=4,
        bos_token_id=0, eos_token_id=0, attn_implementation=impl)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.skipif(not torch.cuda.is_available() or not flashgen.cuda_available(),
                    reason="no CUDA GPU")
@pytest.mark.parametrize("padding", [False, True], ids=["no_mask", "padding_mask"])
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", [llama, gpt2], ids=["llama", "gpt2"])
def test_compiled_bf16_model_on_the_gpu_matches_eager(arch, impl, padding):
    """bf16 on the GPU: flashgen's logits are as close to the f32 model's as eager bf16's are
    (bf16 tolerance: within twice eager bf16's own error, plus 1 % of the logits' scale)."""
    seq = 200
    model = big_enough(arch, impl).eval().cuda()
    ids = torch.randint(0, VOCAB, (BATCH, seq), device="cuda")
    kwargs = {}
    if padding:
        mask = torch.ones(BATCH, seq, dtype=torch.long, device="cuda")
        mask[1, :17] = 0
        kwargs = {"attention_mask": mask}
    with torch.no_grad():
        exact = model(ids, **kwargs).logits.float()
        model = model.bfloat16()
        ref = model(ids, **kwargs).logits.float()
        reset_report()
        out = torch.compile(model, backend="flashgen")(ids, **kwargs).logits.float()
    flashgen.check_errors()
    live = slice(None) if not padding else (1, slice(17, None))
    scale = exact[live].abs().max().item()
    eager_err = (ref[live] - exact[live]).abs().max().item()
    fg_err = (out[live] - exact[live]).abs().max().item()
    assert fg_err <= 2 * eager_err + 0.01 * scale, (fg_err, eager_err, scale)
    report = last_report()
    assert report.left_alone == [], report
    assert len(report.captured) == LAYERS, report
