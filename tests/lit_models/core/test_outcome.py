"""A family's module hands the run its result as one value (lit_models/core/outcome.py), and is
told its run directory through its own setter, not an attribute set from outside."""

from pathlib import Path

from lit_models.core.module import PlmModule
from lit_models.core.outcome import FamilyResult


def test_the_result_is_what_the_module_recorded(tmp_path, monkeypatch):
    module = PlmModule({"lr": 1e-3}, num_layers=1)
    assert module.result() == FamilyResult()  # nothing evaluated yet: empty, no notes
    monkeypatch.setattr(module, "log_dict", lambda *args, **kwargs: None)  # no Trainer here
    module.record_metrics("validation", {"bleu": 12.5}, {"bleu": "nrefs:1|tok:13a"})
    module.notes.append("the checkpoint's head does not fit: a new one trains")
    module.write_predictions_to(tmp_path)
    module.predictions["validation"] = "predictions/validation.jsonl"
    result = module.result()
    assert result.metrics == {"validation": {"bleu": 12.5}}
    assert result.metric_signatures == {"validation": {"bleu": "nrefs:1|tok:13a"}}
    assert result.predictions == {"validation": "predictions/validation.jsonl"}
    assert result.notes == ("the checkpoint's head does not fit: a new one trains",)
    assert module.run_dir == Path(tmp_path)
