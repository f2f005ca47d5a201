"""The course's checked exercises (and, in sibling modules, the exit quiz).

``check("04.1", answer)`` prints right or wrong with a hint and returns a truthy/falsy
:class:`CheckResult`. The answer keys are computed by running kvlab. Each module of this
package registers its exercises with :func:`register` when imported; :func:`check` imports
them all on first use.
"""

from kvlab.course.check import (
    CheckResult,
    Exercise,
    answer_key,
    check,
    exercise,
    exercises,
    register,
)

__all__ = ["CheckResult", "Exercise", "answer_key", "check", "exercise", "exercises", "register"]
