"""The cases of bench/doctor_suite.py: real architectures nobody on the project had run.

Every case is written as a user writes the command line (``torchwise doctor TARGET
--init-kwargs JSON --input SPEC ...``), so the bench can run it through the Python
API and through the CLI and compare. Hugging Face models use tiny configs of the
installed transformers/diffusers (no weights, no hub); GitHub models are model files
of public repositories, extracted from the fetched mirrors at the commits below and
never copied here.

Families: speech, contrastive, graph, moe, state-space, diffusion, detection, dense,
language, vision, sequence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Public repositories used, at these commits (fetched as bare mirrors).
REPOSITORIES = {
    "Diego999/pyGAT": "3664f2dc90cbf971564c0bf186dc794f12446d0c",
    "johnma2006/mamba-minimal": "03de542a36d873f6e6c4057ad687278cc6ae944d",
    "sooftware/conformer": "b4e7d44944214db6e5912f92ff43d5ea1919eaa2",
    "davidmrau/mixture-of-experts": "f662999727109357c42074997e9a6cd72806f668",
    "openai/improved-diffusion": "1bc7bbbdc414d83d4abf2ad8cc1446dc36c4e4d5",
    "MishaLaskin/vqvae": "d761a999e2267766400dc646d82d3ac3657771d4",
    "locuslab/TCN": "2f8c2b817050206397458dfd1f5a25ce8a32fe65",
}


@dataclass
class Case:
    """One model, as a command line: ``torchwise doctor TARGET [options]``."""

    name: str
    family: str
    target: str
    inputs: list[str] = field(default_factory=list)
    init_kwargs: dict[str, Any] | None = None
    build: str | None = None
    #: doctor options: causal_dim, batch_dim ("none" for no batch), loss, target_spec
    options: dict[str, Any] = field(default_factory=dict)
    #: a GitHub case: the repository (owner/name) and the paths to extract
    repo: str | None = None
    paths: list[str] = field(default_factory=list)
    inputs_from: str | None = None
    #: a case "found in the wild": what doctor reports, checked by hand against the code
    finding: str = ""

    def cli_args(self) -> list[str]:
        """The arguments of ``torchwise doctor`` for this case."""
        words = [self.target]
        for spec in self.inputs:
            words += ["--input", spec]
        if self.init_kwargs is not None:
            words += ["--init-kwargs", json.dumps(self.init_kwargs)]
        if self.build:
            words += ["--build", self.build]
        if self.inputs_from:
            words += ["--inputs-from", self.inputs_from]
        flags = {"causal_dim": "--causal", "batch_dim": "--batch-dim", "loss": "--loss",
                 "target_spec": "--target-spec"}  # fmt: skip
        for key, value in self.options.items():
            words += [flags[key], str(value)]
        return words


def text(vocab: int = 64, batch: int = 2, seq: int = 8, name: str = "input_ids") -> str:
    return f"{name}=i64[batch={batch},seq={seq}]<{vocab}"


LM = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64,
      "max_position_embeddings": 64}  # fmt: skip
CAUSAL = {"causal_dim": 1}
VIT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 2, "image_size": 32, "patch_size": 8}  # fmt: skip
AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 64, "conv_dim": [16, 16], "conv_stride": [5, 2],
         "conv_kernel": [10, 3], "num_conv_pos_embeddings": 16,
         "num_conv_pos_embedding_groups": 2, "vocab_size": 32}  # fmt: skip
WAVE = "input_values=f32[batch=2,1600]"

HF: list[Case] = [
    # -- speech ---------------------------------------------------------------------
    Case("whisper", "speech", "hf:WhisperForConditionalGeneration",
         ["input_features=f32[batch=2,16,32]", "decoder_input_ids=i64[batch=2,8]<64"],
         {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
          "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
          "num_mel_bins": 16, "max_source_positions": 16, "max_target_positions": 32,
          "vocab_size": 64, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
          "decoder_start_token_id": 1}),
    Case("wav2vec2-ctc", "speech", "hf:Wav2Vec2ForCTC", [WAVE], dict(AUDIO)),
    Case("hubert-ctc", "speech", "hf:HubertForCTC", [WAVE], dict(AUDIO)),
    Case("wavlm-ctc", "speech", "hf:WavLMForCTC", [WAVE], {**AUDIO, "num_buckets": 32,
                                                          "max_bucket_distance": 64}),
    Case("speech2text", "speech", "hf:Speech2TextForConditionalGeneration",
         ["input_features=f32[batch=2,32,16]", "decoder_input_ids=i64[batch=2,8]<64"],
         {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
          "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
          "vocab_size": 64, "input_feat_per_channel": 16, "num_conv_layers": 2,
          "conv_channels": 32, "max_source_positions": 64, "max_target_positions": 32,
          "pad_token_id": 0, "decoder_start_token_id": 1}),
    # -- contrastive ------------------------------------------------------------------
    Case("clip", "contrastive", "hf:CLIPModel",
         [text(batch=4), "pixel_values=f32[batch=4,3,32,32]"],
         {"text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                          "num_attention_heads": 2, "vocab_size": 64,
                          "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 2},
          "vision_config": dict(VIT), "projection_dim": 16}),
    Case("siglip", "contrastive", "hf:SiglipModel",
         [text(batch=4), "pixel_values=f32[batch=4,3,32,32]"],
         {"text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                          "num_attention_heads": 2, "vocab_size": 64,
                          "max_position_embeddings": 16},
          "vision_config": dict(VIT)}),
    # -- mixture of experts -------------------------------------------------------------
    Case("qwen2-moe", "moe", "hf:Qwen2MoeForCausalLM", [text()],
         {**LM, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
          "num_experts": 4, "num_experts_per_tok": 2}, options=CAUSAL),
    Case("qwen3-moe", "moe", "hf:Qwen3MoeForCausalLM", [text()],
         {**LM, "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2,
          "head_dim": 8}, options=CAUSAL),
    Case("olmoe", "moe", "hf:OlmoeForCausalLM", [text()],
         {**LM, "num_experts": 4, "num_experts_per_tok": 2}, options=CAUSAL),
    Case("switch-transformers", "moe", "hf:SwitchTransformersForConditionalGeneration",
         [text(), "decoder_input_ids=i64[batch=2,8]<64"],
         {"d_model": 32, "d_ff": 64, "d_kv": 8, "num_layers": 2, "num_decoder_layers": 2,
          "num_heads": 2, "num_experts": 4, "vocab_size": 64, "num_sparse_encoder_layers": 1,
          "num_sparse_decoder_layers": 1, "decoder_start_token_id": 0}),
    Case("granite-moe", "moe", "hf:GraniteMoeForCausalLM", [text()],
         {**LM, "num_local_experts": 4, "num_experts_per_tok": 2}, options=CAUSAL),
    # -- state space / recurrent --------------------------------------------------------
    Case("mamba", "state-space", "hf:MambaForCausalLM", [text()],
         {"hidden_size": 32, "state_size": 8, "num_hidden_layers": 2, "vocab_size": 64,
          "expand": 2, "conv_kernel": 4}, options=CAUSAL),
    Case("mamba2", "state-space", "hf:Mamba2ForCausalLM", [text()],
         {"hidden_size": 32, "num_heads": 4, "head_dim": 16, "state_size": 8, "n_groups": 1,
          "num_hidden_layers": 2, "vocab_size": 64, "chunk_size": 8, "expand": 2},
         options=CAUSAL),
    Case("rwkv", "state-space", "hf:RwkvForCausalLM", [text()],
         {"hidden_size": 32, "attention_hidden_size": 32, "intermediate_size": 64,
          "num_hidden_layers": 2, "vocab_size": 64, "context_length": 32}, options=CAUSAL),
    # -- diffusion ----------------------------------------------------------------------
    Case("unet2d-condition", "diffusion", "hf:UNet2DConditionModel",
         ["f32[batch=2,4,8,8]", "i64[batch=2]<1000", "encoder_hidden_states=f32[batch=2,6,16]"],
         {"sample_size": 8, "in_channels": 4, "out_channels": 4, "block_out_channels": [8, 16],
          "layers_per_block": 1, "cross_attention_dim": 16, "attention_head_dim": 4,
          "norm_num_groups": 4,
          "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
          "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"]}),
    Case("dit", "diffusion", "hf:DiTTransformer2DModel",
         ["f32[batch=2,4,8,8]", "timestep=i64[batch=2]<1000", "class_labels=i64[batch=2]<10"],
         {"num_attention_heads": 2, "attention_head_dim": 8, "in_channels": 4,
          "num_layers": 2, "sample_size": 8, "patch_size": 2, "num_embeds_ada_norm": 10}),
    Case("sd3-transformer", "diffusion", "hf:SD3Transformer2DModel",
         ["f32[batch=2,4,8,8]", "encoder_hidden_states=f32[batch=2,6,16]",
          "pooled_projections=f32[batch=2,16]", "timestep=i64[batch=2]<1000"],
         {"sample_size": 8, "patch_size": 2, "in_channels": 4, "num_layers": 2,
          "attention_head_dim": 8, "num_attention_heads": 2, "joint_attention_dim": 16,
          "caption_projection_dim": 16, "pooled_projection_dim": 16, "out_channels": 4,
          "pos_embed_max_size": 16}),
    Case("vq-model", "diffusion", "hf:VQModel", ["f32[batch=2,3,16,16]"],
         {"block_out_channels": [8, 16], "layers_per_block": 1, "latent_channels": 4,
          "num_vq_embeddings": 32, "norm_num_groups": 4, "sample_size": 16,
          "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
          "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"]}),
    # -- detection and dense prediction -------------------------------------------------
    Case("yolos", "detection", "hf:YolosForObjectDetection", ["pixel_values=f32[batch=2,3,32,32]"],
         {**VIT, "image_size": [32, 32], "num_detection_tokens": 5, "num_labels": 3}),
    Case("owlvit", "detection", "hf:OwlViTForObjectDetection",
         [text(batch=2), "pixel_values=f32[batch=2,3,32,32]"],
         {"text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                          "num_attention_heads": 2, "vocab_size": 64,
                          "max_position_embeddings": 16},
          "vision_config": dict(VIT), "projection_dim": 32}),
    Case("segformer", "dense", "hf:SegformerForSemanticSegmentation",
         ["pixel_values=f32[batch=2,3,32,32]"],
         {"num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1],
          "hidden_sizes": [8, 16], "patch_sizes": [7, 3], "strides": [4, 2],
          "num_attention_heads": [1, 2], "mlp_ratios": [2, 2], "decoder_hidden_size": 16,
          "num_labels": 3}),
    # -- language and vision models the project had not run ------------------------------
    Case("gemma2", "language", "hf:Gemma2ForCausalLM", [text()],
         {**LM, "head_dim": 8, "sliding_window": 4}, options=CAUSAL),
    Case("bart", "language", "hf:BartForConditionalGeneration",
         [text(), "decoder_input_ids=i64[batch=2,8]<64"],
         {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
          "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
          "vocab_size": 64, "max_position_embeddings": 32}),
    Case("levit", "vision", "hf:LevitForImageClassification",
         ["pixel_values=f32[batch=2,3,64,64]"],
         {"image_size": 64, "hidden_sizes": [16, 32], "num_attention_heads": [1, 2],
          "depths": [1, 1], "key_dim": [8, 8], "patch_size": 16, "num_labels": 5,
          "down_ops": [["Subsample", 8, 1, 4, 2, 2]]}),
    Case("regnet", "vision", "hf:RegNetForImageClassification",
         ["pixel_values=f32[batch=2,3,32,32]"],
         {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 8,
          "num_labels": 5}),
    Case("mobilevit", "vision", "hf:MobileViTForImageClassification",
         ["pixel_values=f32[batch=2,3,64,64]"],
         {"image_size": 64, "hidden_sizes": [16, 24, 32], "neck_hidden_sizes":
          [8, 8, 16, 16, 24, 24, 64], "num_labels": 5}),
    Case("patchtst", "sequence", "hf:PatchTSTForPrediction",
         ["past_values=f32[batch=2,32,3]"],
         {"num_input_channels": 3, "context_length": 32, "patch_length": 8, "patch_stride": 8,
          "prediction_length": 8, "d_model": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "ffn_dim": 32}),
]  # fmt: skip

GITHUB: list[Case] = [
    Case("pyGAT GAT", "graph", "models.py", build="GAT(8, 8, 3, dropout=0.6, alpha=0.2, nheads=2)",
         repo="Diego999/pyGAT", paths=["models.py", "layers.py"],
         inputs_from="{suite}/doctor_suite_inputs.py:graph", options={"batch_dim": "none"}),
    Case("conformer", "speech", "conformer.model:Conformer",
         build="Conformer(num_classes=10, input_dim=16, encoder_dim=32, num_encoder_layers=2, "
         "num_attention_heads=4)",
         inputs=["f32[batch=2,seq=32,16]", "i64[batch=2]<33"], repo="sooftware/conformer",
         paths=["conformer"]),
    Case("improved-diffusion UNet", "diffusion", "improved_diffusion.unet:UNetModel",
         build="UNetModel(in_channels=3, model_channels=32, out_channels=3, num_res_blocks=1, "
         "attention_resolutions=(2,), channel_mult=(1, 2), num_heads=2)",
         inputs=["f32[batch=2,3,16,16]", "i64[batch=2]<1000"], repo="openai/improved-diffusion",
         paths=["improved_diffusion"]),
    Case("TCN char model", "sequence", "TCN.char_cnn.model:TCN",
         build="TCN(32, 64, [32, 32], kernel_size=3, dropout=0.1, emb_dropout=0.1)",
         inputs=["i64[batch=2,seq=16]<64"], repo="locuslab/TCN",
         paths=["TCN/__init__.py", "TCN/tcn.py", "TCN/char_cnn/model.py"], options=CAUSAL),
]  # fmt: skip

#: Public repositories' models where doctor finds a real problem (verified by reading
#: the code at the recorded commit); reported apart from the healthy suite.
WILD: list[Case] = [
    Case("mamba-minimal", "state-space", "model.py",
         build="Mamba(ModelArgs(d_model=32, n_layer=2, vocab_size=64))",
         inputs=["i64[batch=2,seq=8]<64"], repo="johnma2006/mamba-minimal", paths=["model.py"],
         options=CAUSAL,
         finding=(
             "init-loss fail: the embedding is N(0, 1) and tied to the output head, so initial"
             " logits have std ~sqrt(d_model); the repository loads pretrained weights and "
             "never initialises for training"
         )),
    Case("sparse MoE", "moe", "moe.py",
         build="MoE(input_size=16, output_size=5, num_experts=4, hidden_size=16, k=2)",
         inputs=["f32[batch=4,16]"], repo="davidmrau/mixture-of-experts", paths=["moe.py"],
         finding=(
             "init-loss warn and overfit-batch fail: every expert ends in nn.Softmax and the "
             "repository's example trains the mixture with nn.CrossEntropyLoss, which applies "
             "log-softmax again"
         )),
    Case("VQ-VAE", "diffusion", "models.vqvae:VQVAE",
         build="VQVAE(h_dim=32, res_h_dim=16, n_res_layers=1, n_embeddings=32, embedding_dim=8, "
         "beta=0.25)",
         inputs=["f32[batch=2,3,16,16]"], repo="MishaLaskin/vqvae", paths=["models"],
         finding=(
             "device-consistency fail: quantizer.py builds its one-hot codes with .to(device) "
             "for a module-level device chosen at import (cuda if available), not the input's,"
             " so a model moved elsewhere breaks"
         )),
]  # fmt: skip
