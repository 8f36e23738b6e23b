"""A failed run's record names the failure itself, not an exception raised while it was being
handled (Lightning's teardown after a DDP rank failed, a logger): ``bench.run.execute.original``;
an error that says on purpose what went wrong (a ``PlmbenchError``'s one line, ``raise ...
from``) is kept."""

import pytest

from bench.run.execute import original, record_error
from datamodules.errors import PlmbenchError


def raised(make):
    try:
        make()
    except BaseException as err:  # noqa: BLE001 - the test looks at it
        return err
    raise AssertionError("nothing raised")


def test_an_error_raised_while_handling_a_failure_is_not_the_failure():
    def run():
        try:
            raise ValueError("zip() argument 2 is longer than argument 1")
        except ValueError:  # teardown walks the modules and fails on its own
            raise TypeError("unhashable type: 'list'")  # noqa: B904 - what the test is about

    err = raised(run)
    assert record_error(original(err)) == "ValueError: zip() argument 2 is longer than argument 1"


@pytest.mark.parametrize("how", ["plmbench", "from", "from None"])
def test_an_error_raised_on_purpose_is_kept(how):
    def run():
        try:
            {}["batch"]
        except KeyError as err:
            if how == "plmbench":
                raise PlmbenchError("task x: no batch; set task.batch_size")  # noqa: B904
            if how == "from":
                raise RuntimeError("wrapped") from err
            raise RuntimeError("wrapped") from None

    err = raised(run)
    assert original(err) is err
