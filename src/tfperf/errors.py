"""The base of every error caused by the user's input (a run file, data, an option).

The command line prints these as one clear message and exits with status 2; anything
else is a bug and keeps its traceback.
"""


class UserError(ValueError):
    """Bad input; the message names the file, row, field or option and what was expected."""
