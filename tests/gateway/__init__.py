"""The gateway's room (core/gateway, net/gateway): breaker, fallback and the gateway on a real network path.

A package (like tests/browser), so its modules import as `gateway.test_...`: no basename collides.
"""
