"""The labs and what serves them: notebooks, exercises and solutions, quizzes, progress, figures, the labs' claims.

A package (like tests/browser), so its modules import as `labs.test_...`: no basename collides.
"""
