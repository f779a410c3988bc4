"""The agent engine: run loop, middleware contract, messages, tools, state, events, store, models.

Never imports Qt (house rule; tests/engine/test_layering.py keeps it so).
"""
