"""The library flat at each layer's root: SSE parser, accumulators, endings, retry, resume, client, SDK, model.

A package (like tests/browser), so its modules import as `library.test_...`: no basename collides.
"""
