"""The closed-book reader: a sequence-to-sequence model answers the question from its parameters
alone, with no retrieved passage (Roberts et al. 2020, "How Much Knowledge Can You Pack Into the
Parameters of a Language Model?"; BART as in Lewis et al. 2020 (RAG), Table 1's closed-book row).

It trains as the summarization family does (teacher-forced NLL of the answer,
``lit_models.families.seq2seq``) on question -> first answer pairs, and is scored as every open-QA
reader:
exact match against any reference, predictions in ``<run dir>/predictions/<split>.jsonl`` with an
empty passage list.
"""

from collections.abc import Mapping

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.open_qa import ClosedBookDataModule
from datamodules.predictions import write_jsonl
from lit_models.archs import Model
from lit_models.core.generation import GenerationConfig
from lit_models.families.open_qa.reader import Reader
from lit_models.families.seq2seq import LitSeq2Seq
from lit_models.metrics import build_metrics


class LitClosedBook(LitSeq2Seq):
    """Generates answers, scored by the task's answer metrics (``scorer``) against the
    DataModule's references."""

    def on_validation_epoch_end(self) -> None:
        """Every process's generations, gathered, scored as answers (EM, not ROUGE)."""
        for split, score in zip(self.eval_splits, self.scores, strict=True):
            self.generations[split] = self.gather_indexed(self.generations[split])
            if self.trainer.sanity_checking:
                continue
            references = self.trainer.datamodule.answer_sets[split]
            rows = self.prediction_rows(split)
            answers = {row["id"]: row["prediction"] for row in rows}
            texts = self.texts[split]
            score.update(references, answers=[answers.get(qid, "") for qid in texts["id"]])
            self.record_metrics(split, score.compute())
            score.reset()
            if self.run_dir is not None and self.trainer.is_global_zero:
                lines = [{"id": qid, "question": question, "passages": [],
                          "prediction": answers.get(qid, ""), "references": refs}
                         for qid, question, refs in zip(texts["id"], texts["source"], references,
                                                        strict=True)]
                path = write_jsonl(self.run_dir, split, lines)
                self.predictions[split] = str(path.relative_to(self.run_dir))


class ClosedBookReader(Reader):
    """The open-QA reader ``closed_book``: an encoder-decoder answers from the question alone."""

    kinds = ("encoder-decoder",)
    retrieves = False
    with_heads = True

    def build(self, cfg: Mapping, model: Model, init_from: InitFrom):
        task, net = cfg["task"], model.net
        for key in ("source_max_length", "target_max_length"):
            if task[key] > net.config.max_length:
                raise PlmbenchError(f"task.{key}={task[key]} exceeds the {net.config.max_length} "
                                    f"positions of the model; set task.{key}<="
                                    f"{net.config.max_length}")
        dm = ClosedBookDataModule(task, model.tokenizer, net.config.decoder_start_token_id,
                                  cfg["seed"])

        def scorer(split: str):  # it retrieves nothing: no recall@k
            return build_metrics(task["metrics"], "answers", without=("rankings",),
                                 match=task["questions"]["match"])

        module = LitClosedBook(model, GenerationConfig(**task["generation"]),
                               dm.eval_split_names, dm.texts, cfg["optim"], scorer)
        return module, dm
