"""The real proxies' and the path checker's rooms (core/proxy, core/pathcheck, net/proxy; lab 13).

A package (like tests/browser), so its modules import as `proxy.test_...`: no basename collides.
"""
