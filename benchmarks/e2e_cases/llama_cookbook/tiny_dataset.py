"""A tiny custom dataset for llama-cookbook (`--dataset custom_dataset --custom_dataset.file tiny_dataset.py`)."""

TEXTS = [
    "Question: Give three tips for staying healthy. Answer: Eat well, exercise and sleep.",
    "Question: What is the capital of France? Answer: Paris.",
    "Question: Add 2 and 3. Answer: 5.",
    "Question: Name a colour. Answer: Blue.",
] * 4


def get_custom_dataset(dataset_config, tokenizer, split):
    import datasets

    def tokenize(example):
        ids = tokenizer(example["text"])["input_ids"] + [tokenizer.eos_token_id]
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": list(ids)}

    return datasets.Dataset.from_dict({"text": TEXTS}).map(tokenize, remove_columns=["text"])
