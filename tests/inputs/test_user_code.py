"""inputs/user_code.py: a function named in a run file that raises becomes one paragraph
naming the run-file key, the function, the error's first line and the line of the user's own
file it came from (frames of tfperf and installed libraries skipped); a UserError passes."""

from __future__ import annotations

import json

import pytest

from tfperf.errors import UserError
from tfperf.inputs.user_code import UserCodeError, call_user, describe_failure, user_frame
from tfperf.util.imports import load_object


@pytest.fixture
def user_module(tmp_path):
    (tmp_path / "my_user_code.py").write_text(
        "import json\n"
        "def build(size):\n"
        "    return helper(size)\n"
        "def helper(size):\n"
        "    if size < 0:\n"
        "        raise ValueError(f'size {size} is negative\\nmore detail')\n"
        "    return json.loads('{')\n"
    )
    return load_object("my_user_code:build", field="model.name", search_dir=str(tmp_path))


def test_the_error_names_the_key_the_function_and_the_users_line(user_module):
    with pytest.raises(UserCodeError) as err:
        call_user(user_module, "model.name", "my_user_code:build", "building the model",
                  "run.yaml", size=-1)  # fmt: skip
    msg = str(err.value)
    assert msg.startswith("model.name: building the model, my_user_code:build raised ")
    assert "ValueError: size -1 is negative (at " in msg and "more detail" not in msg
    assert "my_user_code.py, line 6, in helper" in msg  # the innermost frame of the user's
    assert msg.endswith("or point model.name at another one in run.yaml")
    assert err.value.__cause__ is None and isinstance(err.value, UserError)


def test_library_frames_are_skipped_for_the_users_own(user_module):
    with pytest.raises(json.JSONDecodeError) as err:
        user_module(size=1)
    # json's own frames are the standard library's: the user's call of it is named
    assert user_frame(err.value).endswith("my_user_code.py, line 7, in helper")
    assert describe_failure(err.value).startswith("JSONDecodeError: Expecting property name")


def test_an_error_without_a_message_or_user_frame():
    try:
        {}.pop("missing")
    except KeyError as exc:
        key_error = exc
    assert describe_failure(KeyError()) == "KeyError"
    # raised in this test file: a user's frame like any other
    assert "test_user_code.py" in describe_failure(key_error)


def test_a_user_error_and_a_return_value_pass_through():
    def refuses():
        raise UserError("already worded")

    with pytest.raises(UserError, match="^already worded$"):
        call_user(refuses, "data.pipeline", "m:f", "building", None)
    assert call_user(lambda n: n * 2, "data.pipeline", "m:f", "building", None, n=4) == 8
