"""A pretraining run's recipe line (bench/run/recipe.py) names how long it trained: its steps, or,
for a run bounded by epochs alone (max_steps -1), its epochs."""

from bench.run.recipe import recipe_of


def config(max_steps: int, max_epochs: int) -> dict:
    return {"objective": {"name": "mlm"}, "task": {"batch_size": 32, "max_length": 128},
            "optim": {"lr": 5e-4, "warmup_ratio": 0.1},
            "trainer": {"max_steps": max_steps, "max_epochs": max_epochs}}


def test_the_recipe_names_steps_or_epochs():
    assert ", batch 32, 1M steps, lr 0.0005, warmup 10%" in recipe_of(config(10**6, -1))["text"]
    assert ", batch 32, 10,000 steps, lr" in recipe_of(config(10_000, 3))["text"]
    epochs = recipe_of(config(-1, 10))
    assert ", batch 32, 10 epochs, lr" in epochs["text"] and epochs["epochs"] == 10
    assert ", batch 32, unbounded, lr" in recipe_of(config(-1, -1))["text"]
