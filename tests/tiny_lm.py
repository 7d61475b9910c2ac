"""A random 2-layer Llama with a small byte-level BPE tokenizer and SmolLM2's chat specials: the language model
the training tests build on instead of the bundled weights (seconds, not minutes)."""

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def save_tiny_chat_lm(folder, words: str):
    """Write the model and its tokenizer (trained on `words`, the vocabulary the test's texts use) to `folder`;
    returns the tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator([words] * 20, trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", bos_token="<|im_start|>",
                                  pad_token="<|im_end|>", unk_token="<|endoftext|>")
    torch.manual_seed(0)
    lm = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id,
                                      bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id))
    lm.save_pretrained(folder)
    tok.save_pretrained(folder)
    return tok


def save_tiny_byte_llama(folder, text_chars: int = 20000, vocab: int = 300, hidden: int = 64, intermediate: int = 96,
                         heads: int = 4, kv_heads: int = 2, positions: int = 128):
    """A random 2-layer Llama with the byte-level BPE tokenizer `toolpath compress` trains on its own text: the
    folder compress tests quantize (seconds). Returns `folder`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from toolpath.compress.text import split_text
    from toolpath.compress.tiny_moe import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer(split_text()[0][:text_chars], vocab=vocab)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=positions,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    LlamaForCausalLM(config).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder
